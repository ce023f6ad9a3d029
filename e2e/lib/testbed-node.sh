# e2e/lib/testbed-node.sh — the node mode of e2e/testbed (sourced by it, never run alone).
#
# One node, everything real: etcd, kube-apiserver, controller-manager, scheduler, kubelet, kube-proxy,
# containerd + runc. The host is left untouched:
#   - every daemon runs in one network namespace and one private mount namespace, both held by a
#     `holder` process. In there: a tmpfs on /run, an overlay on /var (kubelet, libcni and containerd's
#     shims write there), files bind-mounted over the three /proc/sys values the kubelet insists on, a
#     bridge carrying the node's address, and the pod bridge the CNI bridge plugin makes.
#   - the kubelet's pods live under a cgroup root of their own, in every v1 hierarchy.
#   - containerd has its own root, state and socket, its CNI binaries in a directory of links.
#   - kube-proxy writes its iptables rules in the node's netns; it leaves conntrack sysctls (global
#     ones among them) alone.
# The apiserver lives in the node's netns, not on the host's loopback, because it must reach pods
# (webhooks behind Services, with aggregator routing) and the kubelet (logs, exec, port-forward) as in a
# real cluster. The host reaches it through e2e/lib/relay.py: a loopback listener that joined the node's
# netns after binding, so the host gets no interface, no route and no forwarding sysctl.
# `down` stops exactly what `up` started, by PID, then checks that no process is left in the node's
# namespaces, no cgroup and no host mount (node_check_nothing_left).

NODE_NAME=testbed-node
NODE_IP=10.231.0.1
NODE_BRIDGE=lmtb-node
POD_BRIDGE=lmtb-pods
POD_SUBNET=10.232.0.0/24
SERVICE_CIDR=10.96.0.0/16
API_PORT=6443
# One cgroup root per state directory, so testbeds of several worktrees never share one.
CGROUP_NAME="linkerd-multus-testbed-$(printf '%s' "$STATE" | sha256sum | cut -c1-10)"
HOLDER_NAME=linkerd-multus-testbed-holder
NODE_PATH_IMAGES="$ROOT/e2e/images"

# The daemons in start order, as "pid-file-name:process-name"; down stops them in reverse.
NODE_DAEMONS=(holder:$HOLDER_NAME containerd:containerd etcd:etcd apiserver:kube-apiserver relay:relay.py
    controller-manager:kube-controller-manager scheduler:kube-scheduler kubelet:kubelet kube-proxy:kube-proxy)
# The node's Multus (stand-in, or the real thin or thick plugin): e2e/lib/testbed-node-multus.sh.
source "$ROOT/e2e/lib/testbed-node-multus.sh"
track_multus_daemon
# The node's layout (plain, or OpenShift's directories): e2e/lib/testbed-node-profile.sh.
source "$ROOT/e2e/lib/testbed-node-profile.sh"

holder_pid() { cat "$STATE/holder.pid" 2>/dev/null; }

# The node's namespaces held open (fds 5 and 6) from the start of `down` to its last check. Once its
# last process is gone a namespace's inode number is free for the next one made on the host (another
# node's pod sandbox: CI, 2026-11-30), and the check would name that namespace's processes as ours.
pin_namespaces() {
    local pid
    pid="$(holder_pid)" && alive "$STATE/holder.pid" "$HOLDER_NAME" || return 0
    { exec 5<"/proc/$pid/ns/net" 6<"/proc/$pid/ns/mnt"; } 2>/dev/null || true
}
unpin_namespaces() { exec 5<&- 6<&-; }

node_is_up() {
    local d
    [ -f "$STATE/kubeconfig" ] || return 1
    for d in "${NODE_DAEMONS[@]}"; do alive "$STATE/${d%%:*}.pid" "${d#*:}" || return 1; done
    ready_soon
}

node_status() {
    kube get node "$NODE_NAME" -o wide 2>&1 | sed 's/^/testbed: /'
}

# === namespaces, cgroups ===

