# e2e/lib/testbed-node-profile.sh — the node's layout (sourced by e2e/lib/testbed-node.sh).
#
# LINKERD_MULTUS_NODE_PROFILE at `up` chooses it; it is recorded in $STATE/node/profile (key=value
# lines), which every later command and the tests read (`linkerd_multus_e2e::node::Profile`):
#   plain      (default) the runtime's CNI directories are $STATE/cni/net.d and $STATE/cni/bin, named
#              so in the chart's values; Multus' config there.
#   openshift  an OpenShift 4.18+ node's layout (the machine-config's crio.conf, the cluster network
#              operator's Multus): the runtime reads CNI configs from the node's /etc/kubernetes/cni/net.d
#              and plugins from /var/lib/cni/bin; the node's /etc/cni/net.d is an empty directory nobody
#              reads; Multus (the stand-in, as `multus-shim`) is laid out as the network operator's thick
#              daemon leaves it: its generated 00-multus.conf with the daemon's container paths
#              (clusterNetwork /host/run/multus/cni/net.d/...), OpenShift's isolation, globals and chain,
#              the cluster network's config in /run/multus/cni/net.d (the node's tmpfs /run), and the
#              daemon's mounts and credential where the shim finds the daemon (/run/multus/socket, see
#              e2e/src/multus/thick.rs). The chart is installed with helm/values-openshift.yaml as is.
#              With LINKERD_MULTUS_NODE_MULTUS=thick the real daemon runs instead of the stand-in, with
#              the network operator's daemon config and in a container of its own as OpenShift's
#              DaemonSet mounts it (`openshift_daemon_pod`): it writes that 00-multus.conf itself.
# In the node's mount namespace, /etc gets an overlay (as /var has) so /etc/kubernetes can exist without
# touching the host; the node paths are bind mounts of $STATE/cni/net.d and $STATE/cni/bin, so the
# tests read the same files from the host.

OPENSHIFT_NET_DIR=/etc/kubernetes/cni/net.d
OPENSHIFT_BIN_DIR=/var/lib/cni/bin
OPENSHIFT_GLOBALS=default,openshift-multus,openshift-sriov-network-operator,openshift-cnv
OPENSHIFT_CHAIN=vendor-cni-chain
# The daemon's cniVersion in the network operator's daemon config.
OPENSHIFT_CNI_VERSION=0.3.1

node_profile() { sed -n 's/^profile=//p' "$STATE/node/profile" 2>/dev/null | grep . || echo plain; }

# The profile LINKERD_MULTUS_NODE_PROFILE asks for, checked by `up` before anything starts.
wanted_node_profile() {
    local profile="${LINKERD_MULTUS_NODE_PROFILE:-plain}"
    case "$profile" in
    plain | openshift) ;;
    *) fail "LINKERD_MULTUS_NODE_PROFILE=$profile: use plain (the default) or openshift" ;;
    esac
    if [ "$profile" = openshift ] && [ "${LINKERD_MULTUS_NODE_MULTUS:-stand-in}" = thin ]; then
        fail "LINKERD_MULTUS_NODE_PROFILE=openshift runs Multus thick, as OpenShift does (the stand-in or LINKERD_MULTUS_NODE_MULTUS=thick), not the thin plugin"
    fi
    if [ -n "${LINKERD_MULTUS_NODE_PROFILE:-}" ] && [ "$profile" != "$(node_profile)" ] && node_is_up; then
        fail "the node in $STATE has profile $(node_profile), not $profile: e2e/testbed down --node first"
    fi
    echo "$profile"
}

# At `up`, once the state directory is new: the profile and its paths, for every later command.
choose_node_profile() {
    local profile
    profile="$(wanted_node_profile)" || exit 1
    mkdir -p "$STATE/node" "$STATE/cni/net.d" "$STATE/cni/bin"
    if [ "$profile" = openshift ]; then
        mkdir -p "$STATE/node/etc-upper" "$STATE/node/etc-work" "$STATE/node/etc-cni-net.d"
        cat >"$STATE/node/profile" <<EOF
profile=openshift
cni_net_dir=$OPENSHIFT_NET_DIR
cni_bin_dir=$OPENSHIFT_BIN_DIR
chart_values=helm/values-openshift.yaml
global_namespaces=$OPENSHIFT_GLOBALS
EOF
    else
        cat >"$STATE/node/profile" <<EOF
profile=plain
cni_net_dir=$STATE/cni/net.d
cni_bin_dir=$STATE/cni/bin
chart_values=
global_namespaces=default
EOF
    fi
}

