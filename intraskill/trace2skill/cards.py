"""Typed failure cards of the gold-aware Failure Analyst and their programmatic downgrades.

Reference: docs/method.md §4.1. The analyst submits ``submit_failure_card`` with a ``status``
(PROPOSE_ADD, PROPOSE_REWRITE or NO_PROPOSAL), a ``privileged_audit`` (gold access; never deployed)
and a ``deployable_abstraction`` (what may become a chunk). The runner adds the live-audit evidence
(``terminal_trials``, ``successful_counterfactual_trials``, ``grounded_live_actions``,
``audit_transcript``) and the gold-firewall findings over the deployable abstraction.

Programmatic downgrades to NO_PROPOSAL, checked in this order (the first that applies is recorded):

1. no valid live action (``proposal_without_grounded_live_action``);
2. no terminal trial with ``r_success = 1`` (``proposal_without_successful_counterfactual``): the
   rule is listed for every proposal, ADD and REWRITE alike;
3. a REWRITE at cold start (``rewrite_at_cold_start``);
4. a REWRITE whose target is not an active chunk (``rewrite_target_not_active``);
5. any gold-firewall finding (``gold_firewall_finding``).

A card is ``eligible_for_consolidation`` only if its status is not NO_PROPOSAL and it has no
firewall findings.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum
from typing import Any

from intraskill.trace2skill.firewall import FirewallFinding, GoldLookup, scan_payload

STAGE_COLD_START = "cold_start"
STAGE_ONLINE = "online"
STAGES = (STAGE_COLD_START, STAGE_ONLINE)

REASON_NO_GROUNDED_ACTION = "proposal_without_grounded_live_action"
REASON_NO_SUCCESSFUL_COUNTERFACTUAL = "proposal_without_successful_counterfactual"
REASON_REWRITE_AT_COLD_START = "rewrite_at_cold_start"
REASON_REWRITE_TARGET_NOT_ACTIVE = "rewrite_target_not_active"
REASON_FIREWALL = "gold_firewall_finding"


class CardStatus(str, Enum):
    """The analyst's verdict on one failed trajectory."""

    PROPOSE_ADD = "PROPOSE_ADD"
    PROPOSE_REWRITE = "PROPOSE_REWRITE"
    NO_PROPOSAL = "NO_PROPOSAL"


class CardError(ValueError):
    """A failure card record is malformed; the message names the field."""


def _text_fields(
    cls: type, data: Mapping[str, Any], where: str, optional: Collection[str] = ()
) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise CardError(f"{where}: expected an object, got {type(data).__name__}")
    names = [f.name for f in fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise CardError(f"{where}: unknown field(s) {unknown}")
    values: dict[str, Any] = {}
    for name in names:
        value = data.get(name)
        if value is None and name in optional:
            values[name] = None
        elif not isinstance(value, str):
            raise CardError(f"{where}.{name}: expected a string, got {value!r}")
        else:
            values[name] = value
    return values


@dataclass(frozen=True)
class PrivilegedAudit:
    """Gold-aware diagnosis (never deployed): what was bought, what should have been, and why."""

    gold_asin: str
    chosen_asin: str
    failure_surface: str
    earliest_divergence: str
    oracle_comparison: str
    replay_evidence: str
    minimal_repair: str
    repair_validation_result: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "privileged_audit") -> "PrivilegedAudit":
        return cls(**_text_fields(cls, data, where))


@dataclass(frozen=True)
class DeployableAbstraction:
    """The gold-free lesson that may become a chunk; ``target_chunk_id`` is ``None`` unless REWRITE."""

    failure_mechanism: str
    applicable_when: str
    observable_trigger: str
    corrective_procedure: str
    verification_step: str
    target_chunk_id: str | None
    proposed_content: str

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], where: str = "deployable_abstraction"
    ) -> "DeployableAbstraction":
        return cls(**_text_fields(cls, data, where, optional=("target_chunk_id",)))


