# e2e/lib/testbed-node-multus.sh — the node's Multus (sourced by e2e/lib/testbed-node.sh).
#
# LINKERD_MULTUS_NODE_MULTUS at `up` chooses it; it is recorded in $STATE/node/multus, which every later
# command (reboot, restart-multus, the tests) reads:
#   stand-in  (default) the project's stand-in for Multus' thin plugin, linked as `multus` by
#             e2e/images: a clone of the project has nothing else.
#   thin      the real Multus v4.2.2 thin plugin as `multus` (and its `passthru`, the head of the
#             auxiliary chain), with the same 00-multus.conf as the stand-in's.
#   thick     the real Multus v4.2.2 thick plugin as OpenShift runs it: `multus-daemon` with a daemon
#             config as OpenShift's network operator writes it (the cluster network's config read from
#             /run/multus/cni/net.d, namespace isolation and globalNamespaces as the scenario sets them),
#             which writes 00-multus.conf (type `multus-shim`) into the node's net.d and serves the shim
#             on a socket in /run/multus; `multus-shim` and `passthru` in the node's CNI bin dir. On the
#             OpenShift profile, with the network operator's daemon config and container
#             (e2e/lib/testbed-node-profile.sh).
# The real ones come only from the real platform (LINKERD_MULTUS_PLATFORM, unpacked and checked by
# e2e/lib/platform); without it `up` refuses them, saying why.
#
# Thick runs as a daemon of the node, not as a pod: the node has one kubelet and no DaemonSet of Multus,
# and a pod would need the image Multus cannot be built into here. What a pod would have it gets
# otherwise: its in-cluster credential (the static token of the `multus` identity in
# /run/secrets/kubernetes.io/serviceaccount, which client-go's in-cluster config reads, and
# KUBERNETES_SERVICE_HOST/PORT), MULTUS_NODE_NAME, and a start after each reboot.

MULTUS_VERSION_NAME=multus-v4.2.2
# Where OpenShift's network operator has the cluster network's config and Multus' socket (tmpfs).
MULTUS_AUTOCONF_DIR=/run/multus/cni/net.d
MULTUS_SOCKET_DIR=/run/multus/socket
MULTUS_SA_DIR=/run/secrets/kubernetes.io/serviceaccount
# The cluster network's config file in MULTUS_AUTOCONF_DIR (thick). A single plugin's `.conf`, as
# OpenShift's: Multus v4.2.2 caches a `.conflist` named by clusterNetwork lossily, and the bridge DEL
# then fails with `no IP ranges specified` (measured with the thin plugin, 2026-11-27).
MULTUS_CLUSTER_CONF=10-testbed.conf

node_multus_kind() { cat "$STATE/node/multus" 2>/dev/null || echo stand-in; }

# NODE_DAEMONS with Multus' daemon exactly when the node runs the thick plugin.
track_multus_daemon() {
    local d kept=()
    for d in "${NODE_DAEMONS[@]}"; do [ "$d" = multus-daemon:multus-daemon ] || kept+=("$d"); done
    [ "$(node_multus_kind)" = thick ] && kept+=(multus-daemon:multus-daemon)
    NODE_DAEMONS=("${kept[@]}")
}

# The real platform's binary NAME (e2e/lib/platform path), or a failure naming what is missing.
multus_platform_binary() {
    local out
    out="$("$ROOT/e2e/lib/platform" path "$1" 2>&1)" || fail "the real Multus ($1): $out"
    echo "$out"
}

# The real platform's binaries a kind needs.
multus_binaries() {
    case "$1" in
    thin) echo "$MULTUS_VERSION_NAME-multus $MULTUS_VERSION_NAME-passthru" ;;
    thick) echo "$MULTUS_VERSION_NAME-multus-daemon $MULTUS_VERSION_NAME-multus-shim $MULTUS_VERSION_NAME-passthru" ;;
    esac
}

