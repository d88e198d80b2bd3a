"""How the agent sees the store: the ``standard`` view or the organism's ``compact`` one.

``standard`` is the reference conversation: the store's ``shopping-observation-v7`` page text, the
whole persona document, and every skill chunk in full (docs/store.md §4.2, method §1.6).

``compact`` is a testbed view for the CPU organism (``organism-feasibility.md``: a 3 M-parameter
model learns copies in minutes only from short contexts). It is rendered by the agent from the same
public ``observation_state``, so the store, its rewards and its action space are unchanged:

- a page is a few lines: one ``rank. ASIN | title | price`` row per result, and a result is clicked
  by its rank (``click`` value ``"3"``; the runtime steps the store with that result's ASIN, so
  traces keep store actions); the product's row, then
  one ``axis: status | value / value / …`` line per option axis, then what is still to select;
  the last action only when it was invalid (the clickable values are the turn's ``click`` enum);
- the base prompt is one sentence (the tool rules come with the tools);
- the persona keeps only its ``preferences`` (the same JSON line, so the profile parses alike);
- each skill chunk is reduced to its ``### title`` line inside the usual ``<skill …>`` wrapper.

``compact_hints`` is ``compact`` with one more line at the end of every page, ``Hints: title; title``,
naming the chunks in context (none when bare).

``reader`` is ``compact`` with every skill chunk shown in full: the reader testbed's chunks are instructions whose
content (not their title) carries what the shopper needs (``docs/testbed.md``); its persona's colour is a house
code (:mod:`intraskill.shop.house_codes`, applied by the runtime). It is an experiment of the testbed: the 2-layer
organism conditions on a title only in its first reply (``benchmarks/probe_title_sensitivity.py``),
and the reminder puts every chunk next to each decision (README, Known limits).

A run's view is part of its runtime settings, hence of every trace's provenance and plan fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from intraskill.shop.observation import PAGE_LABELS, validate_state
from intraskill.skills.bank import Skill

VIEWS = ("standard", "compact", "compact_hints", "reader")
COMPACT_VIEW_VERSION = "intraskill-compact-view-v1"
FIELD_SEP = " | "
HINT_LABELS = {"en": "Hints", "zh": "提示"}


def check_view(view: str) -> None:
    """Raise ``ValueError`` naming the field unless ``view`` is a known view."""
    if view not in VIEWS:
        raise ValueError(f"view: expected one of {VIEWS}, got {view!r}")


def _row(product: Mapping[str, Any], price: Any = None) -> str:
    price = product.get("price") if price is None else price
    return FIELD_SEP.join(str(part) for part in (product.get("asin", ""), product.get("title", ""), price))


def render_compact(state: Mapping[str, Any], language: str = "en", hints: Sequence[str] = ()) -> str:
    """The compact text of a public page state (validated like the standard rendering), ending with
    the ``hints`` line when there are chunk titles to remind."""
    validate_state(state)
    labels = PAGE_LABELS[language]
    sep, page_type = labels["sep"], state["page_type"]
    if page_type == "terminal":
        return labels["terminal"]
    lines = [f"{labels['page']}{sep}{labels[page_type]}"]
    if page_type == "search_results":
        if not state["products"]:
            lines.append(f"{labels['products']}{sep}{labels['no_results']}")
        lines += [f"{product['rank']}. {_row(product)}" for product in state["products"]]
    elif page_type == "product_detail":
        lines.append(_row(state["product"], state.get("selected_price")))
        selected = state["selected_options"]
        for axis, values in state["available_options"].items():
            status = labels["selected"].format(value=selected[axis]) if axis in selected else labels["unselected"]
            lines.append(f"{axis}{sep}{status}{FIELD_SEP}{' / '.join(map(str, values))}")
        missing = state["missing_option_axes"]
        lines.append(f"{labels['missing']}{sep}{labels['axis_sep'].join(missing)}" if missing
                     else labels["complete"])
    last = state["last_action"]
    if not last.get("valid", True):
        lines.append(f"{labels['last_action']}{sep}{labels['invalid']}")
        lines.append(f"{labels['reason']}{sep}{last.get('reason', 'invalid')}")
    if hints:
        lines.append(hints_line(hints, language))
    return "\n".join(lines)


def hints_line(hints: Sequence[str], language: str = "en") -> str:
    """The compact page's last line naming the chunk titles ``hints`` (``""`` without any)."""
    if not hints:
        return ""
    labels = PAGE_LABELS[language]
    return f"{HINT_LABELS[language]}{labels['sep']}{labels['list_sep'].join(hints)}"


def page_text(payload: Mapping[str, Any], view: str, language: str = "en", hints: Sequence[str] = ()) -> str:
    """The page text of a reset/step payload in ``view`` (the store's own text for ``standard``;
    ``hints`` are :func:`view_hints`)."""
    check_view(view)
    if view == "standard":
        return payload["observation"]
    return render_compact(payload["observation_state"], language, hints)


def view_actions(state: Mapping[str, Any], view: str) -> tuple[Mapping[str, Any], dict[str, str]]:
    """``(state as offered to the agent, click value → store value)``.

    In the compact view a results page offers each product by its rank instead of its ASIN; every
    other page, and the standard view, are unchanged (no aliases).
    """
    check_view(view)
    if view == "standard" or state.get("page_type") != "search_results":
        return state, {}
    aliases = {str(product["rank"]): product["asin"] for product in state["products"]}
    ranks = {asin: rank for rank, asin in aliases.items()}
    return {**state, "actions": [ranks.get(action, action) for action in state["actions"]]}, aliases


def store_action(action: str, aliases: Mapping[str, str]) -> str:
    """The store's action for the agent's canonical ``action`` (a ``click`` on an alias is resolved)."""
    if action.startswith("click[") and action.endswith("]") and action[6:-1] in aliases:
        return f"click[{aliases[action[6:-1]]}]"
    return action


def view_persona(persona: Mapping[str, Any], view: str) -> Mapping[str, Any]:
    """The persona the agent is shown: all of it, or only ``preferences`` in the compact view."""
    check_view(view)
    if view == "standard" or "preferences" not in persona:
        return persona
    return {"preferences": persona["preferences"]}


def _title(skill: Skill) -> str:
    return skill.content.strip().split("\n", 1)[0]


def view_hints(skills: Sequence[Skill], view: str) -> tuple[str, ...]:
    """The chunk titles a ``compact_hints`` page ends with (``### `` and line breaks dropped); none in
    the other views."""
    check_view(view)
    if view != "compact_hints":
        return ()
    return tuple(" ".join(_title(skill).lstrip("#").split()) for skill in skills)


def view_skills(skills: Sequence[Skill], view: str) -> list[Skill]:
    """The chunks as shown: unchanged (``standard``, ``reader``), or cut to their first (``### title``) line when
    compact."""
    check_view(view)
    if view in ("standard", "reader"):
        return list(skills)
    return [Skill(skill.skill_id, _title(skill), version=skill.version) for skill in skills]