# The holder: creates the node's netns and private mount namespace, mounts what the node needs there,
# then sleeps; every daemon joins it with nsenter (not `ip netns exec`, which remounts /sys and hides the
# cgroup mounts).
start_holder() {
    step "create the node's network and mount namespaces" "see $STATE/holder.log"
    local n="$STATE/node"
    mkdir -p "$n/var-upper" "$n/var-work" "$n/sysctl"
    # The values the kubelet would set (protectKernelDefaults makes it only check them).
    echo 10 >"$n/sysctl/panic" && echo 1 >"$n/sysctl/panic_on_oops" && echo 1 >"$n/sysctl/overcommit_memory"
    cat >"$n/holder.sh" <<EOF
set -e
mount -t tmpfs -o mode=755 testbed-run /run
mount -t overlay testbed-var -o lowerdir=/var,upperdir=$n/var-upper,workdir=$n/var-work /var
mount --bind $n/sysctl/panic /proc/sys/kernel/panic
mount --bind $n/sysctl/panic_on_oops /proc/sys/kernel/panic_on_oops
mount --bind $n/sysctl/overcommit_memory /proc/sys/vm/overcommit_memory
$(profile_holder_mounts)
ip link set lo up
ip link add $NODE_BRIDGE type bridge
ip addr add $NODE_IP/24 dev $NODE_BRIDGE
ip link set $NODE_BRIDGE up
ip route add $SERVICE_CIDR dev $NODE_BRIDGE
touch $n/holder-ready
exec -a $HOLDER_NAME sleep infinity
EOF
    setsid unshare --net --mount --propagation private bash "$n/holder.sh" >"$STATE/holder.log" 2>&1 \
        </dev/null 8>&- 9>&- &
    echo $! >"$STATE/holder.pid"
    for _ in $(seq 100); do
        if [ -f "$n/holder-ready" ]; then
            IN_NODE=(nsenter -t "$(holder_pid)" -n -m --)
            readlink "/proc/$(holder_pid)/ns/net" >"$n/netns-id"
            readlink "/proc/$(holder_pid)/ns/mnt" >"$n/mntns-id"
            return 0
        fi
        [ -e "/proc/$(holder_pid)" ] || fail "the namespace holder exited: $(tail -5 "$STATE/holder.log")"
        sleep 0.05
    done
    fail "the node's namespaces were not ready after 5 s: $(tail -5 "$STATE/holder.log")"
}

# The mounted cgroup hierarchies (v1 controllers, the named systemd one and the unified one).
cgroup_hierarchies() {
    awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts
}

make_cgroups() {
    step "create the kubelet's cgroup root /$CGROUP_NAME"
    local h
    echo "$CGROUP_NAME" >"$STATE/node/cgroup"
    for h in $(cgroup_hierarchies); do
        [ "$(basename "$h")" = unified ] && continue
        mkdir -p "$h/$CGROUP_NAME"
    done
    # A new cpuset cgroup starts empty; the kubelet's children copy from it.
    if [ -d "/sys/fs/cgroup/cpuset/$CGROUP_NAME" ]; then
        cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$CGROUP_NAME/cpuset.cpus"
        cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$CGROUP_NAME/cpuset.mems"
    fi
}

# PIDs of every process in the kubelet's cgroup root (the pods' containers).
cgroup_procs() {
    local h
    for h in $(cgroup_hierarchies); do
        [ -d "$h/$CGROUP_NAME" ] && find "$h/$CGROUP_NAME" -name cgroup.procs -exec cat {} + 2>/dev/null
    done | sort -u
}

remove_cgroups() {
    local h
    for h in $(cgroup_hierarchies); do
        [ -d "$h/$CGROUP_NAME" ] && find "$h/$CGROUP_NAME" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    return 0
}

# PIDs of the processes in the node's namespaces (read from the ids recorded at `up`), holder included.
namespace_procs() {
    local ids
    ids="$(cat "$STATE/node/netns-id" "$STATE/node/mntns-id" 2>/dev/null)" || return 0
    [ -n "$ids" ] || return 0
    # One `ls` for all of /proc: a readlink per process is seconds on a loaded machine.
    # shellcheck disable=SC2012
    { ls -l /proc/[0-9]*/ns/net /proc/[0-9]*/ns/mnt 2>/dev/null || true; } | { grep -F "$ids" || true; } |
        sed -n 's|.* /proc/\([0-9]*\)/ns/.*|\1|p' | sort -u
}

# kill -KILL every PID that $1 (a function) lists, until it lists none.
kill_all_of() {
    local pids p
    for _ in $(seq 50); do
        pids=""
        for p in $($1 | grep -vx "$(holder_pid || echo none)" || true); do running "$p" && pids+=" $p"; done
        [ -z "$pids" ] && return 0
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
        sleep 0.1
    done
    echo "testbed: still running after 5 s: $pids" >&2
}

# === configuration files ===