# The Multus LINKERD_MULTUS_NODE_MULTUS asks for, checked by `up` before anything starts: a known
# name, a real one only with the real platform, and not another than the one a running node has.
wanted_node_multus() {
    local kind="${LINKERD_MULTUS_NODE_MULTUS:-stand-in}" why
    case "$kind" in
    stand-in | thin | thick) ;;
    *) fail "LINKERD_MULTUS_NODE_MULTUS=$kind: use stand-in (the default), thin or thick" ;;
    esac
    if [ "$kind" != stand-in ]; then
        why="$("$ROOT/e2e/lib/platform" reason)"
        [ -z "$why" ] || fail "LINKERD_MULTUS_NODE_MULTUS=$kind runs the real Multus, which only the real platform has: $why"
        # Unpacked and checked now: a broken platform fails `up` before it starts anything.
        local b
        for b in $(multus_binaries "$kind"); do multus_platform_binary "$b" >/dev/null; done
    fi
    if [ -n "${LINKERD_MULTUS_NODE_MULTUS:-}" ] && [ "$kind" != "$(node_multus_kind)" ] && node_is_up; then
        fail "the node in $STATE runs Multus $(node_multus_kind), not $kind: e2e/testbed down --node first"
    fi
    echo "$kind"
}

# At `up`, once the state directory is new: records the choice for every later command.
choose_node_multus() {
    local kind
    kind="$(wanted_node_multus)" || exit 1
    mkdir -p "$STATE/node"
    echo "$kind" >"$STATE/node/multus"
}

# The cluster network (bridge + host-local) as one plugin's config.
cluster_network_plugin() {
    cat <<EOF
{
  "cniVersion": "0.4.0", "name": "testbed", "type": "bridge", "bridge": "$POD_BRIDGE", "isGateway": true,
  "ipMasq": false, "hairpinMode": true,
  "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$POD_SUBNET" }]], "routes": [{ "dst": "0.0.0.0/0" }] }
}
EOF
}

# The thick plugin's shim and passthru in the node's CNI bin dir, its daemon's path in $STATE/multus.
link_thick_binaries() {
    mkdir -p "$STATE/multus"
    ln -sf "$(multus_platform_binary "$MULTUS_VERSION_NAME-multus-shim")" "$STATE/cni/bin/multus-shim"
    ln -sf "$(multus_platform_binary "$MULTUS_VERSION_NAME-passthru")" "$STATE/cni/bin/passthru"
    multus_platform_binary "$MULTUS_VERSION_NAME-multus-daemon" >"$STATE/multus/daemon-path"
}

# Multus' place in the node's CNI config, for the kind recorded at `up`.
write_node_multus() {
    local kind bin="$STATE/cni/bin"
    kind="$(node_multus_kind)"
    # The OpenShift profile lays Multus out as OpenShift's network operator does.
    if [ "$(node_profile)" = openshift ]; then write_openshift_multus; return; fi
    case "$kind" in
    stand-in | thin)
        # The stand-in (linked into cni/bin as `multus` by e2e/images) or the real thin plugin is the
        # node's only network, in Multus' own file and type, so the installer reads it as the node's
        # Multus; the cluster network (bridge + host-local) is its delegate, so pods without a networks
        # annotation get exactly that, and the NADs a pod names run after it as Multus runs them.
        cat >"$STATE/cni/net.d/00-multus.conf" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "multus-cni-network",
  "type": "multus",
  "kubeconfig": "$STATE/node/multus.kubeconfig",
  "delegates": [{
    "cniVersion": "0.4.0",
    "name": "testbed",
    "plugins": [
      {
        "type": "bridge", "bridge": "$POD_BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
        "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$POD_SUBNET" }]], "routes": [{ "dst": "0.0.0.0/0" }] }
      }
    ]
  }]
}
EOF
        if [ "$kind" = thin ]; then
            ln -sf "$(multus_platform_binary "$MULTUS_VERSION_NAME-multus")" "$bin/multus"
            ln -sf "$(multus_platform_binary "$MULTUS_VERSION_NAME-passthru")" "$bin/passthru"
        fi
        ;;
    thick)
        link_thick_binaries
        cluster_network_plugin >"$STATE/multus/$MULTUS_CLUSTER_CONF"
        # OpenShift's keys (bindata/network/multus/multus.yaml), this node's paths. Isolation starts off
        # as on the stand-in's node; the scenario turns it on (then restarts the daemon).
        cat >"$STATE/multus/daemon-config.json" <<EOF
{
  "cniVersion": "0.3.1",
  "logToStderr": true,
  "logLevel": "verbose",
  "binDir": "$bin",
  "cniConfigDir": "$STATE/cni/net.d",
  "multusConfigFile": "auto",
  "multusAutoconfigDir": "$MULTUS_AUTOCONF_DIR",
  "daemonSocketDir": "$MULTUS_SOCKET_DIR",
  "socketDir": "$MULTUS_SOCKET_DIR"
}
EOF
        ;;
    esac
}