profile_value() { sed -n "s/^$1=//p" "$STATE/node/profile" 2>/dev/null; }
# The runtime's CNI directories as the node's processes see them.
node_cni_net_dir() { profile_value cni_net_dir | grep . || echo "$STATE/cni/net.d"; }
node_cni_bin_dir() { profile_value cni_bin_dir | grep . || echo "$STATE/cni/bin"; }

# Lines for the namespace holder's script: the profile's mounts in the node's mount namespace.
profile_holder_mounts() {
    [ "$(node_profile)" = openshift ] || return 0
    local n="$STATE/node"
    cat <<EOF
mount -t overlay testbed-etc -o lowerdir=/etc,upperdir=$n/etc-upper,workdir=$n/etc-work /etc
mkdir -p $OPENSHIFT_NET_DIR $OPENSHIFT_BIN_DIR /etc/cni/net.d
mount --bind $STATE/cni/net.d $OPENSHIFT_NET_DIR
mount --bind $STATE/cni/bin $OPENSHIFT_BIN_DIR
mount --bind $n/etc-cni-net.d /etc/cni/net.d
EOF
}

# OpenShift's Multus as the network operator's thick daemon leaves it: the stand-in playing shim and
# daemon, or the real daemon configured as the operator configures it.
write_openshift_multus() {
    mkdir -p "$STATE/multus"
    # The cluster network (OVN-Kubernetes' place): one plugin's .conf, written into /run at each boot.
    sed "s/\"cniVersion\": \"[^\"]*\"/\"cniVersion\": \"$OPENSHIFT_CNI_VERSION\"/" <(cluster_network_plugin) \
        >"$STATE/multus/$MULTUS_CLUSTER_CONF"
    if [ "$(node_multus_kind)" = thick ]; then
        write_openshift_daemon
        return
    fi
    ln -sf multus-stand-in "$STATE/cni/bin/multus-shim"
    # What Multus' generator writes from OpenShift's daemon config (bindata/network/multus/multus.yaml).
    cat >"$STATE/cni/net.d/00-multus.conf" <<EOF
{"cniVersion":"$OPENSHIFT_CNI_VERSION","name":"multus-cni-network","type":"multus-shim","logLevel":"verbose","logToStderr":true,"clusterNetwork":"/host$MULTUS_AUTOCONF_DIR/$MULTUS_CLUSTER_CONF","namespaceIsolation":true,"globalNamespaces":"$OPENSHIFT_GLOBALS","auxiliaryCNIChainName":"$OPENSHIFT_CHAIN","daemonSocketDir":"$MULTUS_SOCKET_DIR"}
EOF
    # The daemon's container (its volume mounts, container path: node path) and its credential.
    {
        printf '{\n  "kubeconfig": "%s",\n  "mounts": [\n' "$STATE/node/multus.kubeconfig"
        local sep="" container node
        while read -r container node; do
            printf '%s    {"container": "%s", "node": "%s"}' "$sep" "$container" "$node"
            sep=$',\n'
        done < <(openshift_daemon_mounts)
        printf '\n  ]\n}\n'
    } >"$STATE/multus/stand-in-daemon.json"
}

# The volume mounts of OpenShift's Multus DaemonSet that the daemon's work touches, "container node"
# a line, parents before their children (bindata/network/multus/multus.yaml).
openshift_daemon_mounts() {
    cat <<EOF
/host/etc/cni/net.d $OPENSHIFT_NET_DIR
/host/opt/cni/bin $OPENSHIFT_BIN_DIR
/host/run/multus /run/multus
/host/run/multus/cni/net.d $MULTUS_AUTOCONF_DIR
/var/lib/cni/bin /var/lib/cni/bin
/var/lib/cni/multus /var/lib/cni/multus
/etc/kubernetes /etc/kubernetes
/hostroot /
EOF
}

