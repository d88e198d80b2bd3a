"""The store as an HTTP service: the ShopSimulator ``/api/shop_agent`` protocol over one engine.

Reference ``shopsimulator.md`` §4.5 (payloads) and §6 (server): ``n`` slots share one
:class:`~intraskill.shop.engine.ShopEngine` (products, goals and search index loaded once); each
slot owns its own :class:`~intraskill.shop.engine.Session`. ``reset`` leases a slot and blocks
until one is free; ``interact``/``terminate`` check the lease (409 when stale); a slot is freed
only by ``release_one``/``release_all``. Errors are 400 (bad arguments), 409 (stale lease) and
500 (engine exceptions, e.g. stepping a finished episode), each as ``{"result": {"error": ...}}``.

The app is a thin shell: request parsing and lease checks here, all store behaviour in the engine.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator

import anyio
import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from intraskill.shop.engine import EXTERNAL_TERMINATIONS, INTERACTION_MODE, Session, ShopEngine
from intraskill.shop.leases import LeaseError, PoolClosedError, SlotLeasePool

if TYPE_CHECKING:
    import uvicorn

logger = logging.getLogger(__name__)

PRIMARY_REWARD = "r_strict"
ACQUIRE_POLL_S = 0.25
"""A waiting ``reset`` re-checks for a client disconnect or shutdown this often (seconds)."""
MAX_WAITING_RESETS = 1024
"""Threads a service may park in blocking slot acquires, separate from the engine threadpool."""


class RequestError(ValueError):
    """A bad request argument (HTTP 400); the message names the field."""


@dataclass
class _Slot:
    session: Session
    lock: threading.Lock
    session_id: str = ""


class ShopService:
    """Slots, leases and sessions over one engine; the synchronous core of the HTTP app.

    Parameters
    ----------
    engine:
        The shared store engine; ``engine.new_session()`` is called once per slot.
    slots:
        Number of environment slots (concurrent episodes).
    split_sizes:
        Task counts per split, reported by ``/healthz`` under ``tasks`` next to the active count.
    """

    def __init__(self, engine: ShopEngine, slots: int = 8,
                 split_sizes: Mapping[str, int] | None = None) -> None:
        self.engine = engine
        self.pool = SlotLeasePool(slots)
        self._slots = [_Slot(session=engine.new_session(), lock=threading.Lock()) for _ in range(slots)]
        self._episodes = itertools.count(1)
        active = sum(1 for task_id in engine.goals if engine.has_task(task_id))
        self._task_counts = {"active": active, **dict(split_sizes or {})}

    def start_episode(self, slot: int, lease: str, task_id: int, persona: bool | None) -> dict[str, Any]:
        """Reset the session of a freshly leased ``slot`` on ``task_id`` (the reset payload)."""
        state = self._slots[slot]
        with state.lock:
            self.pool.validate(slot, lease)
            payload = dict(state.session.reset(task_id, persona=persona))
            state.session_id = f"slot-{slot}-{next(self._episodes)}"
        payload.update(env_idx=slot, lease_id=lease, idx=task_id)
        return payload

    def interact(self, slot: int, lease: str, response: str) -> dict[str, Any]:
        """One environment step on a leased slot (engine step payload + over/idx/lease_id)."""
        state = self._slots[slot]
        with state.lock:
            self.pool.validate(slot, lease)
            payload = dict(state.session.step(response))
        payload.update(over=bool(payload["done"]), idx=state.session_id, lease_id=lease)
        return payload

    def terminate(self, slot: int, lease: str, reason: str) -> dict[str, Any]:
        """Zero-reward terminal (``action_limit`` | ``generation_length``) on a leased slot."""
        state = self._slots[slot]
        with state.lock:
            self.pool.validate(slot, lease)
            payload = dict(state.session.terminate(reason))
        payload.update(over=True, idx=state.session_id, lease_id=lease)
        return payload

    def release(self, slot: int, lease: str) -> dict[str, Any]:
        """Free a leased slot (``release_one``)."""
        with self._slots[slot].lock:
            self.pool.release(slot, lease)
        return {"released": [slot], "free_slots": self.pool.free_count}

    def release_all(self) -> dict[str, Any]:
        """Free every slot; all outstanding leases become stale."""
        freed = self.pool.release_all()
        return {"released": freed, "free_slots": self.pool.free_count}

    def health(self) -> dict[str, Any]:
        """The ``/healthz`` body: readiness, slot counts, task counts, version pins, primary reward."""
        return {
            "ready": True,
            "environment_slots": self.pool.size,
            "free_slots": self.pool.free_count,
            "tasks": self._task_counts,
            "versions": self.engine.versions(),
            "primary_reward": PRIMARY_REWARD,
        }

    def close(self) -> None:
        """Stop handing out slots; parked resets fail with :class:`PoolClosedError` (HTTP 503)."""
        self.pool.close()


def _field(body: Mapping[str, Any], name: str, kind: type, default: Any = ...) -> Any:
    value = body.get(name, default)
    if value is ...:
        raise RequestError(f"{name}: required")
    if value is None and default is None:
        return None
    if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
        raise RequestError(f"{name}: need an integer, got {value!r}")
    if kind is not int and not isinstance(value, kind):
        raise RequestError(f"{name}: need {kind.__name__}, got {value!r}")
    return value


def _slot_args(service: ShopService, body: Mapping[str, Any]) -> tuple[int, str]:
    slot = _field(body, "env_idx", int)
    if not 0 <= slot < service.pool.size:
        raise RequestError(f"env_idx: need a slot index in [0, {service.pool.size}), got {slot}")
    return slot, _field(body, "lease_id", str)


def _reset_args(service: ShopService, body: Mapping[str, Any]) -> tuple[int, bool | None]:
    if "env_idx" in body:
        raise RequestError("env_idx: must not be sent with reset; the server assigns a slot")
    task_id = _field(body, "idx", int)
    if not service.engine.has_task(task_id):
        raise RequestError(f"idx: unknown task id {task_id}")
    persona = _field(body, "if_persona", bool, None)
    if _field(body, "include_private_goal", bool, False):
        raise RequestError("include_private_goal: the goal is revealed only in the terminal response")
    mode = _field(body, "interaction_mode", str, INTERACTION_MODE)
    if mode != INTERACTION_MODE:
        raise RequestError(f"interaction_mode: only {INTERACTION_MODE!r} is served, got {mode!r}")
    return task_id, persona


async def _lease_slot(service: ShopService, request: Request,
                      limiter: anyio.CapacityLimiter) -> tuple[int, str] | None:
    """Block (in a worker thread) until a slot is free; ``None`` if the client went away first."""
    while True:
        try:
            return await anyio.to_thread.run_sync(service.pool.acquire, ACQUIRE_POLL_S, limiter=limiter)
        except TimeoutError:
            if await request.is_disconnected():
                return None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"result": {"error": message}}, status_code=status)


async def _reset(service: ShopService, request: Request, body: Mapping[str, Any],
                 limiter: anyio.CapacityLimiter) -> dict[str, Any] | None:
    task_id, persona = _reset_args(service, body)
    leased = await _lease_slot(service, request, limiter)
    if leased is None:
        return None
    slot, lease = leased
    if await request.is_disconnected():  # nobody will ever release this slot: give it back now
        _give_back(service, slot, lease)
        return None
    try:
        return await anyio.to_thread.run_sync(service.start_episode, slot, lease, task_id, persona)
    except BaseException:
        _give_back(service, slot, lease)
        raise


def _give_back(service: ShopService, slot: int, lease: str) -> None:
    """Release a slot the caller never received (already freed by ``release_all`` is fine)."""
    with contextlib.suppress(LeaseError):
        service.pool.release(slot, lease)


def _dispatch(service: ShopService, body: Mapping[str, Any]) -> Callable[[], dict[str, Any]]:
    """The synchronous call for a non-reset action (validated now, run later in a worker thread)."""
    action = body.get("action")
    if action == "release_all":
        return service.release_all
    if action not in ("interact", "terminate", "release_one"):
        raise RequestError(
            f"action: need one of reset, interact, terminate, release_one, release_all; got {action!r}")
    slot, lease = _slot_args(service, body)
    if action == "interact":
        response = _field(body, "response", str)
        if not response.strip():
            raise RequestError("response: empty")
        return lambda: service.interact(slot, lease, response)
    if action == "terminate":
        reason = _field(body, "termination_reason", str)
        if reason not in EXTERNAL_TERMINATIONS:
            raise RequestError(
                f"termination_reason: need one of {list(EXTERNAL_TERMINATIONS)}, got {reason!r}")
        return lambda: service.terminate(slot, lease, reason)
    return lambda: service.release(slot, lease)


def create_app(engine: ShopEngine, slots: int = 8, *,
               split_sizes: Mapping[str, int] | None = None) -> FastAPI:
    """Build the FastAPI app serving ``POST /api/shop_agent`` and ``GET /healthz`` over ``engine``.

    Parameters
    ----------
    engine:
        The shared store engine (one per process).
    slots:
        Number of environment slots; resets beyond this queue until a slot is released.
    split_sizes:
        Task counts per split for ``/healthz``.

    Returns
    -------
    FastAPI
        The app; ``app.state.shop`` is its :class:`ShopService`.
    """
    service = ShopService(engine, slots, split_sizes)
    waiters = anyio.CapacityLimiter(MAX_WAITING_RESETS)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        service.close()

    app = FastAPI(title="intraskill store", lifespan=lifespan)
    app.state.shop = service

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return service.health()

    @app.post("/api/shop_agent")
    async def shop_agent(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "body: need a JSON object")
        if not isinstance(body, dict):
            return _error(400, "body: need a JSON object")
        try:
            if body.get("action") == "reset":
                result = await _reset(service, request, body, waiters)
                if result is None:  # 499: the nginx convention for "client closed request"; never read
                    return _error(499, "client disconnected while waiting for a slot")
            else:
                result = await anyio.to_thread.run_sync(_dispatch(service, body))
        except RequestError as exc:
            return _error(400, str(exc))
        except PoolClosedError as exc:
            return _error(503, str(exc))
        except LeaseError as exc:
            return _error(409, str(exc))
        except Exception as exc:  # engine failures, e.g. stepping a finished episode
            logger.exception("shop_agent %s failed", body.get("action"))
            return _error(500, f"{type(exc).__name__}: {exc}")
        return JSONResponse({"result": result})

    return app


class RunningService:
    """A uvicorn server for an app, running in a background thread on a bound local socket.

    Use :func:`serve_in_thread`; ``base_url`` is ready once construction returns.
    """

    def __init__(self, server: uvicorn.Server, sock: socket.socket, thread: threading.Thread) -> None:
        self.server = server
        self.thread = thread
        host, port = sock.getsockname()[:2]
        self.base_url = f"http://{host}:{port}"
        self._sock = sock

    def stop(self, timeout: float = 10.0) -> None:
        """Close the slot pool (failing parked resets), shut the server down and join its thread."""
        shop = getattr(self.server.config.app.state, "shop", None)
        if shop is not None:
            shop.close()
        self.server.should_exit = True
        self.thread.join(timeout)
        self._sock.close()
        if self.thread.is_alive():
            raise RuntimeError(f"service at {self.base_url} did not stop within {timeout} s")

    def __enter__(self) -> RunningService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_thread(app: FastAPI, host: str = "127.0.0.1", port: int = 0,
                    startup_timeout: float = 20.0) -> RunningService:
    """Start ``app`` under uvicorn in a daemon thread and wait until it accepts requests.

    Parameters
    ----------
    app:
        The ASGI app (usually from :func:`create_app`).
    host, port:
        Bind address; ``port=0`` picks a free port (read it from ``base_url``).
    startup_timeout:
        Seconds to wait for the server to start.
    """
    # deferred: uvicorn is heavy to import
    import uvicorn

    # proto=IPPROTO_TCP lets asyncio set TCP_NODELAY on accepted connections; without it, Nagle
    # plus delayed ACKs add ~40 ms to every keep-alive request.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="intraskill-store",
                              daemon=True)
    thread.start()
    started = _wait_until(lambda: server.started or not thread.is_alive(), startup_timeout)
    if not (started and server.started):
        server.should_exit = True
        sock.close()
        raise RuntimeError(f"store service on {host}:{port} failed to start within {startup_timeout} s")
    return RunningService(server, sock, thread)


def _wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
