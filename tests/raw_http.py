"""Raw-socket HTTP clients for the servers' limit tests: a silent or slow-loris client on 127.0.0.1."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit


def connect(base_url: str) -> socket.socket:
    parts = urlsplit(base_url)
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def read_until_closed(sock: socket.socket, limit_s: float = 8.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed (seconds from now)."""
    started, received = time.monotonic(), b""
    sock.settimeout(0.2)
    while time.monotonic() - started < limit_s:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            return received, time.monotonic() - started
        received += chunk
    raise AssertionError(f"the server kept the connection open for {limit_s} s; got {received[:200]!r}")


def trickle(sock: socket.socket, data: bytes, every_s: float, limit_s: float = 8.0) -> tuple[bytes, float]:
    """Send ``data`` one byte every ``every_s`` (a slow-loris client) until the server closes."""
    started = time.monotonic()
    for byte in data:
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            break
        time.sleep(every_s)
        if time.monotonic() - started > limit_s:
            break
    received, _ = read_until_closed(sock, 2.0)
    return received, time.monotonic() - started
