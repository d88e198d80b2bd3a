"""The HTTP limits every server of the package runs under (store, OpenEnv, serve-policy, replay).

* :class:`BodyLimit` (ASGI middleware): a request body is read in full before the app sees it, refused
  with 413 as soon as the bytes *read* pass the cap (a chunked body has no ``Content-Length`` to trust)
  and with 408 when it takes longer than the body timeout to arrive;
* :func:`header_timeout_protocol` (uvicorn's httptools protocol, subclassed): a connection that has not
  sent a request's complete headers within the header timeout of opening or of its previous response
  gets 408 and is closed, and one whose unfinished headers pass :data:`MAX_HEADER_BYTES` gets 431
  (slow-loris); an idle keep-alive connection closes after :data:`KEEP_ALIVE_S`;
* :func:`uvicorn_limits`: those uvicorn settings as keyword arguments.

WebSocket connections pass the middleware untouched: uvicorn's ``ws_max_size`` caps a message and its
pings (``ws_ping_interval``/``ws_ping_timeout``) drop a silent peer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEADER_TIMEOUT_S = 10.0
"""Longest time a connection may take to send one request's headers (then 408 and close)."""
BODY_TIMEOUT_S = 30.0
"""Longest time a request body may take to arrive in full (then 408)."""
KEEP_ALIVE_S = 5
"""Idle seconds after a response before a keep-alive connection is closed."""
MAX_HEADER_BYTES = 64 * 1024
"""Most bytes of one request's unfinished headers (then 431 and close)."""

Scope = dict[str, Any]
Message = dict[str, Any]
ErrorBody = Callable[[str], Any]
"""Builds a server's JSON error body from a one-line message."""


def _default_error(message: str) -> dict[str, str]:
    return {"error": message}


class BodyLimit:
    """ASGI middleware: read each HTTP request body under a byte cap and a time limit before the app runs.

    Parameters
    ----------
    app:
        The wrapped ASGI app; it receives the buffered body as one ``http.request`` message, then the
        connection's own messages (a later ``http.disconnect``).
    max_bytes:
        Largest accepted body; a larger ``Content-Length`` or more bytes read get 413.
    timeout_s:
        Longest time the whole body may take to arrive; then 408.
    error_body:
        The server's error JSON for a message (its own error shape).
    """

    def __init__(self, app: Any, max_bytes: int, timeout_s: float = BODY_TIMEOUT_S,
                 error_body: ErrorBody = _default_error) -> None:
        if max_bytes < 1 or not timeout_s > 0:
            raise ValueError(f"max_bytes and timeout_s must be positive, got {max_bytes} and {timeout_s}")
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.error_body = error_body

    async def __call__(self, scope: Scope, receive: Callable[[], Any], send: Callable[[Message], Any]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send, 413, f"body: {int(declared)} bytes, at most {self.max_bytes} allowed")
            return
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.timeout_s) as deadline:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return  # nobody to answer
                size += len(message.get("body", b""))
                if size > self.max_bytes:
                    await self._refuse(send, 413, f"body: over {self.max_bytes} bytes")
                    return
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
        if deadline.cancelled_caught:
            await self._refuse(send, 408, f"body: not received within {self.timeout_s:g} s")
            return
        buffered = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> Message:
            return buffered.pop() if buffered else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Callable[[Message], Any], status: int, message: str) -> None:
        body = orjson.dumps(self.error_body(message))
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


class _HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header timeout and a header size cap (see the module docstring)."""

    header_timeout_s = HEADER_TIMEOUT_S
    max_header_bytes = MAX_HEADER_BYTES
    _header_timer: Any = None
    _header_bytes = 0

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._header_timer is not None:
            self._header_bytes += len(data)
            if self._header_bytes > self.max_header_bytes:
                self._refuse(431, "Request Header Fields Too Large")

    def on_headers_complete(self) -> None:
        self._stop_waiting()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)  # a pipelined request's headers are already in
        super().on_response_complete()
        if not pipelined and not self.transport.is_closing():
            self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        self._stop_waiting()
        self._header_bytes = 0
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._refuse, 408, "Request Timeout")

    def _stop_waiting(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _refuse(self, status: int, reason: str) -> None:
        self._stop_waiting()
        if self.transport.is_closing():
            return
        self.transport.write(f"HTTP/1.1 {status} {reason}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".encode())
        self.transport.close()


def header_timeout_protocol(header_timeout_s: float = HEADER_TIMEOUT_S,
                            max_header_bytes: int = MAX_HEADER_BYTES) -> type[HttpToolsProtocol]:
    """uvicorn's ``http`` protocol class with this header timeout and header size cap."""
    if not header_timeout_s > 0 or max_header_bytes < 1:
        raise ValueError(f"header_timeout_s and max_header_bytes must be positive, got {header_timeout_s}, "
                         f"{max_header_bytes}")
    return type("HeaderTimeoutProtocol", (_HeaderTimeoutProtocol,),
                {"header_timeout_s": header_timeout_s, "max_header_bytes": max_header_bytes})


def uvicorn_limits(header_timeout_s: float = HEADER_TIMEOUT_S, keep_alive_s: int = KEEP_ALIVE_S) -> dict[str, Any]:
    """The ``uvicorn.Config`` settings of the limits: the guarded httptools protocol and the keep-alive timeout."""
    return {"http": header_timeout_protocol(header_timeout_s), "timeout_keep_alive": keep_alive_s}