# What the thick daemon needs in the node's /run (a tmpfs, empty after a reboot): the cluster network's
# config, as the node's network plugin writes it at boot, and the in-cluster credential.
write_multus_run_files() {
    local token
    token="$(sed -n 's/^ *token: //p' "$STATE/node/multus.kubeconfig")"
    [ -n "$token" ] || fail "no token in $STATE/node/multus.kubeconfig"
    "${IN_NODE[@]}" sh -c "mkdir -p $MULTUS_AUTOCONF_DIR $MULTUS_SA_DIR &&
        cp '$STATE/multus/$MULTUS_CLUSTER_CONF' $MULTUS_AUTOCONF_DIR/ &&
        cp '$STATE/pki/ca.crt' $MULTUS_SA_DIR/ca.crt && echo default >$MULTUS_SA_DIR/namespace &&
        umask 077 && printf %s '$token' >$MULTUS_SA_DIR/token"
}

# Starts the thick daemon (nothing for the other kinds) and waits until it serves its socket and has
# written 00-multus.conf (it deletes that file when it stops).
start_node_multus() {
    [ "$(node_multus_kind)" = thick ] || return 0
    local daemon_bin conf="$STATE/cni/net.d/00-multus.conf"
    daemon_bin="$(cat "$STATE/multus/daemon-path")"
    step "start Multus' thick daemon ($("$daemon_bin" -version 2>&1 | head -1 || true))" "see $STATE/multus-daemon.log"
    # Multus' manifest brings its CRD, so the daemon starts with it served: the daemon reads NADs
    # from an informer, which retries a kind not served with a backoff of up to ~30 s; pods naming a
    # NAD fail their sandboxes meanwhile (`cannot find a network-attachment-definition`, measured).
    kube get crd network-attachment-definitions.k8s.cni.cncf.io >/dev/null 2>&1 ||
        kube apply -f "$ROOT/helm/crds-optional/network-attachment-definition.yaml" >/dev/null ||
        fail "cannot apply Multus' NetworkAttachmentDefinition CRD"
    # A restart's log follows the last one's (the daemon's log is opened anew).
    [ -f "$STATE/multus-daemon.log" ] && cat "$STATE/multus-daemon.log" >>"$STATE/multus-daemon.previous.log"
    write_multus_run_files
    # On the OpenShift profile in its container, as OpenShift's DaemonSet runs it.
    local pod=()
    [ "$(node_profile)" != openshift ] || pod=(bash "$STATE/multus/multus-daemon-pod.sh")
    daemon multus-daemon "${pod[@]}" env KUBERNETES_SERVICE_HOST="$NODE_IP" KUBERNETES_SERVICE_PORT="$API_PORT" \
        MULTUS_NODE_NAME="$NODE_NAME" "$daemon_bin" -config "$STATE/multus/daemon-config.json"
    wait_for 60 "Multus' daemon serves $MULTUS_SOCKET_DIR and wrote $conf" multus-daemon:multus-daemon \
        "${IN_NODE[@]}" sh -c "test -S $MULTUS_SOCKET_DIR/multus.sock && test -s '$conf'"
}

stop_node_multus() {
    stop_pid "$STATE/multus-daemon.pid" multus-daemon
}

# After a change of $STATE/multus/daemon-config.json (thick only): the daemon restarted, as a rollout of
# Multus' DaemonSet does; 00-multus.conf is gone meanwhile and written anew from the new config.
node_restart_multus() {
    [ "$(node_multus_kind)" = thick ] || fail "the node runs Multus $(node_multus_kind): only thick has a daemon to restart"
    stop_node_multus
    start_node_multus
}
