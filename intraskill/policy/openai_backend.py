"""Policy over any OpenAI-compatible chat-completions endpoint (SGLang, vLLM, ``intraskill serve-policy``).

Requests of one turn run concurrently on a private event loop, bounded by a semaphore; each is
retried with exponential backoff on connection errors, timeouts, 429 and 5xx replies. Tools are
passed natively; the reply's ``tool_calls``/``content``/``finish_reason`` map onto
:class:`~intraskill.chat.base.Generation`. Token ids and log-probs are not available remotely.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import TYPE_CHECKING, Any

from intraskill.chat.base import (
    CONTEXT_LENGTH_EXCEEDED,
    ChatRequest,
    ContextFull,
    Generation,
    SessionTokens,
    ToolCall,
)
from intraskill.chat.chatml import INVALID_ARGUMENTS_JSON, parse_tool_calls, render_tool_call

if TYPE_CHECKING:
    from openai import AsyncOpenAI

LOGGER = logging.getLogger(__name__)


class OpenAIPolicy:
    """Chat-completions policy with bounded concurrency and retries.

    Parameters
    ----------
    base_url
        Endpoint root, e.g. ``http://127.0.0.1:30000/v1``.
    model
        Served model name.
    api_key
        Sent as bearer token (local servers accept any).
    max_concurrency
        At most this many requests in flight.
    max_retries
        Retries after the first attempt for retryable failures.
    backoff
        First retry delay in seconds; doubles on each further retry.
    timeout
        Per-request timeout in seconds.
    extra_body
        Extra JSON fields for every request (e.g. ``{"top_k": -1}`` for SGLang).
    checkpoint_id
        Recorded in :attr:`identity`.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "EMPTY",
        max_concurrency: int = 16,
        max_retries: int = 3,
        backoff: float = 0.5,
        timeout: float = 600.0,
        extra_body: dict[str, Any] | None = None,
        checkpoint_id: str | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if max_retries < 0 or backoff < 0:
            raise ValueError(f"max_retries and backoff must be >= 0, got {max_retries}, {backoff}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.backoff = backoff
        self.timeout = timeout
        self.extra_body = dict(extra_body or {})
        self._checkpoint_id = checkpoint_id
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._client: AsyncOpenAI | None = None
        self.attempts = 0

    @property
    def identity(self) -> dict[str, Any]:
        return {"model_id": self.model, "checkpoint_id": self._checkpoint_id, "backend": "openai",
                "base_url": self.base_url}

    def end_session(self, session_id: str) -> SessionTokens | None:
        """Remote sessions keep no local state; nothing to return."""
        return None

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        """Run the turn's requests concurrently; one :class:`Generation` per request, in order."""
        with self._lock:
            return self._loop.run_until_complete(self._generate_all(requests))

    def close(self) -> None:
        """Close the HTTP client and the private event loop."""
        with self._lock:
            if self._client is not None:
                self._loop.run_until_complete(self._client.close())
                self._client = None
            self._loop.close()

    async def _generate_all(self, requests: list[ChatRequest]) -> list[Generation]:
        # deferred: openai is heavy to import
        from openai import AsyncOpenAI

        if self._client is None:
            self._client = AsyncOpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout,
                                       max_retries=0)
        semaphore = asyncio.Semaphore(self.max_concurrency)

        async def bounded(request: ChatRequest) -> Generation:
            async with semaphore:
                return await self._complete(request)

        return list(await asyncio.gather(*(bounded(r) for r in requests)))

    async def _complete(self, request: ChatRequest) -> Generation:
        # deferred: openai is heavy to import
        import openai

        retryable = (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError,
                     openai.InternalServerError)
        body: dict[str, Any] = {"model": self.model, "messages": request.messages,
                                "max_tokens": request.max_tokens, "temperature": request.temperature,
                                "top_p": request.top_p}
        if request.tools:
            body["tools"] = request.tools
        if request.seed is not None:
            body["seed"] = request.seed
        attempt = 0
        while True:
            self.attempts += 1
            try:
                response = await self._client.chat.completions.create(**body, extra_body=self.extra_body or None)
                return to_generation(response)
            except openai.BadRequestError as error:
                if context_exceeded(error):
                    raise ContextFull(f"session {request.session_id}: {error.message}") from None
                raise
            except retryable as error:
                if attempt >= self.max_retries:
                    raise
                delay = self.backoff * 2**attempt
                attempt += 1
                LOGGER.warning("%s: %s; retry %d in %.2fs", request.session_id, type(error).__name__, attempt, delay)
                await asyncio.sleep(delay)


def context_exceeded(error: Any) -> bool:
    """Whether an HTTP 400 says the prompt exceeds the context window: the OpenAI code
    (:data:`~intraskill.chat.base.CONTEXT_LENGTH_EXCEEDED`, which ``serve-policy`` sends) or a message naming the
    context length (vLLM: "maximum context length is …", SGLang: "… longer than the model's context length")."""
    return getattr(error, "code", None) == CONTEXT_LENGTH_EXCEEDED or "context length" in str(error.message).lower()


def to_generation(response: Any) -> Generation:
    """Map an OpenAI ``ChatCompletion`` onto :class:`Generation`.

    Native ``tool_calls`` win; otherwise the content is parsed for Hermes ``<tool_call>`` blocks
    (servers without a tool parser). Undecodable native argument JSON sets ``parse_error``.
    """
    choice = response.choices[0]
    message = choice.message
    content = message.content or ""
    usage = response.usage
    calls: list[ToolCall] = []
    error: str | None = None
    if message.tool_calls:
        for call in message.tool_calls:
            try:
                json.loads(call.function.arguments or "{}")
            except json.JSONDecodeError:
                error = INVALID_ARGUMENTS_JSON
            calls.append(ToolCall(call.function.name, call.function.arguments or "{}"))
        shown = [content.strip()] if content.strip() else []
        text = "\n".join(shown + [render_tool_call(call.name, call.arguments) for call in calls])
    else:
        text = content
        content, calls, error = parse_tool_calls(content)
    return Generation(
        text=text,
        content=content.strip(),
        tool_calls=calls,
        finish_reason="length" if choice.finish_reason == "length" else "stop",
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
        parse_error=error,
    )
