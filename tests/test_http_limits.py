"""The HTTP limits of every server, with real sockets on 127.0.0.1: slow headers (slow-loris) get 408 and
a closed connection, oversized headers 431, a slow body 408, a chunked body over the cap 413; normal
keep-alive and pipelined requests are untouched. The store, the OpenEnv server and the replay routes run
here; serve-policy's own checks are in ``test_policy_server_fuzz.py``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from raw_http import connect, read_until_closed, trickle

from intraskill.http_limits import header_timeout_protocol, uvicorn_limits
from intraskill.shop.engine import ShopEngine
from intraskill.shop.service import API_PATH, SERVER_STACK, RunningService, create_app, serve_in_thread

HEADER_S = 0.6
BODY_S = 0.6


@pytest.fixture(scope="module")
def store(small_store) -> Iterator[RunningService]:
    catalog, index, _ = small_store
    app = create_app(ShopEngine(catalog.products, catalog.goals, index), slots=2, admin_token="admin",
                     body_timeout_s=BODY_S)
    with serve_in_thread(app, **uvicorn_limits(header_timeout_s=HEADER_S)) as running:
        yield running


def test_slow_headers_get_408_and_a_closed_connection(store: RunningService) -> None:
    with connect(store.base_url) as sock:  # never sends a byte
        received, closed_after = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 408 ") and HEADER_S * 0.8 < closed_after < HEADER_S + 2
    with connect(store.base_url) as sock:  # a header byte every 0.1 s: each byte alone would keep it alive
        received, took = trickle(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200, 0.1)
    assert received.startswith(b"HTTP/1.1 408 ") and took < HEADER_S + 3


def test_headers_over_the_cap_get_431(store: RunningService) -> None:
    with connect(store.base_url) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"a" * 70_000)
        received, _ = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 431 ")


def test_a_slow_body_gets_408(store: RunningService) -> None:
    with connect(store.base_url) as sock:
        sock.sendall(f"POST {API_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: 40\r\n\r\n{\"action\"".encode())
        received, closed_after = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 408 ") and b"not received within" in received
    assert closed_after < BODY_S + 2


def test_a_chunked_body_is_capped_on_the_bytes_read(store: RunningService) -> None:
    with connect(store.base_url) as sock:
        sock.sendall(f"POST {API_PATH} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"x" * 16384
        try:
            for _ in range(640):  # 10 MB if the server read it all
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        received, _ = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 413 ") and b"body: over 65536 bytes" in received


def test_keep_alive_and_pipelined_requests_are_served(store: RunningService) -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    with connect(store.base_url) as sock:
        for _ in range(3):  # one connection, requests spaced under the keep-alive but past the header timeout
            sock.sendall(request)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
            time.sleep(HEADER_S * 0.5)
        sock.sendall(request * 3)
        received = b""
        deadline = time.monotonic() + 5
        while received.count(b"HTTP/1.1 200 ") < 3 and time.monotonic() < deadline:
            received += sock.recv(65536)
        assert received.count(b"HTTP/1.1 200 ") == 3


def test_the_openenv_server_and_replay_routes_time_out_slow_clients(small_store, browser_runs) -> None:
    pytest.importorskip("openenv.core", reason="the openenv extra is not installed")
    from intraskill.integrations.openenv.server import create_openenv_app, uvicorn_options
    from intraskill.report.replay import replay_router

    catalog, index, splits = small_store
    engine = ShopEngine(catalog.products, catalog.goals, index)
    openenv = create_openenv_app(engine, splits, slots=1)
    replay = create_app(engine, slots=1, admin_token="admin")  # as `env serve --runs` mounts it
    replay.include_router(replay_router(browser_runs / "runs"))
    for app, options in ((openenv, uvicorn_options()), (replay, SERVER_STACK)):
        with serve_in_thread(app, **{**options, **uvicorn_limits(header_timeout_s=HEADER_S)}) as running:
            with connect(running.base_url) as sock:
                received, took = trickle(sock, b"GET /api/replay/runs HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200, 0.1)
            assert received.startswith(b"HTTP/1.1 408 ") and took < HEADER_S + 3


def test_the_servers_run_under_the_limits() -> None:
    """The store's stack and the OpenEnv server's options carry the guarded protocol (the CLI runs them)."""
    pytest.importorskip("openenv.core", reason="the openenv extra is not installed")
    from intraskill.integrations.openenv.server import uvicorn_options

    for options in (SERVER_STACK, uvicorn_options()):
        assert options["http"].header_timeout_s == 10.0 and options["timeout_keep_alive"] == 5
    with pytest.raises(ValueError, match="must be positive"):
        header_timeout_protocol(0)
