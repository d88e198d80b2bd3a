"""The policy protocol: one turn for many live episodes, and the exact token stream of each episode.

Every backend (in-process ``hf``, remote ``openai``) implements :class:`Policy`. The agent runtime
calls :meth:`Policy.generate` once per turn with one :class:`ChatRequest` per live episode and
:meth:`Policy.end_session` once per finished episode. In-process backends return the sampled
token ids and log-probs (what GRPO trains on, ``docs/method.md`` §3.5); remote backends
return ``None`` for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class ToolCall:
    """One parsed function call; ``arguments`` is the JSON text of the argument object."""

    name: str
    arguments: str

    def to_openai(self, call_id: str) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` entry of this call."""
        return {"id": call_id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class ChatRequest:
    """One turn of one episode.

    Parameters
    ----------
    session_id
        Stable id of the episode; in-process backends key their token stream and KV cache by it.
    messages
        The whole conversation so far in OpenAI chat format (each call repeats the history).
    tools
        OpenAI function tools offered on this turn.
    max_tokens
        Completion budget of this turn; hitting it gives ``finish_reason == "length"``.
    temperature, top_p
        Sampling; ``temperature == 0`` is greedy (argmax).
    seed
        Seed of this turn's sampler; ``None`` derives one from ``session_id`` and the turn index.
    """

    session_id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not self.session_id:
            raise ValueError("ChatRequest.session_id must be a non-empty string")
        if not self.messages:
            raise ValueError("ChatRequest.messages must hold at least one message")
        if self.max_tokens < 1:
            raise ValueError(f"ChatRequest.max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"ChatRequest.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"ChatRequest.top_p must be in (0, 1], got {self.top_p}")


class ContextFull(ValueError):
    """A session's next prompt leaves no room for a reply below the model's context window. The runtime ends
    such an episode as a ``generation_length`` terminal (scored, reward 0) unless it fails on its first prompt,
    and the backend leaves the session's stream at its last reply, so the trained stream is what was sampled."""


CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
"""The OpenAI API's error code for a prompt over the context window: ``serve-policy`` answers
:class:`ContextFull` with it, and the OpenAI backend reads it (or a message naming the context length, as vLLM and
SGLang word it) back as :class:`ContextFull`."""


@dataclass
class Generation:
    """The model's reply to one :class:`ChatRequest`.

    ``text`` is the raw completion (stop token excluded), ``content`` the visible text outside tool
    calls, ``parse_error`` a :mod:`intraskill.chat.chatml` parse code or ``None``.
    ``token_ids``/``logprobs`` (in-process backends only) are the sampled tokens, stop token
    included, and the log-probs of the temperature-scaled distribution they were drawn from.
    """

    text: str
    content: str
    tool_calls: list[ToolCall]
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    parse_error: str | None = None


@dataclass
class SessionTokens:
    """The exact token stream of one episode, as the trainer consumes it.

    ``loss_mask[i] == 1`` iff token ``i`` was sampled by the model; 0 for prompt, observation,
    tool-result and chat-template tokens. ``logprobs[i]`` is the sampling log-prob where the mask
    is 1 and exactly ``0.0`` where it is 0. All three lists have the same length.
    """

    input_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not len(self.input_ids) == len(self.loss_mask) == len(self.logprobs):
            raise ValueError(
                "SessionTokens.input_ids, loss_mask and logprobs must have equal lengths, got "
                f"{len(self.input_ids)}, {len(self.loss_mask)}, {len(self.logprobs)}"
            )

    def to_dict(self) -> dict[str, list[Any]]:
        return {"input_ids": self.input_ids, "loss_mask": self.loss_mask, "logprobs": self.logprobs}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionTokens:
        return cls(list(data["input_ids"]), list(data["loss_mask"]), [float(x) for x in data["logprobs"]])


@runtime_checkable
class Policy(Protocol):
    """A chat policy that plays one turn of many episodes per call."""

    @property
    def identity(self) -> dict[str, Any]:
        """``{"model_id", "checkpoint_id", "backend", ...}`` recorded in every trace."""
        ...

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        """One reply per request, in request order."""
        ...

    def end_session(self, session_id: str) -> SessionTokens | None:
        """Free the session; in-process backends return its exact token stream."""
        ...
