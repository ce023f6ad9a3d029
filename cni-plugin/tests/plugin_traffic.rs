//! Real traffic through the rules linkerd-cni installs on a bridge + host-local pod network:
//! host → pod:8080 lands on the inbound proxy port 4143; pod → elsewhere lands on 4140; the proxy
//! uid 2102 bypasses; loopback and skipped ports are untouched; after DEL everything is direct
//! again. Legacy, nft, nftables (no iptables or nft binary reachable by the plugin) and IPv6 cases. Needs root and `e2e/testbed up`.

mod support;

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::time::Duration;

use linkerd_multus_e2e::traffic::{ask, ask_as, ask_patiently, Answerer};
use linkerd_multus_e2e::{client, TestNamespace};
use serde_json::json;
use support::*;

fn sock(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse::<IpAddr>().expect("ip"), port)
}

/// If this regresses, meshed pods either bypass their proxy or cannot talk at all.
async fn traffic(mode: &'static str, v6: bool) {
    let client = client().await;
    let tns = TestNamespace::create(&client, &format!("cni-traffic-{mode}")).await;
    create_pod(
        &client,
        &tns.name,
        "web",
        json!({"annotations": {"config.linkerd.io/skip-inbound-ports": "8081"}}),
        meshed_spec(),
    )
    .await;
    let mut settings = PluginSettings::new("1.0.0", mode);
    settings.ipv6 = v6;
    let mut net = PodNetwork::new(&settings, &tns.name, "web");
    net.add().unwrap_or_else(|e| panic!("ADD: {e}"));
    let pod_ip = net.pod_ip(v6);
    let gateway = if v6 {
        net.addr.gateway6.clone()
    } else {
        net.addr.gateway4.clone()
    };
    let any = if v6 { "::" } else { "0.0.0.0" };

    // The "proxy" and the app inside the pod, and a server on the host side of the bridge.
    let (inbound, outbound, lo, skipped) = net.ns.run(|| {
        (
            TcpListener::bind(sock(any, 4143)).expect("bind 4143"),
            TcpListener::bind(sock(any, 4140)).expect("bind 4140"),
            TcpListener::bind(sock(if v6 { "::1" } else { "127.0.0.1" }, 7777)).expect("bind lo"),
            TcpListener::bind(sock(any, 8081)).expect("bind 8081"),
        )
    });
    let _servers = [
        Answerer::start(inbound, "inbound-proxy"),
        Answerer::start(outbound, "outbound-proxy"),
        Answerer::start(lo, "loopback"),
        Answerer::start(skipped, "app-8081"),
    ];
    // The bridge's IPv6 address stays tentative until duplicate address detection ends (seconds on a
    // loaded machine): bind once it is usable.
    let host = linkerd_multus_e2e::wait_for_within(
        "the host side's address can be bound",
        Duration::from_secs(20),
        || TcpListener::bind(sock(&gateway, 9999)).ok(),
    );
    let _host = Answerer::start(host, "host");

    // Inbound: any port → the inbound proxy; a skipped port → the app itself.
    assert_eq!(
        ask_patiently(sock(&pod_ip, 8080)).expect("host → pod:8080"),
        "inbound-proxy"
    );
    assert_eq!(
        ask(sock(&pod_ip, 8081)).expect("host → pod:8081"),
        "app-8081"
    );
    // Outbound from the app (root) → the outbound proxy; loopback stays loopback.
    let lo_addr = sock(if v6 { "::1" } else { "127.0.0.1" }, 7777);
    let (out_app, out_lo) = net
        .ns
        .run(|| (ask_patiently(sock(&gateway, 9999)), ask(lo_addr)));
    assert_eq!(out_app.expect("pod → host"), "outbound-proxy");
    assert_eq!(out_lo.expect("pod → lo"), "loopback");
    // The proxy's uid goes out directly; another uid does not.
    assert_eq!(ask_as(&net.ns, 2102, &gateway, 9999), "host");
    assert_eq!(ask_as(&net.ns, 1000, &gateway, 9999), "outbound-proxy");

    // After linkerd-cni's DEL (the interface stays) nothing is redirected any more: proof the
    // answers above came through our rules, not through anything else.
    let result = net.result.clone();
    net.linkerd_only("DEL", result.as_ref())
        .unwrap_or_else(|e| panic!("DEL: {e}"));
    assert!(
        ask(sock(&pod_ip, 8080)).is_err(),
        "nothing listens on 8080 itself"
    );
    let direct = net.ns.run(|| ask(sock(&gateway, 9999)));
    assert_eq!(direct.expect("pod → host after DEL"), "host");
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn legacy_ipv4() {
    traffic("legacy", false).await;
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn nft_ipv4() {
    traffic("nft", false).await;
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn legacy_ipv6() {
    traffic("legacy", true).await;
}

#[tokio::test]
#[ignore = "needs root (netns, nftables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn nftables_ipv4() {
    traffic("nftables", false).await;
}

#[tokio::test]
#[ignore = "needs root (netns, nftables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn nftables_ipv6() {
    traffic("nftables", true).await;
}
