# The two images the chart runs, each FROM scratch around the project's static binaries. The project's own
# node (e2e/images) builds and runs exactly these.
#
# 1. The static binaries (glibc linked in, so they run on any node's libc; e2e/images builds the same):
#      RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --locked \
#        --target x86_64-unknown-linux-gnu \
#        --bin linkerd-multus-operator --bin linkerd-cni-install --bin linkerd-cni
# 2. The images, with this checkout as the context (.dockerignore lets in nothing but those binaries):
#      docker build --target operator -t ghcr.io/linkerd-multus/linkerd-multus-operator:0.1.0 .
#      docker build --target cni      -t ghcr.io/linkerd-multus/linkerd-cni-install:0.1.0 .
#    (the chart's image and cni.image values; the default target is the operator). `buildah build` takes
#    the same arguments. Binaries from elsewhere: a context directory holding them, and
#      buildah build -f Dockerfile --target cni --build-arg BIN_DIR=<their directory in it> <context>
#
# Nothing else goes in: the binaries are static, talk only to the apiserver (trusting the service account's
# ca.crt), run under numeric uids, and get /tmp as an emptyDir from the chart.
ARG BIN_DIR=target/x86_64-unknown-linux-gnu/release

# --- the CNI node installer: runs as root (it writes the node's CNI directories) and copies the
# linkerd-cni plugin next to it onto the node.
FROM scratch AS cni
ARG BIN_DIR
COPY ${BIN_DIR}/linkerd-cni-install ${BIN_DIR}/linkerd-cni /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/linkerd-cni-install"]

# --- the operator (NAD controller + webhook): non-root.
FROM scratch AS operator
ARG BIN_DIR
COPY ${BIN_DIR}/linkerd-multus-operator /usr/local/bin/
USER 65532:65532
EXPOSE 8081 9443
ENTRYPOINT ["/usr/local/bin/linkerd-multus-operator"]
