"""A TCP relay from the host's loopback into the testbed node's network namespace.

    python3 relay.py LISTEN_PORT NETNS_PATH TARGET_HOST TARGET_PORT

It binds 127.0.0.1:LISTEN_PORT in the host's namespace first, then joins NETNS_PATH (setns), so every
outgoing socket it makes afterwards lives in the node's namespace. The host thus reaches the node's
kube-apiserver without any interface, route or forwarding sysctl being added to it.
"""

import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


def serve(conn, target):
    try:
        upstream = socket.create_connection(target, timeout=10)
        upstream.settimeout(None)
    except OSError as e:
        print(f"relay: cannot reach {target}: {e}", file=sys.stderr, flush=True)
        conn.close()
        return
    back = threading.Thread(target=pump, args=(upstream, conn), daemon=True)
    back.start()
    pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def main():
    port, netns, host, target_port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(256)
    # Python 3.11 has no os.setns; the namespace applies to this (still single) thread and the
    # threads it starts later.
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(netns, os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        sys.exit(f"relay: setns({netns}): {os.strerror(err)}")
    os.close(fd)
    print(f"relay: 127.0.0.1:{port} -> {host}:{target_port} in {netns}", file=sys.stderr, flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, (host, target_port)), daemon=True).start()


if __name__ == "__main__":
    main()