write_node_pki() {
    local pki="$STATE/pki" tokens="" who
    step "create the node's certificates and tokens"
    sign_cert kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
    sign_cert kubelet "/CN=$NODE_NAME" "subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME\nextendedKeyUsage=serverAuth"
    # One static token per component, with the user names the apiserver's bootstrap RBAC (and the Node
    # authorizer, for the kubelet) expects.
    # The Multus stand-in reads pods and NADs of every namespace (Multus gets that from its ClusterRole).
    for who in "kubelet|system:node:$NODE_NAME|system:nodes" "kube-proxy|system:kube-proxy|" \
        "controller-manager|system:kube-controller-manager|" "scheduler|system:kube-scheduler|" \
        "multus|system:multus-stand-in|system:masters"; do
        local name user group token
        IFS='|' read -r name user group <<<"$who"
        token="$(openssl rand -hex 24)"
        echo "$token,$user,$name${group:+,$group}" >>"$pki/tokens.csv"
        kubeconfig "$STATE/node/$name.kubeconfig" "https://$NODE_IP:$API_PORT" "$token"
    done
}

write_containerd_config() {
    local c="$STATE/containerd"
    mkdir -p "$c/root" "$STATE/cni/net.d" "$STATE/cni/bin"
    cat >"$c/config.toml" <<EOF
version = 2
root = "$c/root"
state = "/run/containerd"
[grpc]
  address = "$STATE/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # This VM drops CAP_SYS_RESOURCE even for root: runc cannot lower a container's oom_score_adj.
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$(node_cni_bin_dir)"
    conf_dir = "$(node_cni_net_dir)"
EOF
    # Debian's reference plugins, by link; the project's binaries are added by e2e/images and the
    # chart's installer.
    ln -sf /usr/lib/cni/* "$STATE/cni/bin/"
    write_node_multus
}

write_kubelet_config() {
    local pki="$STATE/pki"
    : >"$STATE/node/resolv.conf" # no cluster DNS on this node (no CoreDNS in Debian)
    cat >"$STATE/node/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_NAME
cgroupsPerQOS: true
protectKernelDefaults: true
oomScoreAdj: 0
failSwapOn: false
resolvConf: $STATE/node/resolv.conf
clusterDomain: cluster.local
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
EOF
    # Kubelets that know the setting (1.31+) refuse cgroup v1 hosts by default; older ones reject the
    # field, so it is written only for a kubelet whose flag parser knows it.
    supports "$(k8s_path kubelet)" --fail-cgroupv1=false && echo "failCgroupV1: false" >>"$STATE/node/kubelet.yaml"
    return 0
}

# === the daemons ===

wait_for() { # wait_for SECONDS WHAT PIDFILE:NAME CMD...: polls CMD every 0.2 s while the daemon lives
    local secs="$1" what="$2" d="$3"
    shift 3
    local deadline=$((SECONDS + secs))
    while [ "$SECONDS" -lt "$deadline" ]; do
        "$@" >/dev/null 2>&1 && return 0
        # Looked at again before failing: a daemon just started passes through setsid, nsenter and
        # env by exec, and its /proc/PID/cmdline reads empty during each exec (seen once, under load).
        alive "$STATE/${d%%:*}.pid" "${d#*:}" || { sleep 0.5 && alive "$STATE/${d%%:*}.pid" "${d#*:}"; } ||
            fail "$what: ${d#*:} exited: $(tail -5 "$STATE/${d%%:*}.log")"
        sleep 0.2
    done
    fail "$what: not after $secs s: $(tail -5 "$STATE/${d%%:*}.log")"
}

start_containerd() {
    step "start containerd ($(containerd --version | awk '{print $3}')) in the node's namespaces" "see $STATE/containerd.log"
    write_containerd_config
    run_containerd
}

# containerd on the config written at `up` (a restart leaves the node's CNI config as it is).
run_containerd() {
    daemon containerd containerd --config "$STATE/containerd/config.toml"
    wait_for 30 "containerd answers on $STATE/containerd.sock" containerd:containerd \
        ctr -a "$STATE/containerd.sock" version
}

start_relay() {
    local port
    port=$(free_ports 1)
    echo "https://127.0.0.1:$port" >"$STATE/server"
    # Started on the host, it joins the node's netns itself after binding the host's loopback port.
    setsid python3 "$ROOT/e2e/lib/relay.py" "$port" "/proc/$(holder_pid)/ns/net" "$NODE_IP" "$API_PORT" \
        >"$STATE/relay.log" 2>&1 </dev/null 8>&- 9>&- &
    echo $! >"$STATE/relay.pid"
}

start_control_plane() {
    local pki="$STATE/pki" n="$STATE/node" bin
    start_etcd 2379 2380
    start_relay
    # The ServiceAccount admission plugin stays on: the controller-manager's token controller issues tokens.
    # Pods get bound tokens (projected, bound to the pod, refused once it is deleted), as on every cluster
    # since 1.22: on 1.20/1.21 the gate turns them on; where the gate is gone they are the only kind.
    local bound=()
    supports "$APISERVER" --feature-gates=BoundServiceAccountTokenVolume=true &&
        bound+=(--feature-gates=BoundServiceAccountTokenVolume=true)
    # An audit log of who reads pods, so tests can see which credential the CNI plugin used.
    cat >"$STATE/audit-policy.yaml" <<'EOF_POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: ["get"]
    resources: [{group: "", resources: ["pods"]}]
  - level: None
EOF_POLICY
    # MutatingAdmissionPolicy served where the binary has it (the node scenario's admission-policy case).
    local policy=()
    mapfile -t policy < <(policy_gate_flags)
    start_apiserver 2379 "${bound[@]}" "${policy[@]}" --audit-policy-file="$STATE/audit-policy.yaml" \
        --audit-log-path="$STATE/audit.log" --audit-log-maxsize=100 \
        --bind-address=0.0.0.0 --advertise-address="$NODE_IP" --secure-port="$API_PORT" \
        --authorization-mode=Node,RBAC --enable-aggregator-routing=true \
        --kubelet-client-certificate="$pki/kubelet-client.crt" --kubelet-client-key="$pki/kubelet-client.key" \
        --kubelet-certificate-authority="$pki/ca.crt" --kubelet-preferred-address-types=InternalIP
    write_kubeconfig
    label_system_namespaces

    bin="$(k8s_path kube-controller-manager)"
    step "start kube-controller-manager" "see $STATE/controller-manager.log"
    daemon controller-manager "$bin" --kubeconfig="$n/controller-manager.kubeconfig" \
        --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
        --use-service-account-credentials=true --cluster-signing-cert-file="$pki/ca.crt" \
        --cluster-signing-key-file="$pki/ca.key" --leader-elect=false --bind-address=127.0.0.1 \
        --cluster-name=testbed
    bin="$(k8s_path kube-scheduler)"
    step "start kube-scheduler" "see $STATE/scheduler.log"
    daemon scheduler "$bin" --kubeconfig="$n/scheduler.kubeconfig" --leader-elect=false --bind-address=127.0.0.1
}

start_node_agents() {
    local n="$STATE/node" bin
    write_kubelet_config
    run_kubelet

    bin="$(k8s_path kube-proxy)"
    step "start kube-proxy (iptables mode, in the node's netns)" "see $STATE/kube-proxy.log"
    # A kube-proxy that lists discovery.k8s.io/v1beta1 EndpointSlices (1.20's) fails on a server that
    # no longer serves them (1.25+): there it reads core/v1 Endpoints, if it knows the gate.
    local gates=()
    kube get --raw /apis/discovery.k8s.io/v1beta1 >/dev/null 2>&1 ||
        ! supports "$bin" --feature-gates=EndpointSliceProxying=false ||
        gates+=(--feature-gates=EndpointSliceProxying=false)
    # conntrack-* 0: leave the conntrack sysctls as they are (nf_conntrack_max is the host's own).
    daemon kube-proxy "$bin" --kubeconfig="$n/kube-proxy.kubeconfig" --hostname-override="$NODE_NAME" \
        --proxy-mode=iptables --cluster-cidr="$POD_SUBNET" --bind-address="$NODE_IP" \
        --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 \
        --conntrack-tcp-timeout-close-wait=0 --oom-score-adj=0 "${gates[@]}" \
        --metrics-bind-address=127.0.0.1:10249 --healthz-bind-address=127.0.0.1:10256
}

# The kubelet on the config written at `up` (a reboot starts it again as it was).
run_kubelet() {
    local n="$STATE/node" bin extra=()
    bin="$(k8s_path kubelet)"
    step "start the kubelet ($("$bin" --version)) as node $NODE_NAME ($NODE_IP)" "see $STATE/kubelet.log"
    supports "$bin" --container-runtime=remote && extra+=(--container-runtime=remote)
    daemon kubelet "$bin" --config="$n/kubelet.yaml" --kubeconfig="$n/kubelet.kubeconfig" \
        --root-dir="$STATE/kubelet" --node-ip="$NODE_IP" --hostname-override="$NODE_NAME" \
        --container-runtime-endpoint="unix://$STATE/containerd.sock" "${extra[@]}"
}

# PIDs of containerd's shims in the node's namespaces (they outlive containerd, as on a node).
shim_procs() {
    local p
    for p in $(namespace_procs); do
        case "$(cat "/proc/$p/comm" 2>/dev/null)" in containerd-shim*) echo "$p" ;; esac
    done
}

# A reboot as the node's pods see it: the kubelet and containerd stopped, every pod's process and
# containerd's shims killed, the node's /run (a tmpfs) emptied with what is mounted under it (the
# pods' network namespaces), then containerd and the kubelet started again, which recreate every pod's
# sandbox through the CNI config of the moment. LINKERD_MULTUS_REBOOT_BOOT, a shell command, runs in the
# node's mount namespace between the two (what a node's boot writes into /run first). The control plane (in the same namespaces, keeping its
# state outside /run), kube-proxy and /var (persistent on a node) stay.
node_reboot() {
    local t0=$SECONDS
    stop_pid "$STATE/kubelet.pid" kubelet
    kill_all_of cgroup_procs
    stop_pid "$STATE/containerd.pid" containerd
    kill_all_of shim_procs
    step "empty the node's /run (unmounting what is mounted under it)"
    # Deepest first; lazily, as a namespace file may still be open somewhere for a moment.
    "${IN_NODE[@]}" sh -c 'awk '"'"'$5 ~ "^/run/" {print $5}'"'"' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$m"; done
        find /run -mindepth 1 -maxdepth 1 -exec rm -rf {} +'
    if [ -n "${LINKERD_MULTUS_REBOOT_BOOT:-}" ]; then
        step "boot: $LINKERD_MULTUS_REBOOT_BOOT"
        "${IN_NODE[@]}" sh -c "$LINKERD_MULTUS_REBOOT_BOOT" || fail "the reboot's boot command failed"
    fi
    # Multus' thick daemon lost its socket and files with /run: started again, as its pod would be.
    if [ "$(node_multus_kind)" = thick ]; then stop_node_multus && start_node_multus; fi
    start_openshift_multus
    run_containerd
    run_kubelet
    wait_for 120 "node $NODE_NAME Ready" kubelet:kubelet node_ready
    echo "testbed: rebooted in $((SECONDS - t0)) s" >&2
}

node_ready() {
    [ "$(kube get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# containerd's sandbox image, built by e2e/images.
PAUSE_IMAGE="$("$NODE_PATH_IMAGES" --ref pause)"

# The images' static binaries (`e2e/images --binaries`), built in the background while `up` builds
# Kubernetes: neither needs the other, so on a cold machine they overlap. node_up's e2e/images then
# waits on the build's lock and finds them built.
node_prebuild_images() {
    [ "${LINKERD_MULTUS_IMAGES_NO_BUILD:-0}" = 1 ] && return 0
    step "build the images' static binaries in the background (log in $STATE/images-binaries.log)"
    setsid "$NODE_PATH_IMAGES" --binaries >"$STATE/images-binaries.log" 2>&1 </dev/null 8>&- 9>&- &
    echo $! >"$STATE/images-binaries.pid"
}

# stop_builds: the image builds an `up` started (each in a session of its own, so its cargo and buildah
# go with it), when that `up` failed or was interrupted before they ended: `down` leaves nothing running.
stop_builds() {
    local f pid
    for f in "$STATE/images-binaries.pid" "$STATE/images.pid"; do
        alive "$f" e2e/images || continue
        pid=$(cat "$f")
        echo "testbed: stopping the image build an earlier up left running (pid $pid)" >&2
        kill -TERM -- "-$pid" 2>/dev/null || true
        for _ in $(seq 100); do running "$pid" || break; sleep 0.1; done
        kill -KILL -- "-$pid" 2>/dev/null || true
    done
}

node_up() {
    local t0=$SECONDS t
    mkdir -p "$STATE/node"
    choose_node_multus
    track_multus_daemon
    choose_node_profile
    make_pki ",IP:$NODE_IP,IP:${SERVICE_CIDR%.0/16}.1"
    write_node_pki
    make_cgroups
    start_holder
    start_containerd
    t=$SECONDS
    # Images build (cargo, buildah) while the control plane starts; the pause image is needed only by
    # the first pod.
    step "build and import the images (e2e/images, log in $STATE/images.log)"
    LINKERD_MULTUS_TESTBED_DIR="$STATE" setsid "$NODE_PATH_IMAGES" >"$STATE/images.log" 2>&1 </dev/null 8>&- 9>&- &
    local images_pid=$!
    echo "$images_pid" >"$STATE/images.pid"
    start_control_plane
    start_node_multus
    start_openshift_multus
    start_node_agents
    step "wait for node $NODE_NAME to be Ready" "see $STATE/kubelet.log"
    wait_for 120 "node $NODE_NAME Ready" kubelet:kubelet node_ready
    echo "testbed: node Ready $((SECONDS - t0)) s after start" >&2
    step "wait for the default ServiceAccount (the token controller)" "see $STATE/controller-manager.log"
    wait_for 60 "ServiceAccount default/default" controller-manager:kube-controller-manager \
        kube -n default get serviceaccount default
    step "wait for e2e/images (started $((SECONDS - t)) s ago)" "see $STATE/images.log"
    wait "$images_pid" || fail "e2e/images failed: $(tail -15 "$STATE/images.log")"
}

node_down() {
    local i d
    stop_builds
    [ -f "$STATE/holder.pid" ] && IN_NODE=(nsenter -t "$(holder_pid)" -n -m --)
    # The kubelet first (it would restart what goes next), then the pods' processes, then the rest.
    for d in kubelet:kubelet kube-proxy:kube-proxy scheduler:kube-scheduler \
        controller-manager:kube-controller-manager; do
        stop_pid "$STATE/${d%%:*}.pid" "${d#*:}"
    done
    stop_node_multus
    kill_all_of cgroup_procs
    stop_pid "$STATE/containerd.pid" containerd
    for d in apiserver:kube-apiserver etcd:etcd relay:relay.py; do stop_pid "$STATE/${d%%:*}.pid" "${d#*:}"; done
    # What containerd started and left (its shims) is found by namespace, then the holder goes.
    kill_all_of namespace_procs
    stop_pid "$STATE/holder.pid" "$HOLDER_NAME"
    # A sandbox being created as containerd stopped can show up in the node's namespaces after that
    # sweep (a /pause was left behind on 2026-11-29, its shim already gone): swept again, late.
    for _ in 1 2 3; do
        sleep 1
        kill_all_of namespace_procs
    done
    remove_cgroups
    IN_NODE=()
}

# proc_origin PID: its state, its parent (pid and command) and its age, for a leftover's report.
proc_origin() {
    local state ppid start tick
    state="$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null)"
    ppid="$(awk '/^PPid:/ {print $2}' "/proc/$1/status" 2>/dev/null)"
    # Field 22 of stat: its start, in clock ticks after boot (the command's parentheses may hold spaces).
    start="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20)"
    tick="$(getconf CLK_TCK)"
    echo "state ${state:-?}, parent ${ppid:-?} ($({ tr '\0' ' ' <"/proc/${ppid:-0}/cmdline" || echo gone; } 2>/dev/null | cut -c1-120)),\
 started $(awk -v s="${start:-0}" -v t="$tick" '{printf "%.1f", $1 - s / t}' /proc/uptime) s ago"
}

# Fails, listing them, when processes, cgroups or host mounts of this node remain.
node_check_nothing_left() {
    local left="" d p
    for d in "${NODE_DAEMONS[@]}"; do
        alive "$STATE/${d%%:*}.pid" "${d#*:}" && left+=" process ${d#*:} ($(cat "$STATE/${d%%:*}.pid"))"
    done
    # A process killed under load may still be exiting: given 10 s to go, then named with its command.
    for _ in $(seq 20); do
        p="$(namespace_procs | tr '\n' ' ')"
        [ -z "$p" ] && break
        sleep 0.5
    done
    for d in $p; do
        left+=" process in the node's namespaces: $d ($(tr '\0' ' ' <"/proc/$d/cmdline" 2>/dev/null || echo gone);\
 $(proc_origin "$d"))"
    done
    for d in $(cgroup_hierarchies); do [ -d "$d/$CGROUP_NAME" ] && left+=" cgroup $d/$CGROUP_NAME"; done
    grep -F " $STATE" /proc/self/mountinfo >/dev/null && left+=" host mounts under $STATE"
    [ -z "$left" ] || fail "left behind:$left"
    echo "testbed: nothing left behind (processes, namespaces, cgroups, mounts checked)" >&2
}
