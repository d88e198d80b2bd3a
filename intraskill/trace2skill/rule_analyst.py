"""The offline rule analyst: gold diagnosis of a failed retry and a live counterfactual repair.

The analyst (1) replays the trace in the store (:func:`~intraskill.trace2skill.compact.replay_trace`);
(2) diagnoses the failure surface from the trace and the private goal (:func:`diagnose`) and the
earliest divergence step; (3) for each candidate mechanism of that surface (most specific first,
:data:`~intraskill.trace2skill.mechanisms.SURFACE_MECHANISMS`) runs a counterfactual trial in a
fresh live session: replay the trace's actions up to the divergence, apply the minimal public repair
(a query with the profile's brand/material words, the profile's option value, another variant within
budget, the next results page, a plausible product, or the expert's valid action), then continue with
the scripted expert's public-information policy until the trial ends; (4) proposes the mechanism's
generic chunk — an ADD, or a REWRITE of the active chunk tagged with the same mechanism. A proposal
without a successful counterfactual, or that trips the gold firewall, is downgraded to NO_PROPOSAL
(:func:`~intraskill.trace2skill.audit.finalize_card`).

Surface precedence: no purchase → ``protocol_errors`` (generation-length stop, or protocol errors at
least as many as valid actions) else ``action_limit``; a purchase with the wrong type or a missing
attribute → ``query_never_matched`` (the gold product is in no issued query's results),
``stopped_at_page_one`` (it is, but on no visited page), else ``wrong_type`` / ``missing_attribute``;
then ``wrong_option``; then ``over_budget`` (verified price above the budget) / ``unverifiable_price``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from intraskill.shop.engine import ShopEngine
from intraskill.shop.house_codes import CODED_KEY, STORE_COLOURS, HouseCodes
from intraskill.shop.scripted_expert import (
    NEXT_PAGE,
    PERSONA_OPTION_KEYS,
    PREV_PAGE,
    Competences,
    ScriptedExpert,
    instruction_core,
    instruction_words,
    persona_preferences,
)
from intraskill.shop.types import Goal, Task
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.render import render_chunk
from intraskill.trace2skill import mechanisms as mech
from intraskill.trace2skill.audit import LiveAudit, finalize_card
from intraskill.trace2skill.cards import (
    STAGE_ONLINE,
    CardStatus,
    DeployableAbstraction,
    FailureCard,
    PrivilegedAudit,
)
from intraskill.trace2skill.compact import ReplayedTrace, ReplayStep, gold_lookup, replay_trace
from intraskill.trace2skill.queue import AnalysisItem

MAX_PLANS = 2
"""Counterfactual trials per card (one per candidate mechanism)."""


@dataclass(frozen=True)
class Diagnosis:
    """The privileged diagnosis: surface, the divergence (a prefix length of env steps) and evidence."""

    surface: str
    divergence: int
    evidence: str


@dataclass(frozen=True)
class RepairPlan:
    """One counterfactual: keep ``prefix`` trace steps, then ``action`` (``None`` = the expert's own)."""

    mechanism: str
    prefix: int
    action: str | None
    replaced: str | None


def _words(text: Any) -> set[str]:
    return set(instruction_words(str(text or "")))


def required_words(task: Task) -> set[str]:
    """Public constraint words: the instruction's content words and the profile's brand and material."""
    prefs = persona_preferences(task.user_persona)
    words = _words(task.instruction_simple)
    for key in ("brand", "material"):
        words |= _words(prefs.get(key))
    return words


def plausible(product: dict[str, Any], words: set[str]) -> bool:
    """Every required word appears in the product's title, brand or key attributes."""
    text = _words(product.get("title")) | _words(product.get("brand"))
    for attribute in product.get("key_attributes") or []:
        text |= _words(attribute)
    return words <= text


def _state_at(replayed: ReplayedTrace, prefix: int) -> dict[str, Any]:
    """The page on which step ``prefix`` acts (after ``prefix`` replayed steps)."""
    if prefix < len(replayed.steps):
        return replayed.steps[prefix].state
    return replayed.states[-1]


def _clicked(step: ReplayStep) -> str | None:
    return step.action[6:-1] if step.action.startswith("click[") else None


def _opening_step(replayed: ReplayedTrace, asin: str) -> int:
    """The last step that opened ``asin`` from a results page (0 when none)."""
    opens = [s.index for s in replayed.steps
             if s.state.get("page_type") == "search_results" and _clicked(s) == asin]
    return opens[-1] if opens else 0


def _first_loop(replayed: ReplayedTrace) -> int:
    """The first step that is invalid or revisits an earlier page (else the last step)."""
    seen = set()
    for step in replayed.steps:
        state = step.state
        key = (state.get("page_type"), state.get("search_text"), state.get("page"),
               (state.get("product") or {}).get("asin"), str(state.get("selected_options")))
        if not step.valid or (key in seen and state.get("page_type") != "search_home"):
            return step.index
        seen.add(key)
    return max(0, len(replayed.steps) - 1)


def diagnose(replayed: ReplayedTrace, goal: Goal, engine: ShopEngine) -> Diagnosis:
    """The failure surface and earliest divergence of a failed trace (see the module docstring)."""
    trace, steps = replayed.trace, replayed.steps
    detail = trace.reward_detail or {}
    scores = ", ".join(f"{k}={detail.get(k)}" for k in ("r_type", "r_att", "r_option", "r_price"))
    if trace.termination_reason != "purchase":
        errors = replayed.protocol_error_turns
        valid = sum(step.valid for step in steps)
        if trace.termination_reason == "generation_length" or (errors and len(errors) >= valid):
            first = min(errors) if errors else trace.turns[-1].turn
            prefix = sum(step.turn < first for step in steps)
            return Diagnosis(mech.PROTOCOL_ERRORS, prefix,
                             f"{len(errors)} protocol errors vs {valid} valid actions; "
                             f"termination {trace.termination_reason}")
        return Diagnosis(mech.ACTION_LIMIT, _first_loop(replayed),
                         f"{len(steps)} actions without a purchase; termination {trace.termination_reason}")
    purchase = trace.purchase or {}
    chosen = str(purchase.get("asin"))
    if detail.get("r_type", 0) < 1 or detail.get("r_att", 0) < 1:
        searches = [s for s in steps if s.action.startswith("search[")]
        matched = [s for s in searches if goal.asin in engine.search(s.action[7:-1])]
        if not matched:
            return Diagnosis(mech.QUERY_NEVER_MATCHED, searches[0].index if searches else 0,
                             f"gold absent from the results of {len(searches)} queries; {scores}")
        shown = {p["asin"] for state in replayed.states for p in state.get("products") or []}
        if goal.asin not in shown:
            query = matched[-1].action[7:-1]
            last = [s.index for s in steps if s.state.get("page_type") == "search_results"
                    and s.state.get("search_text") == " ".join(query.split())]
            return Diagnosis(mech.STOPPED_AT_PAGE_ONE, last[-1] if last else matched[-1].index + 1,
                             f"gold ranked {engine.search(query).index(goal.asin) + 1} for a query whose "
                             f"visited pages ended earlier; {scores}")
        surface = mech.WRONG_TYPE if detail.get("r_type", 0) < 1 else mech.MISSING_ATTRIBUTE
        return Diagnosis(surface, _opening_step(replayed, chosen),
                         f"gold was shown but another product was bought; {scores}")
    if detail.get("r_option", 0) < 1:
        gold_options = {o.casefold() for o in goal.goal_options}
        opened = _opening_step(replayed, chosen)
        wrong = [s.index for s in steps[opened:] if s.state.get("page_type") == "product_detail"
                 and "=" in (_clicked(s) or "") and _clicked(s).split("=", 1)[1].casefold() not in gold_options]
        return Diagnosis(mech.WRONG_OPTION, wrong[0] if wrong else opened,
                         f"chosen options {purchase.get('options')} vs gold {list(goal.goal_options)}; {scores}")
    surface = mech.OVER_BUDGET if detail.get("price_verifiable") else mech.UNVERIFIABLE_PRICE
    return Diagnosis(surface, max(0, len(steps) - 1),
                     f"price {purchase.get('price')} vs budget {goal.price_upper} "
                     f"(verifiable={detail.get('price_verifiable')}); {scores}")


def _repair_action(mechanism: str, task: Task, state: dict[str, Any], replaced: str | None) -> str | None:
    """The public minimal repair on ``state``; ``None`` when the mechanism cannot apply there."""
    page, actions = state.get("page_type"), state.get("actions") or []
    prefs = persona_preferences(task.user_persona)
    if mechanism == "query_formulation" and page == "search_home":
        extra = [prefs[k] for k in ("brand", "material") if prefs.get(k)]
        query = " ".join([instruction_core(task.instruction_simple), *extra])  # the search ignores prices
        if replaced == f"search[{query}]":
            query = " ".join([query, *(prefs[k] for k in PERSONA_OPTION_KEYS if prefs.get(k))])
        return f"search[{query}]" if extra and replaced != f"search[{query}]" else None
    if mechanism == "paging" and page == "search_results" and NEXT_PAGE in actions:
        return f"click[{NEXT_PAGE}]"
    if mechanism == "candidate_inspection" and page == "search_results":
        words, skipped = required_words(task), (replaced or "")[6:-1]
        fits = [p["asin"] for p in state.get("products") or [] if p["asin"] != skipped and plausible(p, words)]
        if fits:
            return f"click[{fits[0]}]"
        return f"click[{NEXT_PAGE}]" if NEXT_PAGE in actions else None
    if mechanism == "option_selection" and page == "product_detail":
        wanted = {k: prefs[k].casefold() for k in PERSONA_OPTION_KEYS if prefs.get(k)}
        selected = state.get("selected_options") or {}
        for axis, values in (state.get("available_options") or {}).items():
            target = wanted.get(axis.casefold())
            match = [v for v in values if target and v.casefold() == target]
            if match and selected.get(axis) != match[0]:
                return f"click[{axis}={match[0]}]"
        return None
    if mechanism == "budget_check" and page == "product_detail":
        fixed = {k for k in PERSONA_OPTION_KEYS if prefs.get(k)}
        selected = state.get("selected_options") or {}
        for axis, values in (state.get("available_options") or {}).items():
            if axis.casefold() in fixed:
                continue
            for value in values:
                if selected.get(axis) != value and f"{axis}={value}" in actions:
                    return f"click[{axis}={value}]"
        return f"click[{PREV_PAGE}]"
    return None


def repair_plans(diagnosis: Diagnosis, replayed: ReplayedTrace, task: Task) -> list[RepairPlan]:
    """The counterfactuals to try for ``diagnosis`` (at most :data:`MAX_PLANS`)."""
    plans = []
    for mechanism in mech.SURFACE_MECHANISMS[diagnosis.surface]:
        prefix = diagnosis.divergence
        if mechanism == "query_formulation":
            searches = [s.index for s in replayed.steps if s.action.startswith("search[")]
            prefix = searches[0] if searches else 0
        elif mechanism == "candidate_inspection" and diagnosis.surface in (
                mech.WRONG_OPTION, mech.OVER_BUDGET, mech.UNVERIFIABLE_PRICE):
            chosen = str((replayed.trace.purchase or {}).get("asin"))
            prefix = _opening_step(replayed, chosen)
        replaced = replayed.steps[prefix].action if prefix < len(replayed.steps) else None
        if mechanism in ("action_budget", "tool_protocol"):
            plans.append(RepairPlan(mechanism, prefix, None, replaced))
            continue
        action = _repair_action(mechanism, task, _state_at(replayed, prefix), replaced)
        if action is not None:
            plans.append(RepairPlan(mechanism, prefix, action, replaced))
    return plans[:MAX_PLANS]


def run_counterfactual(audit: LiveAudit, replayed: ReplayedTrace, plan: RepairPlan, task: Task) -> bool:
    """One trial: replay the prefix, apply the repair, continue with the full expert; ``True`` on success."""
    expert = ScriptedExpert(Competences(), max_actions=audit.session.engine.config.max_actions)
    start = audit.trial_index
    for step in replayed.steps[:plan.prefix]:
        expert.act(task, audit.state)
        audit.step(step.action)
        if audit.trial_index > start:
            return audit.trials[-1].success
    own = expert.act(task, audit.state)
    audit.step(plan.action or own)
    while audit.trial_index == start:
        audit.step(expert.act(task, audit.state))
    return audit.trials[-1].success


class RuleAnalyst:
    """The deterministic, offline analyst (``--analyst rule``).

    Parameters
    ----------
    engine : the store engine the retries were played in.
    stage : ``"online"`` (REWRITE allowed) or ``"cold_start"``.
    house_codes : the store's house codes (the reader testbed): a colour repair is proposed as the rule for the
        profile's code (:func:`~intraskill.trace2skill.mechanisms.decode_mechanism`).
    """

    name = "rule"

    def __init__(self, engine: ShopEngine, stage: str = STAGE_ONLINE, house_codes: HouseCodes | None = None) -> None:
        self.engine = engine
        self.stage = stage
        self.house_codes = house_codes

    def analyze(self, item: AnalysisItem, current_bank: SkillBank) -> FailureCard:
        """Diagnose, validate repairs live, and return the screened, downgraded card."""
        replayed = replay_trace(self.engine, item.trace)
        goal = self.engine.active_goal(item.task_id)
        task = goal.public_task()
        diagnosis = diagnose(replayed, goal, self.engine)
        plans = repair_plans(diagnosis, replayed, task)
        audit = LiveAudit(self.engine, item.task_id, item.card_id)
        winner = None
        for plan in plans:
            if run_counterfactual(audit, replayed, plan, task):
                winner = plan
                break
        chosen = winner or (plans[0] if plans else None)
        active = current_bank.enabled_skills()
        mechanism = self._decoded(chosen, task) or mech.MECHANISMS[
            chosen.mechanism if chosen else mech.SURFACE_MECHANISMS[diagnosis.surface][0]]
        status, target, content = _proposal(mechanism, active)
        audit_fields = PrivilegedAudit(
            gold_asin=goal.asin, chosen_asin=str((item.trace.purchase or {}).get("asin") or ""),
            failure_surface=diagnosis.surface,
            earliest_divergence=_divergence_text(replayed, diagnosis.divergence),
            oracle_comparison=diagnosis.evidence,
            replay_evidence=f"replayed {len(replayed.steps)} trace actions; "
                            f"{len(replayed.protocol_error_turns)} protocol-error turns",
            minimal_repair=_plan_text(chosen),
            repair_validation_result=_validation_text(audit, winner, status, content, target))
        abstraction = DeployableAbstraction(
            failure_mechanism=mechanism.key, applicable_when=mechanism.chunk.applicable_when,
            observable_trigger=mechanism.observable_trigger,
            corrective_procedure="; ".join(mechanism.chunk.procedure),
            verification_step=mechanism.chunk.verification,
            target_chunk_id=target.skill_id if target else None, proposed_content=content)
        card = FailureCard(item.card_id, status, audit_fields, abstraction)
        return finalize_card(card, audit, gold_lookup(replayed), [s.skill_id for s in active], self.stage)


    def _decoded(self, plan: RepairPlan | None, task: Task) -> mech.Mechanism | None:
        """With house codes, a repair that clicks the profile's colour becomes the rule for its code."""
        colour = str(persona_preferences(task.user_persona).get(CODED_KEY, "")).casefold()
        if (self.house_codes is None or plan is None or plan.mechanism != "option_selection"
                or plan.action != f"click[{CODED_KEY}={colour}]" or colour not in STORE_COLOURS):
            return None
        return mech.decode_mechanism(self.house_codes.table(0)[colour], colour)


def _proposal(mechanism: mech.Mechanism, active: Sequence[Skill]) -> tuple[CardStatus, Skill | None, str]:
    """ADD, or REWRITE of the tagged chunk; NO_PROPOSAL when the chunk already says exactly this."""
    target = mech.target_chunk(mechanism, active)
    if target is None:
        return CardStatus.PROPOSE_ADD, None, mechanism.content
    content = render_chunk(mech.rewrite_chunk(mechanism, target))
    if content.strip() == target.content.strip():
        return CardStatus.NO_PROPOSAL, target, content
    return CardStatus.PROPOSE_REWRITE, target, content


def _divergence_text(replayed: ReplayedTrace, prefix: int) -> str:
    if prefix >= len(replayed.steps):
        return f"after step {prefix}: the episode ended without a valid next action"
    step = replayed.steps[prefix]
    return f"step {prefix} (turn {step.turn}) on {step.state.get('page_type')}: {step.action}"


def _plan_text(plan: RepairPlan | None) -> str:
    if plan is None:
        return "no public repair applies at the divergence"
    action = plan.action or "the scripted expert's own action"
    return (f"{plan.mechanism}: keep {plan.prefix} trace actions, replace {plan.replaced or 'nothing'} "
            f"with {action}, then continue with the public scripted policy")


def _validation_text(audit: LiveAudit, winner: RepairPlan | None, status: CardStatus, content: str,
                     target: Skill | None) -> str:
    trials = "; ".join(f"trial {i}: {t.termination} reward={t.reward:.3f} success={t.success}"
                       for i, t in enumerate(audit.trials)) or "no trial"
    verdict = f"validated by {winner.mechanism}" if winner else "no successful counterfactual"
    if status is CardStatus.NO_PROPOSAL and target is not None:
        verdict += f"; active chunk {target.skill_id} already states this repair"
    return f"{verdict} ({trials})"
