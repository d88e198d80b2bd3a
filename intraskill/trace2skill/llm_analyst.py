"""The LLM roles over any OpenAI-compatible model: failure analyst, consolidator, online compiler.

Reference: docs/method.md §4.1. The failure analyst is agentic: each turn offers the live
``search``/``click`` tools of the current page plus ``submit_failure_card``; the final turn offers only
the submit tool. A protocol error costs a turn and returns a correction message; a purchase ends the
trial (:class:`~intraskill.trace2skill.audit.LiveAudit`). The first submission opens the submit stage
(3 attempts with repair messages, :func:`~intraskill.trace2skill.roles.call_structured`). A stage
that never yields a valid card gives a NO_PROPOSAL card with ``downgrade_reason`` =
``analyst_no_valid_submission``. Valid cards are screened and downgraded like the rule analyst's. Every
rejected submission (with its counted reason) and the repair of the accepted one are kept in the card's
``audit_transcript``; the compiler's in its :class:`~intraskill.trace2skill.compiler.CompileResult`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from intraskill.agent.protocol import interpret_generation, observation_message, turn_messages
from intraskill.agent.tools import build_tools
from intraskill.chat.base import ChatRequest, Policy
from intraskill.hashing import seed32
from intraskill.params import CONSOLIDATION_BATCH, MAX_CLUSTERS
from intraskill.shop.engine import ShopEngine
from intraskill.skills.bank import SkillBank
from intraskill.skills.pool import Candidate
from intraskill.trace2skill.audit import LiveAudit, finalize_card
from intraskill.trace2skill.cards import (
    STAGE_ONLINE,
    CardError,
    CardStatus,
    DeployableAbstraction,
    FailureCard,
    PrivilegedAudit,
)
from intraskill.trace2skill.compact import (
    DEFAULT_MAX_PRODUCTS,
    compact_trace,
    gold_lookup,
    privileged_gold_audit,
    redact,
    replay_trace,
)
from intraskill.trace2skill.compiler import CompileResult, compiler_input
from intraskill.trace2skill.firewall import GoldLookup, check_payload
from intraskill.trace2skill.ledger import LedgerEntry, ledger_signatures
from intraskill.trace2skill.queue import AnalysisItem
from intraskill.trace2skill.roles import (
    CLUSTERS_TOOL,
    COMPILER_ROLE,
    CONSOLIDATOR_PROMPT,
    FAILURE_ANALYST_PROMPT,
    FAILURE_CARD_TOOL,
    MAX_FAILURE_STEPS,
    ONLINE_CANDIDATES_TOOL,
    ONLINE_COMPILER_PROMPT,
    SUBMIT_FAILURE_CARD,
    RoleConfig,
    RoleFailure,
    call_structured,
    draft_text,
    rejected,
    require_each_once,
    submission,
)
from intraskill.trace2skill.submission import validate_online_submission

REASON_NO_VALID_SUBMISSION = "analyst_no_valid_submission"


def _user(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": json.dumps(payload, ensure_ascii=False, sort_keys=True)}


def parse_card_submission(arguments: Mapping[str, Any], card_id: str) -> FailureCard:
    """A :class:`FailureCard` from ``submit_failure_card`` arguments (``ValueError`` naming the field)."""
    unknown = sorted(set(arguments) - {"status", "privileged_audit", "deployable_abstraction"})
    if unknown:
        raise CardError(f"unknown field(s) {unknown}")
    card = FailureCard.from_dict({"card_id": card_id, **arguments})
    abstraction = card.deployable_abstraction
    if card.status is CardStatus.PROPOSE_ADD and abstraction.target_chunk_id is not None:
        raise CardError("deployable_abstraction.target_chunk_id: must be null for PROPOSE_ADD")
    if card.status is CardStatus.PROPOSE_REWRITE and not abstraction.target_chunk_id:
        raise CardError("deployable_abstraction.target_chunk_id: PROPOSE_REWRITE needs an active chunk id")
    if card.is_proposal and not abstraction.proposed_content.strip():
        raise CardError("deployable_abstraction.proposed_content: a proposal needs the chunk text")
    return card


class LLMAnalyst:
    """The gold-aware failure analyst over a :class:`~intraskill.chat.base.Policy` (``--analyst llm``).

    Parameters
    ----------
    policy : e.g. :class:`~intraskill.policy.openai_backend.OpenAIPolicy` for any OpenAI-compatible server.
    engine : the store engine (fresh live sessions of the failed task).
    config : decoding and submit-stage attempts.
    max_turns : LLM turns per card, the last reserved for submission (20).
    stage : ``"online"`` or ``"cold_start"``.
    max_products : results per step in the compact trace.
    """

    name = "llm"

    def __init__(self, policy: Policy, engine: ShopEngine, config: RoleConfig | None = None,
                 max_turns: int = MAX_FAILURE_STEPS, stage: str = STAGE_ONLINE,
                 max_products: int = DEFAULT_MAX_PRODUCTS) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns: must be >= 1, got {max_turns}")
        self.policy = policy
        self.engine = engine
        self.config = config or RoleConfig()
        self.max_turns = max_turns
        self.stage = stage
        self.max_products = max_products

    def _opening(self, item: AnalysisItem, bank: SkillBank,
                 audit: LiveAudit) -> tuple[list[dict[str, Any]], GoldLookup]:
        """The system and user messages, and the firewall lookup of the trace."""
        replayed = replay_trace(self.engine, item.trace)
        ids = replayed.product_ids() + [str((item.trace.private_goal or {}).get("asin", ""))]
        evidence = redact({"trace": compact_trace(replayed, self.max_products),
                           "privileged_gold_audit": privileged_gold_audit(item.trace)}, ids)
        reset = audit.reset_payload
        payload = {
            "analysis_contract": {
                "current_skill": [{"skill_id": s.skill_id, "version": s.version, "content": s.content}
                                  for s in bank.enabled_skills()],
                "stage": self.stage, "max_live_actions": self.max_turns - 1},
            "failed_trace_and_privileged_gold": evidence,
            "fresh_live_session": {"task_instruction": reset["task_instruction"],
                                   "user_persona": reset["user_persona"], "observation": reset["observation"]},
        }
        return [{"role": "system", "content": FAILURE_ANALYST_PROMPT}, _user(payload)], gold_lookup(replayed)

    def analyze(self, item: AnalysisItem, current_bank: SkillBank) -> FailureCard:
        """Run the live audit and the submit stage; return the screened, downgraded card."""
        audit = LiveAudit(self.engine, item.task_id, item.card_id)
        messages, lookup = self._opening(item, current_bank, audit)
        previous: dict[str, Any] | None = None
        for turn in range(self.max_turns - 1):
            live = build_tools(audit.state)
            request = ChatRequest(session_id=f"{item.card_id}:turn:{turn}", messages=list(messages),
                                  tools=live + [FAILURE_CARD_TOOL], max_tokens=self.config.max_tokens,
                                  temperature=self.config.temperature, top_p=self.config.top_p,
                                  seed=seed32(f"{self.config.seed}:{item.card_id}:{turn}"))
            generation = self.policy.generate([request])[0]
            if any(call.name == SUBMIT_FAILURE_CARD for call in generation.tool_calls):
                try:
                    arguments, repair = submission(generation, SUBMIT_FAILURE_CARD)
                    return self._finish(parse_card_submission(arguments, item.card_id), audit, lookup,
                                        current_bank, repair=repair)
                except ValueError as error:
                    previous = rejected(0, draft_text(generation), error)
                    break
            decision = interpret_generation(replace(generation, content=""), live)
            echo = turn_messages(replace(generation, content=""), decision, live)
            messages.extend(echo)
            if decision.is_valid:
                response = audit.step(decision.action)
                observation = response["observation"]
                if "trial" in response:
                    observation = json.dumps({"terminal_trial": response["trial"],
                                              "new_trial_observation": response["next_trial"]["observation"]},
                                             ensure_ascii=False)
                messages.append(observation_message(echo[0], observation))
        try:
            result = call_structured(self.policy, item.card_id, messages, FAILURE_CARD_TOOL,
                                     lambda args: parse_card_submission(args, item.card_id), self.config,
                                     previous)
        except RoleFailure as failure:
            return self._fallback(item, audit, lookup, current_bank, failure.attempts)
        return self._finish(result.value, audit, lookup, current_bank, result.attempts, result.repair)

    def _finish(self, card: FailureCard, audit: LiveAudit, lookup: GoldLookup, bank: SkillBank,
                attempts: Sequence[dict[str, Any]] = (), repair: str | None = None) -> FailureCard:
        transcript = tuple(audit.transcript) + tuple(
            {"submission_attempt": a["attempt"], "error": a["error"], "reason": a["reason"]} for a in attempts)
        if repair is not None:
            transcript += ({"submission_repair": repair},)
        card = replace(card, audit_transcript=transcript)
        return finalize_card(card, audit, lookup, [s.skill_id for s in bank.enabled_skills()], self.stage)

    def _fallback(self, item: AnalysisItem, audit: LiveAudit, lookup: GoldLookup, bank: SkillBank,
                  attempts: Sequence[dict[str, Any]]) -> FailureCard:
        chosen = str((item.trace.purchase or {}).get("asin") or "")
        gold = str((item.trace.private_goal or {}).get("asin") or "")
        last = attempts[-1]["error"] if attempts else "no submission"
        audit_fields = PrivilegedAudit(gold, chosen, "", "", "", "", "", f"no valid card: {last}")
        card = FailureCard(item.card_id, CardStatus.NO_PROPOSAL, audit_fields,
                           DeployableAbstraction("", "", "", "", "", None, ""),
                           downgrade_reason=REASON_NO_VALID_SUBMISSION)
        return self._finish(card, audit, lookup, bank, attempts)


def validate_clusters(arguments: Mapping[str, Any], card_ids: Sequence[str], max_clusters: int,
                      lookup: GoldLookup | None = None) -> dict[str, Any]:
    """Check a ``submit_clusters`` object: ≤ ``max_clusters`` clusters, complete chunk fields, every card
    exactly once (in one cluster or evidence-only), no gold-firewall finding. Returns the object."""
    clusters = arguments.get("clusters")
    if not isinstance(clusters, list):
        raise ValueError("clusters: expected a list")
    if len(clusters) > max_clusters:
        raise ValueError(f"clusters: {len(clusters)} submitted, at most {max_clusters} allowed")
    cited: list[str] = []
    for index, cluster in enumerate(clusters):
        where = f"clusters[{index}]"
        if not isinstance(cluster, Mapping):
            raise ValueError(f"{where}: expected an object")
        for key in ("workflow_stage", "mechanism", "applicable_when", "verification", "common_failure"):
            if not isinstance(cluster.get(key), str) or not cluster[key].strip():
                raise ValueError(f"{where}.{key}: must be a non-empty string")
        for key in ("procedure", "evidence_card_ids"):
            value = cluster.get(key)
            if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}.{key}: must be a non-empty list of strings")
        cited += cluster["evidence_card_ids"]
        check_payload({k: v for k, v in cluster.items() if k != "evidence_card_ids"}, lookup, where)
    evidence_only = arguments.get("evidence_only_card_ids") or []
    if not isinstance(evidence_only, list):
        raise ValueError("evidence_only_card_ids: expected a list")
    cited += evidence_only
    require_each_once(cited, card_ids, "evidence_card_ids", "card")
    return dict(arguments)


class EvidenceCard(Protocol):
    """A card the consolidator can cluster: a failure card or a success card."""

    card_id: str

    def deployable_view(self) -> dict[str, Any]:
        """The card's gold-free fields."""
        ...


