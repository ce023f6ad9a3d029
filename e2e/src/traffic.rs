//! Real TCP traffic for tests: a listener that answers every connection with a fixed word (a stand-in
//! for one of the proxy's ports), and a client that reads the answer. Which word comes back tells
//! which listener the iptables rules delivered the connection to; [`original_dst`] tells where the
//! client meant to go before the REDIRECT.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::netns::NetNs;

/// Answers every connection on `listener` with `word`, from a thread, until dropped. Bind the listener
/// inside a netns (e.g. in `NetNs::run`) to serve from there.
pub struct Answerer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Answerer {
    pub fn start(listener: TcpListener, word: &'static str) -> Self {
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        let _ = s.set_nonblocking(false);
                        let _ = s.write_all(word.as_bytes());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Answerer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Connects to `addr` (from the calling thread's netns) and reads the answer.
pub fn ask(addr: SocketAddr) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
    s.set_read_timeout(Some(Duration::from_secs(3)))?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    Ok(answer)
}

/// The destination a connection had before iptables redirected it (`SO_ORIGINAL_DST`, from conntrack),
/// as the proxy reads it. An error when the connection has no conntrack entry.
pub fn original_dst(stream: &TcpStream) -> std::io::Result<SocketAddr> {
    use nix::sys::socket::{getsockopt, sockopt};
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    // Both sockaddr structs hold the port and address in network byte order.
    let dst = if stream.local_addr()?.is_ipv4() {
        let sa = getsockopt(stream, sockopt::OriginalDst)?;
        let ip = Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr));
        SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sa.sin_port)))
    } else {
        let sa = getsockopt(stream, sockopt::Ip6tOriginalDst)?;
        let ip = Ipv6Addr::from(sa.sin6_addr.s6_addr);
        SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(sa.sin6_port), 0, 0))
    };
    Ok(dst)
}

/// [`ask`], retried for a few seconds (IPv6 addresses are unusable until duplicate address detection
/// finishes).
pub fn ask_patiently(addr: SocketAddr) -> std::io::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        match ask(addr) {
            Ok(a) => return Ok(a),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// `bash /dev/tcp` from inside the netns `ns` as `uid`, so the kernel's owner match sees that uid;
/// returns what the server answered. Retried for a few seconds (IPv6 addresses need duplicate address detection first).
pub fn ask_as(ns: &NetNs, uid: vocab::Uid, ip: &str, port: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let out = ns
            .command("setpriv")
            .args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
                "timeout",
                "5",
                "bash",
                "-c",
                &format!("exec 3<>/dev/tcp/{ip}/{port} && cat <&3"),
            ])
            .output()
            .expect("setpriv");
        let answer = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() || Instant::now() > deadline {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
