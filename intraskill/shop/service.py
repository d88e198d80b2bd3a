"""The store as an HTTP service: the ShopSimulator ``/api/shop_agent`` protocol over one engine.

Reference ``docs/store.md`` §4.5 (payloads) and §6 (server): ``n`` slots share one
:class:`~intraskill.shop.engine.ShopEngine` (products, goals and search index loaded once); each
slot owns its own :class:`~intraskill.shop.engine.Session`. ``reset`` leases a slot, waiting at
most ``reset_wait_s`` for one (then 503 with ``Retry-After``); ``interact``/``terminate`` check the
lease; a slot is freed by ``release_one``, by ``release_all`` (admin token only) or when its lease
sits idle for ``lease_idle_s``. Every body is one of the pydantic models below (the OpenAPI schema
documents them), parsed with orjson under a size cap.

Terminal replies carry the task's private ``goal`` only in trusted mode (``reveal_goal``; see
``docs/security.md``). Errors, each as ``{"result": {"error": ...}}``: 400 bad argument or malformed
JSON (the message names the field), 403 wrong admin token, 408 body too slow, 409 stale lease
(``reason: stale_lease``) or finished episode (``reason: episode_finished``), 413 body over the cap,
503 no slot in time or shutting down, 500 anything else. A rejected request never reaches the session, so its episode is unchanged.

The app is a thin shell: request parsing and lease checks here, all store behaviour in the engine.
``POST /api/shop_agent`` is a plain Starlette route (no per-request dependency solving); its steps
run on the event loop, except searches, which run in a worker thread so a slow one stalls nobody.
"""

from __future__ import annotations

import contextlib
import gc
import hmac
import itertools
import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, AsyncIterator, Literal, NamedTuple

import anyio
import anyio.to_thread
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from starlette.routing import Route

from intraskill.http_limits import BODY_TIMEOUT_S, BodyLimit, uvicorn_limits
from intraskill.shop.actions import InvalidActionError, parse_action
from intraskill.shop.engine import (
    EXTERNAL_TERMINATIONS,
    INTERACTION_MODE,
    EpisodeFinishedError,
    Session,
    ShopEngine,
)
from intraskill.shop.leases import LeaseError, PoolClosedError, SlotLeasePool
from intraskill.shop.reward import PRIMARY_REWARD_COMPONENT
from intraskill.shop.search import query_tokens

if TYPE_CHECKING:
    import uvicorn

logger = logging.getLogger(__name__)

API_PATH = "/api/shop_agent"
ACQUIRE_POLL_S = 0.25
"""A waiting ``reset`` re-checks for a client disconnect, shutdown or its deadline this often (seconds)."""
MAX_WAITING_RESETS = 1024
"""Threads a service may park in blocking slot acquires, separate from the engine threadpool."""
MAX_BODY_BYTES = 64 * 1024
"""Largest accepted request body (bytes); larger bodies get 413."""
MAX_QUERY_TOKENS = 128
"""Most search tokens (``shop.text.tokenize``) one ``search[...]`` may carry; more get 400."""
RESET_WAIT_S = 60.0
"""Default longest wait of a ``reset`` for a free slot before 503."""
LEASE_IDLE_S = 900.0
"""Default idle time after which a lease expires and its slot returns to the pool."""
RETRY_AFTER_S = 1
"""The ``Retry-After`` (seconds) of a 503."""
SERVER_STACK = {"loop": "uvloop", "access_log": False, "proxy_headers": False, **uvicorn_limits()}
"""uvicorn's event loop, HTTP parser and per-request extras (none) for the service, as measured by
``benchmarks/bench_store.py``: no access log line and no ``X-Forwarded-*`` rewriting per request; the httptools
parser under the header timeout and keep-alive of :func:`intraskill.http_limits.uvicorn_limits`."""


