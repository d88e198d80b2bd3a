"""The live audit session of a Failure Analyst, the ``Analyst`` protocol, and card finalization.

Reference: docs/method.md §4.1 ("Live-audit semantics"). The analyst acts in a fresh live
session of the failed task. A purchase (or the store's action limit) ends the current *trial*: the
runner records a terminal trial {reward, reward_detail, purchase, termination, success} and resets
a new trial of the same task, so one audit can run several counterfactual purchases. Every valid
executed action is a grounded live action. :func:`finalize_card` then applies the gold firewall
(:func:`~intraskill.trace2skill.cards.screen_card`) and the programmatic downgrades
(:func:`~intraskill.trace2skill.cards.apply_downgrades`) to whatever an analyst proposed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from intraskill.shop.engine import ShopEngine
from intraskill.skills.bank import SkillBank
from intraskill.trace2skill.cards import FailureCard, TerminalTrial, apply_downgrades, screen_card
from intraskill.trace2skill.firewall import GoldLookup
from intraskill.trace2skill.queue import AnalysisItem


class Analyst(Protocol):
    """Turns one queued failed retry into a failure card (already screened and downgraded)."""

    name: str

    def analyze(self, item: AnalysisItem, current_bank: SkillBank) -> FailureCard:
        """The evidence card of ``item`` against the bank the retry used."""
        ...


class LiveAudit:
    """A live store session of one task that records terminal trials and resets after each.

    Parameters
    ----------
    engine : the store engine (the same catalogue and index the trace was played in).
    task_id : the failed task.
    session_id : a label for the session (the card ID).
    """

    def __init__(self, engine: ShopEngine, task_id: int, session_id: str) -> None:
        self.session = engine.new_session(f"audit-{session_id}")
        self.task_id = task_id
        self.trials: list[TerminalTrial] = []
        self.grounded_actions: list[str] = []
        self.transcript: list[dict[str, Any]] = []
        self.seen_states: list[dict[str, Any]] = []
        self.reset_payload = self._reset()

    def _reset(self) -> dict[str, Any]:
        payload = self.session.reset(self.task_id)
        self.seen_states.append(payload["observation_state"])
        return payload

    @property
    def state(self) -> dict[str, Any]:
        """The current page state of the live trial."""
        return self.session.state

    @property
    def trial_index(self) -> int:
        """The index of the live trial (the number of finished trials)."""
        return len(self.trials)

    def step(self, action: str) -> dict[str, Any]:
        """Apply ``action``; a terminal response records a trial and starts a fresh one.

        The returned dict is the store response; after a terminal it also holds ``trial`` (the
        recorded :class:`TerminalTrial` as a dict) and ``next_trial`` (the reset payload).
        """
        response = self.session.step(action)
        state = response.get("observation_state") or {}
        valid = bool((state.get("last_action") or {}).get("valid"))
        if valid:
            self.grounded_actions.append(action)
        self.seen_states.append(state)
        entry: dict[str, Any] = {"trial": self.trial_index, "action": action, "valid": valid,
                                 "page_type": state.get("page_type")}
        if response.get("done"):
            detail = dict(response.get("reward_detail") or {})
            trial = TerminalTrial(reward=float(response.get("reward", 0.0)), reward_detail=detail,
                                  purchase=response.get("purchase"),
                                  termination=str(response.get("termination_reason")),
                                  success=detail.get("r_success") == 1)
            self.trials.append(trial)
            entry["terminal"] = {"reward": trial.reward, "termination": trial.termination,
                                 "success": trial.success}
            response = {**response, "trial": {"reward": trial.reward, "termination": trial.termination,
                                              "success": trial.success},
                        "next_trial": self._reset()}
        self.transcript.append(entry)
        return response

    def abandon(self) -> None:
        """End an unfinished trial with ``action_limit`` (it counts as a failed terminal trial)."""
        if self.session.done or self.session.action_count == 0:
            return
        response = self.session.terminate("action_limit")
        detail = dict(response.get("reward_detail") or {})
        self.trials.append(TerminalTrial(0.0, detail, None, "action_limit", False))
        self.transcript.append({"trial": self.trial_index - 1, "action": "terminate", "valid": True,
                                "page_type": "terminal", "terminal": {"reward": 0.0,
                                                                      "termination": "action_limit",
                                                                      "success": False}})
        self._reset()


def finalize_card(card: FailureCard, audit: LiveAudit, lookup: GoldLookup,
                  active_chunk_ids: Sequence[str], stage: str) -> FailureCard:
    """Attach the audit evidence, screen with the gold firewall and apply the downgrades.

    The lookup is extended with every title and brand the live audit showed.
    """
    lookup = lookup.merged(GoldLookup.build(None, audit.seen_states))
    card = replace(card, terminal_trials=tuple(audit.trials),
                   grounded_live_actions=tuple(audit.grounded_actions),
                   audit_transcript=tuple(card.audit_transcript) or tuple(audit.transcript))
    return apply_downgrades(screen_card(card, lookup), active_chunk_ids, stage)
