"""Which failure analyst a round uses, and the one factory that builds it (``--analyst rule|llm``).

Both ``intraskill trace2skill analyze`` and ``intraskill co-evolve`` take the same ``--analyst*`` flags,
turn them into :class:`AnalystSettings` and open the analyst and its compiler with :func:`open_analyst`:
the rule analyst with the rule compiler (offline), or :class:`~intraskill.trace2skill.llm_analyst.LLMAnalyst`
with :class:`~intraskill.trace2skill.llm_analyst.LLMCompiler` over any OpenAI-compatible server (e.g.
``intraskill serve-policy``). Settings are plain values (part of a run's plan); the HTTP client is made
only when the analysis runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from intraskill.chat.base import ChatRequest, Generation, Policy, SessionTokens
from intraskill.policy.openai_backend import OpenAIPolicy
from intraskill.record import Record
from intraskill.shop.engine import ShopEngine
from intraskill.shop.house_codes import HouseCodes
from intraskill.trace2skill.analysis import Compiler
from intraskill.trace2skill.audit import Analyst
from intraskill.trace2skill.cards import STAGE_COLD_START
from intraskill.trace2skill.compiler import rule_compile
from intraskill.trace2skill.consolidation import Consolidator, LLMConsolidator, rule_consolidate
from intraskill.trace2skill.initial_skill import CompiledDraft, LLMInitialCompiler, rule_compile_initial
from intraskill.trace2skill.llm_analyst import LLMAnalyst, LLMCompiler
from intraskill.trace2skill.roles import MAX_FAILURE_STEPS, RoleConfig
from intraskill.trace2skill.rule_analyst import RuleAnalyst
from intraskill.trace2skill.success import LLMSuccessAnalyst, RuleSuccessAnalyst

RULE = "rule"
LLM = "llm"
ANALYSTS = (RULE, LLM)
DEFAULT_ANALYST_MODEL = "intraskill-policy"
DEFAULT_ANALYST_MAX_TOKENS = RoleConfig().max_tokens


@dataclass(frozen=True)
class AnalystSettings:
    """The analyst of a round; every error names its command-line flag.

    Parameters
    ----------
    kind : ``rule`` (offline, the default) or ``llm``.
    url : llm only, required: the OpenAI-compatible root, e.g. ``http://127.0.0.1:30000/v1``.
    model : llm only: the served model name.
    max_turns : llm only: analyst turns per card, the last reserved for submission.
    max_tokens : llm only: completion tokens per analyst turn.
    """

    kind: str = RULE
    url: str | None = None
    model: str = DEFAULT_ANALYST_MODEL
    max_turns: int = MAX_FAILURE_STEPS
    max_tokens: int = DEFAULT_ANALYST_MAX_TOKENS

    def __post_init__(self) -> None:
        if self.kind not in ANALYSTS:
            raise ValueError(f"--analyst: expected one of {', '.join(ANALYSTS)}, got {self.kind!r}")
        if self.kind == LLM and not self.url:
            raise ValueError("--analyst-url: required with --analyst llm")
        if self.max_turns < 1:
            raise ValueError(f"--analyst-max-turns: must be >= 1, got {self.max_turns}")
        if self.max_tokens < 1:
            raise ValueError(f"--analyst-max-tokens: must be >= 1, got {self.max_tokens}")
        if self.kind == RULE:
            default = AnalystSettings.__dataclass_fields__
            for flag, name in (("--analyst-url", "url"), ("--analyst-model", "model"),
                               ("--analyst-max-turns", "max_turns"), ("--analyst-max-tokens", "max_tokens")):
                if getattr(self, name) != default[name].default:
                    raise ValueError(f"{flag}: only with --analyst llm")


@contextmanager
def open_analyst(settings: AnalystSettings, engine: ShopEngine,
                 house_codes: HouseCodes | None = None) -> Iterator[tuple[Analyst, Compiler]]:
    """The analyst and compiler ``settings`` name over ``engine`` (``house_codes``: the store's, for the rule
    analyst); an LLM's HTTP client is closed on exit."""
    if settings.kind == RULE:
        yield RuleAnalyst(engine, house_codes=house_codes), rule_compile
        return
    policy = OpenAIPolicy(str(settings.url), settings.model)
    try:
        yield (LLMAnalyst(policy, engine, RoleConfig(max_tokens=settings.max_tokens), max_turns=settings.max_turns),
               LLMCompiler(policy))
    finally:
        policy.close()


class RoleCost(Record):
    """An LLM role's calls and tokens (prompt and completion) so far."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class CountingPolicy:
    """A policy that counts the calls and tokens of the roles it serves (the cold start's LLM cost)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    @property
    def identity(self) -> dict[str, Any]:
        return self.policy.identity

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        generations = self.policy.generate(requests)
        self.calls += len(generations)
        self.prompt_tokens += sum(g.prompt_tokens for g in generations)
        self.completion_tokens += sum(g.completion_tokens for g in generations)
        return generations

    def end_session(self, session_id: str) -> SessionTokens | None:
        return self.policy.end_session(session_id)

    def cost(self) -> RoleCost:
        """The calls and tokens so far."""
        return RoleCost(calls=self.calls, prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens)


@dataclass(frozen=True)
class ColdStartRoles:
    """The cold start's four roles and, for an LLM, the counter of their calls (``None`` for the rules)."""

    success: RuleSuccessAnalyst | LLMSuccessAnalyst
    failure: Analyst
    consolidator: Consolidator
    compiler: Callable[..., CompiledDraft]
    counter: CountingPolicy | None = None

    def cost(self) -> RoleCost:
        """The LLM roles' calls and tokens so far (zeros for the rule roles)."""
        return self.counter.cost() if self.counter is not None else RoleCost()


@contextmanager
def open_cold_start_roles(settings: AnalystSettings, engine: ShopEngine) -> Iterator[ColdStartRoles]:
    """The Success Analyst, the gold-aware Failure Analyst (stage ``cold_start``: ADD only), the consolidator
    and the holistic compiler ``settings`` name; an LLM's HTTP client is closed on exit."""
    if settings.kind == RULE:
        yield ColdStartRoles(RuleSuccessAnalyst(engine), RuleAnalyst(engine, stage=STAGE_COLD_START),
                             rule_consolidate, rule_compile_initial)
        return
    remote = OpenAIPolicy(str(settings.url), settings.model)
    counter = CountingPolicy(remote)
    config = RoleConfig(max_tokens=settings.max_tokens)
    try:
        yield ColdStartRoles(LLMSuccessAnalyst(counter, engine, config),
                             LLMAnalyst(counter, engine, config, max_turns=settings.max_turns, stage=STAGE_COLD_START),
                             LLMConsolidator(counter), LLMInitialCompiler(counter), counter)
    finally:
        remote.close()