@dataclass(frozen=True)
class TerminalTrial:
    """One counterfactual purchase of the live audit (the runner resets a new trial after it)."""

    reward: float
    reward_detail: dict[str, Any]
    purchase: dict[str, Any] | None
    termination: str
    success: bool

    def __post_init__(self) -> None:
        reward = self.reward
        if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
            raise CardError(f"terminal_trials.reward: must be a finite number, got {self.reward!r}")
        r_success = self.reward_detail.get("r_success")
        if r_success is not None and bool(r_success == 1) != self.success:
            raise CardError(
                f"terminal_trials.success: {self.success} contradicts reward_detail.r_success={r_success}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TerminalTrial":
        detail = data.get("reward_detail") or {}
        success = data.get("success", detail.get("r_success") == 1)
        return cls(reward=data.get("reward"), reward_detail=dict(detail), purchase=data.get("purchase"),
                   termination=str(data.get("termination", "")), success=bool(success))


@dataclass(frozen=True)
class FailureCard:
    """One evidence card of the gold-aware Failure Analyst (cold start or online)."""

    card_id: str
    status: CardStatus
    privileged_audit: PrivilegedAudit
    deployable_abstraction: DeployableAbstraction
    terminal_trials: tuple[TerminalTrial, ...] = ()
    successful_counterfactual_trials: tuple[TerminalTrial, ...] = ()
    grounded_live_actions: tuple[str, ...] = ()
    firewall_findings: tuple[FirewallFinding, ...] = ()
    downgrade_reason: str | None = None
    audit_transcript: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.card_id, str) or not self.card_id:
            raise CardError("card_id: must be a non-empty string")
        object.__setattr__(self, "status", CardStatus(self.status))

    @property
    def is_proposal(self) -> bool:
        """True for PROPOSE_ADD and PROPOSE_REWRITE."""
        return self.status is not CardStatus.NO_PROPOSAL

    @property
    def eligible_for_consolidation(self) -> bool:
        """A proposal with no firewall findings."""
        return self.is_proposal and not self.firewall_findings

    def deployable_view(self) -> dict[str, Any]:
        """What the consolidator sees of the card: its deployable abstraction (never the privileged audit)."""
        return asdict(self.deployable_abstraction)

    def to_dict(self) -> dict[str, Any]:
        """JSON record (``evidence_cards.jsonl`` line), including the derived eligibility flag."""
        return {
            "card_id": self.card_id,
            "status": self.status.value,
            "privileged_audit": asdict(self.privileged_audit),
            "deployable_abstraction": asdict(self.deployable_abstraction),
            "terminal_trials": [asdict(t) for t in self.terminal_trials],
            "successful_counterfactual_trials": [asdict(t) for t in self.successful_counterfactual_trials],
            "grounded_live_actions": list(self.grounded_live_actions),
            "firewall_findings": [f.to_dict() for f in self.firewall_findings],
            "downgrade_reason": self.downgrade_reason,
            "eligible_for_consolidation": self.eligible_for_consolidation,
            "audit_transcript": [dict(turn) for turn in self.audit_transcript],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FailureCard":
        """Parse a card record; a stored ``eligible_for_consolidation`` must match the derived value."""
        if not isinstance(data, Mapping):
            raise CardError(f"card: expected an object, got {type(data).__name__}")
        for key in ("card_id", "status", "privileged_audit", "deployable_abstraction"):
            if key not in data:
                raise CardError(f"{key}: missing")
        try:
            status = CardStatus(data["status"])
        except ValueError:
            allowed = [s.value for s in CardStatus]
            raise CardError(f"status: expected one of {allowed}, got {data['status']!r}") from None
        card = cls(
            card_id=data["card_id"],
            status=status,
            privileged_audit=PrivilegedAudit.from_dict(data["privileged_audit"]),
            deployable_abstraction=DeployableAbstraction.from_dict(data["deployable_abstraction"]),
            terminal_trials=tuple(TerminalTrial.from_dict(t) for t in data.get("terminal_trials") or []),
            successful_counterfactual_trials=tuple(
                TerminalTrial.from_dict(t) for t in data.get("successful_counterfactual_trials") or []),
            grounded_live_actions=tuple(str(a) for a in data.get("grounded_live_actions") or []),
            firewall_findings=tuple(
                FirewallFinding.from_dict(f) for f in data.get("firewall_findings") or []),
            downgrade_reason=data.get("downgrade_reason"),
            audit_transcript=tuple(dict(t) for t in data.get("audit_transcript") or []),
        )
        stored = data.get("eligible_for_consolidation")
        if stored is not None and stored != card.eligible_for_consolidation:
            raise CardError(
                f"eligible_for_consolidation: stored {stored} but the card's status and findings give "
                f"{card.eligible_for_consolidation}"
            )
        return card


def screen_card(card: FailureCard, lookup: GoldLookup) -> FailureCard:
    """The card with ``firewall_findings`` = the firewall over its deployable abstraction.

    Paths are prefixed with ``deployable_abstraction.``; ``target_chunk_id`` is an ID, not deployable
    text, and is not scanned.
    """
    text = {k: v for k, v in asdict(card.deployable_abstraction).items() if k != "target_chunk_id"}
    payload = {"deployable_abstraction": text}
    return replace(card, firewall_findings=tuple(scan_payload(payload, lookup)))


def downgrade_reason(card: FailureCard, active_chunk_ids: Collection[str], stage: str) -> str | None:
    """The first programmatic downgrade that applies to a proposal card, or ``None``."""
    if stage not in STAGES:
        raise CardError(f"stage: expected one of {STAGES}, got {stage!r}")
    if not card.is_proposal:
        return None
    if not card.grounded_live_actions:
        return REASON_NO_GROUNDED_ACTION
    if not any(trial.success for trial in card.terminal_trials):
        return REASON_NO_SUCCESSFUL_COUNTERFACTUAL
    if card.status is CardStatus.PROPOSE_REWRITE:
        if stage == STAGE_COLD_START:
            return REASON_REWRITE_AT_COLD_START
        if card.deployable_abstraction.target_chunk_id not in set(active_chunk_ids):
            return REASON_REWRITE_TARGET_NOT_ACTIVE
    if card.firewall_findings:
        return REASON_FIREWALL
    return None


def apply_downgrades(card: FailureCard, active_chunk_ids: Collection[str], stage: str) -> FailureCard:
    """Apply §4.1's programmatic downgrades: a failing proposal becomes NO_PROPOSAL with the reason.

    ``successful_counterfactual_trials`` is re-derived from ``terminal_trials`` (those with
    ``r_success = 1``). Cards that pass, and NO_PROPOSAL cards, keep their status.

    Parameters
    ----------
    card : FailureCard
        The analyst's card, already screened (:func:`screen_card`).
    active_chunk_ids : collection of str
        The chunk IDs of the current bank (empty at cold start).
    stage : str
        ``"cold_start"`` or ``"online"``.
    """
    successes = tuple(trial for trial in card.terminal_trials if trial.success)
    card = replace(card, successful_counterfactual_trials=successes)
    reason = downgrade_reason(card, active_chunk_ids, stage)
    if reason is None:
        return card
    return replace(card, status=CardStatus.NO_PROPOSAL, downgrade_reason=reason)
