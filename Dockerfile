# syntax=docker/dockerfile:1
# Static musl builds of the three binaries, in two minimal images:
#   docker build --target operator -t ghcr.io/linkerd-multus/linkerd-multus-operator:0.1.0 .
#   docker build --target cni      -t ghcr.io/linkerd-multus/linkerd-cni-install:0.1.0 .
# (the chart's image and cni.image values). The default target is the operator.

# --- build: Alpine's Rust targets musl and links statically by default; ring needs a C compiler.
FROM docker.io/library/rust:1-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bins -p linkerd-multus-operator -p linkerd-cni -p linkerd-cni-installer \
 && mkdir -p /out \
 && cp target/release/linkerd-multus-operator target/release/linkerd-cni target/release/linkerd-cni-install /out/

# --- the CNI node installer: runs as root (it writes the node's CNI directories) and copies the
# linkerd-cni plugin next to it onto the node.
FROM gcr.io/distroless/static-debian12:latest AS cni
COPY --from=build /out/linkerd-cni /out/linkerd-cni-install /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/linkerd-cni-install"]

# --- the operator (NAD controller + webhook): non-root, nothing but the binary and CA certificates.
FROM gcr.io/distroless/static-debian12:nonroot AS operator
COPY --from=build /out/linkerd-multus-operator /usr/local/bin/
USER 65532:65532
EXPOSE 8081 9443
ENTRYPOINT ["/usr/local/bin/linkerd-multus-operator"]