# The real thick daemon: the shim and passthru in the node's /var/lib/cni/bin, and the network
# operator's daemon config, every path as the daemon's container sees it (its generator copies them
# into 00-multus.conf).
write_openshift_daemon() {
    link_thick_binaries
    cat >"$STATE/multus/daemon-config.json" <<EOF
{
  "cniVersion": "$OPENSHIFT_CNI_VERSION",
  "chrootDir": "/hostroot",
  "logToStderr": true,
  "logLevel": "verbose",
  "binDir": "$OPENSHIFT_BIN_DIR",
  "cniConfigDir": "/host/etc/cni/net.d",
  "multusConfigFile": "auto",
  "multusAutoconfigDir": "/host$MULTUS_AUTOCONF_DIR",
  "namespaceIsolation": true,
  "globalNamespaces": "$OPENSHIFT_GLOBALS",
  "readinessindicatorfile": "/host$MULTUS_AUTOCONF_DIR/$MULTUS_CLUSTER_CONF",
  "daemonSocketDir": "$MULTUS_SOCKET_DIR",
  "socketDir": "/host$MULTUS_SOCKET_DIR",
  "auxiliaryCNIChainName": "$OPENSHIFT_CHAIN"
}
EOF
    openshift_daemon_pod >"$STATE/multus/multus-daemon-pod.sh"
}

# The script that runs the real daemon in a container of its own, started in the node's namespaces
# with the daemon's command as arguments. In a mount namespace of its own, a tmpfs on /mnt becomes the
# container's root: the node's / as /hostroot, the node's other top-level directories as themselves
# (the image's stand-in: the daemon binary is the platform's, where it is on the node), the DaemonSet's
# mounts, then chroot. /hostroot is bound first and /mnt skipped, so no bind holds itself. The node's
# mounts reach the container as HostToContainer has them: the node's mounts are made shared (a systemd
# host's are) and the container's copies are their slaves, so what the node mounts later (containerd's
# netns, a drill's overlay on /usr/sbin) reaches the plugins the daemon runs in /hostroot.
openshift_daemon_pod() {
    cat <<EOF
set -e
if [ "\${1:-}" != inside ]; then
    mount --make-rshared /
    exec unshare --mount --propagation slave bash "\$0" inside "\$@"
fi
shift
mount -t tmpfs -o mode=755 multus-pod /mnt
mkdir /mnt/hostroot && mount --rbind / /mnt/hostroot
for e in /*; do
    if [ "\$e" = /mnt ]; then mkdir /mnt/mnt
    elif [ -L "\$e" ]; then ln -s "\$(readlink "\$e")" "/mnt\$e"
    elif [ -d "\$e" ]; then mkdir "/mnt\$e" && mount --rbind "\$e" "/mnt\$e"
    fi
done
while read -r container node; do
    [ "\$container" != /hostroot ] || continue
    mkdir -p "\$node" "/mnt\$container"
    mount --rbind "\$node" "/mnt\$container"
done <<MOUNTS
$(openshift_daemon_mounts)
MOUNTS
exec chroot /mnt "\$@"
EOF
}

# What the node's boot and the daemon's start put into the node's /run (a tmpfs): the cluster
# network's config and the stand-in daemon's file. At `up` and after each reboot (the real daemon's
# are start_node_multus').
start_openshift_multus() {
    [ "$(node_profile)" = openshift ] && [ "$(node_multus_kind)" = stand-in ] || return 0
    step "OpenShift profile: the cluster network in $MULTUS_AUTOCONF_DIR, Multus' daemon (stand-in) in $MULTUS_SOCKET_DIR"
    "${IN_NODE[@]}" sh -c "mkdir -p $MULTUS_AUTOCONF_DIR $MULTUS_SOCKET_DIR &&
        cp '$STATE/multus/$MULTUS_CLUSTER_CONF' $MULTUS_AUTOCONF_DIR/ &&
        cp '$STATE/multus/stand-in-daemon.json' $MULTUS_SOCKET_DIR/"
}
