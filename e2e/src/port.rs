//! Loopback ports for servers a test starts.

use std::net::TcpListener;

/// A loopback port free at the time of the call (the OS picked it; it is released for the caller).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("binding a loopback port")
        .port()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_free_port_can_be_bound() {
        let port = super::free_port();
        assert_ne!(port, 0);
        std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
    }
}