def consolidate(policy: Policy, cards: Sequence[EvidenceCard], *, channel: str, batch_id: str,
                lookup: GoldLookup | None = None, config: RoleConfig | None = None,
                max_clusters: int = MAX_CLUSTERS) -> dict[str, Any]:
    """One consolidator call over a batch (≤ 40) of cards' deployable views; returns ``submit_clusters``
    (at most ``min(max_clusters, len(cards))`` clusters)."""
    if not 1 <= len(cards) <= CONSOLIDATION_BATCH:
        raise ValueError(f"cards: a batch holds 1..{CONSOLIDATION_BATCH} cards, got {len(cards)}")
    max_clusters = min(max_clusters, len(cards))
    payload = {"channel": channel, "batch_id": batch_id, "max_clusters": max_clusters,
               "cards": [{"card_id": c.card_id, "deployable_abstraction": c.deployable_view()} for c in cards]}
    ids = [c.card_id for c in cards]
    messages = [{"role": "system", "content": CONSOLIDATOR_PROMPT}, _user(payload)]
    return call_structured(policy, f"consolidate:{channel}:{batch_id}", messages, CLUSTERS_TOOL,
                           lambda args: validate_clusters(args, ids, max_clusters, lookup),
                           config or RoleConfig()).value


def compile_online(policy: Policy, compiler_input: Mapping[str, Any], *, active_chunk_ids: Sequence[str],
                   eligible_card_ids: Collection[str], ledger_signatures: Collection[str],
                   proposal_checkpoint: str, lookup: GoldLookup | None = None,
                   config: RoleConfig = COMPILER_ROLE) -> CompileResult:
    """The online compiler role: ``submit_online_candidates`` validated by
    :func:`~intraskill.trace2skill.submission.validate_online_submission` (5 attempts by default).

    Returns the candidates, the evidence-only card IDs and the reasons of the rejected drafts; raises
    :class:`RoleFailure` when exhausted.
    """
    messages = [{"role": "system", "content": ONLINE_COMPILER_PROMPT}, _user(compiler_input)]
    holder: dict[str, Any] = {}

    def validate(arguments: dict[str, Any]) -> list[Candidate]:
        evidence_only = arguments.get("evidence_only_card_ids") or []
        if not isinstance(evidence_only, list):
            raise ValueError("evidence_only_card_ids: expected a list")
        holder["evidence_only"] = tuple(evidence_only)
        return validate_online_submission(
            arguments, active_chunk_ids=active_chunk_ids, eligible_card_ids=eligible_card_ids,
            ledger_signatures=ledger_signatures, proposal_checkpoint=proposal_checkpoint,
            max_candidates=compiler_input["max_candidates"], lookup=lookup)

    result = call_structured(policy, "online-compiler", messages, ONLINE_CANDIDATES_TOOL, validate, config)
    return CompileResult(tuple(result.value), holder["evidence_only"],
                         tuple(a["reason"] for a in result.attempts), result.repair)


class LLMCompiler:
    """The online compiler role as a :class:`~intraskill.trace2skill.analysis.Compiler`; a compiler that never
    submits a valid draft yields no candidates (``exhausted``) with its rejections counted."""

    def __init__(self, policy: Policy, config: RoleConfig = COMPILER_ROLE) -> None:
        self.policy = policy
        self.config = config

    def __call__(self, bank: SkillBank, cards: Sequence[FailureCard], history: Sequence[LedgerEntry], *,
                 proposal_checkpoint: str, max_candidates: int, lookup: GoldLookup | None) -> CompileResult:
        eligible = [c.card_id for c in cards if c.eligible_for_consolidation]
        if not eligible:
            return CompileResult((), ())
        try:
            return compile_online(
                self.policy, compiler_input(bank, cards, history, max_candidates),
                active_chunk_ids=[s.skill_id for s in bank.enabled_skills()], eligible_card_ids=eligible,
                ledger_signatures=ledger_signatures(history), proposal_checkpoint=proposal_checkpoint,
                lookup=lookup, config=self.config)
        except RoleFailure as failure:
            return CompileResult((), (), tuple(a["reason"] for a in failure.attempts), exhausted=True)