# ---- request bodies (the OpenAPI schema) -------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class ResetBody(_Body):
    """Lease a free slot and start the episode of task ``idx``."""

    action: Literal["reset"]
    idx: int = Field(description="An active task id.")
    if_persona: bool | None = Field(None, description="Persona mode; null uses the store default.")
    include_private_goal: Literal[False] = Field(
        False, description="Must be false: the goal is revealed only in the terminal response.")
    interaction_mode: Literal["single_turn"] = INTERACTION_MODE
    env_idx: None = Field(None, description="Must not be sent: the server assigns the slot.")


class _LeasedBody(_Body):
    env_idx: int = Field(ge=0, description="The slot returned by reset.")
    lease_id: str = Field(max_length=64, description="The lease returned by reset.")


class InteractBody(_LeasedBody):
    """One canonical action, ``search[...]`` or ``click[...]`` (or text with one ``Action:`` line)."""

    action: Literal["interact"]
    response: str = Field(min_length=1, pattern=r"\S", description="The action text.")


class TerminateBody(_LeasedBody):
    """A zero-reward terminal."""

    action: Literal["terminate"]
    termination_reason: Literal[EXTERNAL_TERMINATIONS]  # type: ignore[valid-type]


class ReleaseOneBody(_LeasedBody):
    """Free the caller's slot."""

    action: Literal["release_one"]


class ReleaseAllBody(_Body):
    """Free every slot (all leases become stale); needs the service's admin token."""

    action: Literal["release_all"]
    admin_token: str = Field("", description="The token printed when the service started.")


ShopAgentBody = Annotated[ResetBody | InteractBody | TerminateBody | ReleaseOneBody | ReleaseAllBody,
                          Field(discriminator="action")]
_BODY = TypeAdapter(ShopAgentBody)
_ACTIONS = ("reset", "interact", "terminate", "release_one", "release_all")


class RequestError(ValueError):
    """A bad request argument (HTTP 400); the message names the field."""


class HTTPFailure(RuntimeError):
    """A refusal with its own status (403, 413, 503) and optional headers."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = dict(headers or {})


def check_search_query(response: str, max_tokens: int, field: str = "response") -> bool:
    """Whether ``response`` is a search; :class:`RequestError` naming ``field`` when its query has over
    ``max_tokens`` tokens. A malformed action is no search here: the engine answers it as invalid."""
    try:
        parsed = parse_action(response)
    except InvalidActionError:
        return False
    if parsed.name != "search":
        return False
    count = len(query_tokens(parsed.argument))
    if count > max_tokens:
        raise RequestError(f"{field}: the search query has {count} tokens, at most {max_tokens} allowed")
    return True


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
    admin_token:
        The token ``release_all`` must present.
    lease_idle_s:
        Idle seconds after which a lease expires (``None``: never).
    max_query_tokens:
        Most tokens of one search query.
    reveal_goal:
        Trusted mode: terminal replies carry the task's private ``goal``. Off by default, since a client that
        reads the goal can replay it on a fresh reset of the same task and forge its reward.
    """

    def __init__(self, engine: ShopEngine, slots: int = 8, split_sizes: Mapping[str, int] | None = None, *,
                 admin_token: str, lease_idle_s: float | None = LEASE_IDLE_S,
                 max_query_tokens: int = MAX_QUERY_TOKENS, reveal_goal: bool = False) -> None:
        if not admin_token:
            raise ValueError("admin_token: need a non-empty token")
        self.engine = engine
        self.pool = SlotLeasePool(slots, idle_timeout=lease_idle_s)
        self.max_query_tokens = max_query_tokens
        self.reveal_goal = reveal_goal
        self._admin_token = admin_token.encode()
        self._slots = [_Slot(session=engine.new_session(), lock=threading.Lock()) for _ in range(slots)]
        self._episodes = itertools.count(1)
        active = sum(1 for task_id in engine.goals if engine.has_task(task_id))
        self._task_counts = {"active": active, **dict(split_sizes or {})}

    def session(self, slot: int) -> Session:
        """The session of ``slot`` (for inspection; requests go through the lease-checked methods)."""
        return self._slots[slot].session

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
            payload = self._public(state.session.step(response))
        payload.update(over=bool(payload["done"]), idx=state.session_id, lease_id=lease)
        return payload

    def terminate(self, slot: int, lease: str, reason: str) -> dict[str, Any]:
        """Zero-reward terminal (``action_limit`` | ``generation_length``) on a leased slot."""
        state = self._slots[slot]
        with state.lock:
            self.pool.validate(slot, lease)
            payload = self._public(state.session.terminate(reason))
        payload.update(over=True, idx=state.session_id, lease_id=lease)
        return payload

    def _public(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """A step payload as this service sends it: the private ``goal`` only in trusted mode."""
        return dict(payload) if self.reveal_goal else {k: v for k, v in payload.items() if k != "goal"}

    def release(self, slot: int, lease: str) -> dict[str, Any]:
        """Free a leased slot (``release_one``)."""
        with self._slots[slot].lock:
            self.pool.release(slot, lease)
        return {"released": [slot], "free_slots": self.pool.free_count}

    def release_all(self, admin_token: str) -> dict[str, Any]:
        """Free every slot (all outstanding leases become stale); 403 without the admin token."""
        if not hmac.compare_digest(admin_token.encode(), self._admin_token):
            raise HTTPFailure(403, "admin_token: release_all needs the service's admin token")
        freed = self.pool.release_all()
        return {"released": freed, "free_slots": self.pool.free_count}

    def check_query(self, response: str) -> bool:
        """Whether ``response`` is a search; refuse one over ``max_query_tokens`` tokens (400)."""
        return check_search_query(response, self.max_query_tokens)

    def health(self) -> dict[str, Any]:
        """The ``/healthz`` body: readiness, slot counts, task counts, version pins, primary reward."""
        return {
            "ready": True,
            "environment_slots": self.pool.size,
            "free_slots": self.pool.free_count,
            "expired_leases": self.pool.expired_count,
            "waiting_resets": self.pool.waiting,
            "tasks": self._task_counts,
            "versions": self.engine.versions(),
            "primary_reward": PRIMARY_REWARD_COMPONENT,
            "reveals_goal": self.reveal_goal,
        }

    def close(self) -> None:
        """Stop handing out slots; parked resets fail with :class:`PoolClosedError` (HTTP 503)."""
        self.pool.close()


def _validation_message(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    loc = [str(part) for part in error["loc"]]
    if loc and loc[0] in _ACTIONS:
        loc = loc[1:]
    return f"{'.'.join(loc) or 'action'}: {error['msg']}"


def parse_body(raw: bytes) -> BaseModel:
    """The validated request model of a raw JSON body; :class:`RequestError` (400) naming the field."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:  # also lone surrogates, invalid UTF-8, nesting over 1024
        raise RequestError(f"body: need a JSON object ({exc})") from None
    if not isinstance(data, dict):
        raise RequestError("body: need a JSON object")
    try:
        return _BODY.validate_python(data)
    except ValidationError as exc:
        raise RequestError(_validation_message(exc)) from None


def _slot(service: ShopService, body: _LeasedBody) -> int:
    if body.env_idx >= service.pool.size:
        raise RequestError(f"env_idx: need a slot index in [0, {service.pool.size}), got {body.env_idx}")
    return body.env_idx


class Call(NamedTuple):
    """A validated non-reset action: the synchronous call, and whether it searches (the one slow step)."""

    run: Callable[[], dict[str, Any]]
    searches: bool = False


def dispatch(service: ShopService, body: BaseModel) -> Call:
    """The call for a non-reset action, validated now and run later."""
    if isinstance(body, ReleaseAllBody):
        return Call(lambda: service.release_all(body.admin_token))
    assert isinstance(body, _LeasedBody)
    slot, lease = _slot(service, body), body.lease_id
    if isinstance(body, InteractBody):
        service.pool.validate(slot, lease)  # a stale lease is refused before its text is parsed
        searches = service.check_query(body.response)
        return Call(lambda: service.interact(slot, lease, body.response), searches)
    if isinstance(body, TerminateBody):
        return Call(lambda: service.terminate(slot, lease, body.termination_reason))
    return Call(lambda: service.release(slot, lease))


def _json(status: int, content: Any, headers: Mapping[str, str] | None = None) -> Response:
    return Response(orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS), status_code=status,
                    media_type="application/json", headers=headers)


def _error(status: int, message: str, headers: Mapping[str, str] | None = None, **extra: str) -> Response:
    return _json(status, {"result": {"error": message, **extra}}, headers)


class _Lessor:
    """Leases slots for resets: a free slot at once, else a wait of at most ``wait_s``."""

    def __init__(self, service: ShopService, wait_s: float) -> None:
        self.service = service
        self.wait_s = wait_s
        self.waiters = anyio.CapacityLimiter(MAX_WAITING_RESETS)

    async def lease(self, request: Request) -> tuple[int, str] | None:
        """A ``(slot, lease)``; ``None`` if the client went away first; 503 after ``wait_s``."""
        pool = self.service.pool
        with contextlib.suppress(TimeoutError):
            return pool.acquire(0)
        deadline = time.monotonic() + self.wait_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                return await anyio.to_thread.run_sync(pool.acquire, min(ACQUIRE_POLL_S, left),
                                                      limiter=self.waiters)
            except TimeoutError:
                if await request.is_disconnected():
                    return None
        raise HTTPFailure(503, f"no free slot within {self.wait_s:g} s ({pool.size} slots, all leased)",
                          {"Retry-After": str(RETRY_AFTER_S)})

    async def reset(self, request: Request, body: ResetBody) -> dict[str, Any] | None:
        """Lease a slot and start the episode; the slot goes back if anything fails on the way."""
        if not self.service.engine.has_task(body.idx):
            raise RequestError(f"idx: unknown task id {body.idx}")
        leased = await self.lease(request)
        if leased is None:
            return None
        slot, lease = leased
        if await request.is_disconnected():  # nobody will ever release this slot: give it back now
            self._give_back(slot, lease)
            return None
        try:
            return self.service.start_episode(slot, lease, body.idx, body.if_persona)
        except BaseException:
            self._give_back(slot, lease)
            raise

    def _give_back(self, slot: int, lease: str) -> None:
        """Release a slot the caller never received (already freed by ``release_all`` is fine)."""
        with contextlib.suppress(LeaseError):
            self.service.pool.release(slot, lease)


def create_app(engine: ShopEngine, slots: int = 8, *, split_sizes: Mapping[str, int] | None = None,
               admin_token: str | None = None, lease_idle_s: float | None = LEASE_IDLE_S,
               reset_wait_s: float = RESET_WAIT_S, max_body_bytes: int = MAX_BODY_BYTES,
               max_query_tokens: int = MAX_QUERY_TOKENS, body_timeout_s: float = BODY_TIMEOUT_S,
               reveal_goal: bool = False) -> FastAPI:
    """Build the FastAPI app serving ``POST /api/shop_agent`` and ``GET /healthz`` over ``engine``.

    Parameters
    ----------
    engine:
        The shared store engine (one per process).
    slots:
        Number of environment slots; resets beyond this wait for a release or an expiry.
    split_sizes:
        Task counts per split for ``/healthz``.
    admin_token:
        The token ``release_all`` needs; ``None`` generates one (read it from ``app.state.admin_token``).
    lease_idle_s:
        Idle seconds after which a lease expires and its slot returns (``None``: never).
    reset_wait_s:
        Longest wait of a ``reset`` for a free slot; then 503 with ``Retry-After``.
    max_body_bytes, max_query_tokens:
        Caps on a request body (413, on the bytes read) and on the tokens of one search query (400).
    body_timeout_s:
        Longest time a request body may take to arrive (then 408; :class:`~intraskill.http_limits.BodyLimit`).
    reveal_goal:
        Trusted mode (see :class:`ShopService`): terminal replies carry the private goal.

    Returns
    -------
    FastAPI
        The app; ``app.state.shop`` is its :class:`ShopService`. Its startup calls ``gc.freeze()``:
        the process's heap so far (the loaded engine) is left out of later garbage collections.
    """
    if reset_wait_s <= 0 or max_body_bytes < 1 or max_query_tokens < 1:
        raise ValueError("reset_wait_s, max_body_bytes and max_query_tokens must be positive")
    token = admin_token or secrets.token_urlsafe(24)
    service = ShopService(engine, slots, split_sizes, admin_token=token, lease_idle_s=lease_idle_s,
                          max_query_tokens=max_query_tokens, reveal_goal=reveal_goal)
    lessor = _Lessor(service, reset_wait_s)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        gc.freeze()  # the loaded engine is permanent: collections no longer walk its objects
        yield
        service.close()

    app = FastAPI(title="intraskill store", lifespan=lifespan)
    app.state.shop = service
    app.state.admin_token = token
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes, timeout_s=body_timeout_s,
                       error_body=lambda message: {"result": {"error": message}})
    body_schema = _BODY.json_schema(ref_template="#/components/schemas/{model}")
    body_models = body_schema.pop("$defs")

    @app.get("/healthz")
    async def healthz() -> Response:
        return _json(200, service.health())

    async def shop_agent(request: Request) -> Response:
        action = None
        try:
            body = parse_body(await request.body())
            action = body.action  # type: ignore[attr-defined]
            if isinstance(body, ResetBody):
                result = await lessor.reset(request, body)
                if result is None:  # 499: the nginx convention for "client closed request"; never read
                    return _error(499, "client disconnected while waiting for a slot")
            else:
                call = dispatch(service, body)
                # A search runs in a worker thread, so a slow one cannot stall the event loop;
                # everything else takes microseconds and runs inline (no thread hop).
                result = await anyio.to_thread.run_sync(call.run) if call.searches else call.run()
        except RequestError as exc:
            return _error(400, str(exc))
        except HTTPFailure as exc:
            return _error(exc.status, str(exc), exc.headers)
        except PoolClosedError as exc:
            return _error(503, str(exc), {"Retry-After": str(RETRY_AFTER_S)})
        except LeaseError as exc:
            return _error(409, str(exc), reason="stale_lease")
        except EpisodeFinishedError as exc:
            return _error(409, str(exc), reason="episode_finished")
        except Exception as exc:  # engine failures
            logger.exception("shop_agent %s failed", action)
            return _error(500, f"{type(exc).__name__}: {exc}")
        return _json(200, {"result": result})

    # A plain Starlette route, matched first: FastAPI's dependency solving would cost every request.
    app.router.routes.insert(0, Route(API_PATH, shop_agent, methods=["POST"]))

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = FastAPI.openapi(app)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(body_models)
            schema["paths"][API_PATH] = {"post": {
                "summary": "Shop Agent", "operationId": "shop_agent",
                "requestBody": {"required": True, "content": {"application/json": {"schema": body_schema}}},
                "responses": {"200": {"description": "Successful Response",
                                      "content": {"application/json": {"schema": {}}}}}}}
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
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
                    startup_timeout: float = 20.0, **uvicorn_options: Any) -> RunningService:
    """Start ``app`` under uvicorn in a daemon thread and wait until it accepts requests.

    Parameters
    ----------
    app:
        The ASGI app (usually from :func:`create_app`).
    host, port:
        Bind address; ``port=0`` picks a free port (read it from ``base_url``).
    startup_timeout:
        Seconds to wait for the server to start.
    uvicorn_options:
        Further ``uvicorn.Config`` settings (e.g. ``ws_max_size``), over the service's stack.
    """
    # deferred: uvicorn is heavy to import
    import uvicorn

    # proto=IPPROTO_TCP lets asyncio set TCP_NODELAY on accepted connections; without it, Nagle
    # plus delayed ACKs add ~40 ms to every keep-alive request.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    config = uvicorn.Config(app, **{"log_level": "warning", "timeout_graceful_shutdown": 2, "lifespan": "on",
                                    **SERVER_STACK, **uvicorn_options})
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
