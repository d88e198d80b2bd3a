"""Failure surfaces, repair mechanisms, their deployable chunk templates, and chunk targeting.

A *failure surface* is what went wrong with the outcome (privileged: read off the gold); a *mechanism*
is the public behaviour whose repair fixed it (deployable). The rule analyst maps surfaces to
candidate mechanisms; each mechanism has a generic chunk template (rendered with
:func:`~intraskill.skills.render.render_chunk`) that names no product, brand, ID or gold option.

With the store's house codes (the reader testbed) a repair that picks the profile's colour is deployed as
:func:`decode_mechanism`'s rule instead: the policy sees only the code.

REWRITE vs ADD: an active chunk *targets* a mechanism when its ``metadata.mechanism`` or
``metadata.competence`` equals the mechanism's key or its scripted-expert competence name (the
organism's S₀ bank tags each chunk this way). A proposal for a targeted mechanism is a REWRITE of
that chunk, otherwise an ADD.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from intraskill.shop.house_codes import RULE_TEMPLATE
from intraskill.skills.bank import Skill
from intraskill.skills.render import Chunk, parse_chunk, render_chunk

# --- failure surfaces (privileged audit) ---------------------------------------------------------
WRONG_TYPE = "wrong_type"
MISSING_ATTRIBUTE = "missing_attribute"
WRONG_OPTION = "wrong_option"
OVER_BUDGET = "over_budget"
UNVERIFIABLE_PRICE = "unverifiable_price"
ACTION_LIMIT = "action_limit"
PROTOCOL_ERRORS = "protocol_errors"
QUERY_NEVER_MATCHED = "query_never_matched"
STOPPED_AT_PAGE_ONE = "stopped_at_page_one"
SURFACES = (WRONG_TYPE, MISSING_ATTRIBUTE, WRONG_OPTION, OVER_BUDGET, UNVERIFIABLE_PRICE, ACTION_LIMIT,
            PROTOCOL_ERRORS, QUERY_NEVER_MATCHED, STOPPED_AT_PAGE_ONE)


@dataclass(frozen=True)
class Mechanism:
    """A deployable repair: its key, the expert competence it corresponds to, and its chunk."""

    key: str
    competence: str | None
    workflow_stage: str
    observable_trigger: str
    chunk: Chunk

    @property
    def content(self) -> str:
        """The ADD chunk's Markdown."""
        return render_chunk(self.chunk)


def _mechanism(key: str, competence: str | None, stage: str, trigger: str, title: str, when: str,
               steps: tuple[str, ...], verify: str, avoid: str) -> Mechanism:
    return Mechanism(key, competence, stage, trigger, Chunk(title, when, steps, verify, avoid))


MECHANISMS: dict[str, Mechanism] = {m.key: m for m in (
    _mechanism(
        "query_formulation", "read_persona", "query formulation",
        "the results list shows no product that carries the profile's preferred brand or material",
        "Put profile preferences into the first query",
        "the user profile names a preferred brand or material",
        ("Start the query with the task's product words",
         "Append the profile's preferred brand and material words to the same query",
         "Leave budget phrases out of the query"),
        "the first results page lists products whose title or brand carries those words",
        "searching with the task words alone and settling for the first product type that matches"),
    _mechanism(
        "paging", "page_on", "candidate inspection and comparison",
        "no product on the current results page carries every required word and a next page exists",
        "Page on before settling",
        "a results page shows no product that carries every required word",
        ("Check each listed title, brand and key attributes against the task and profile words",
         "If none carries all of them and the page offers the next page, open the next page",
         "Only after a few pages without a match, go back and refine the query"),
        "the opened product's title, brand or attributes carry every required word",
        "opening a partial match from the first page while better matches sit on later pages"),
    _mechanism(
        "candidate_inspection", "inspect_candidates", "candidate inspection and comparison",
        "the opened product lacks a required word or does not offer the profile's colour or size",
        "Inspect a product before committing",
        "a product page is open",
        ("Compare the title, brand and key attributes with every task and profile word",
         "Check that each option axis offers the profile's colour and size",
         "If anything is missing, go back to the results and open the next plausible product"),
        "every required word appears and every needed option value is offered",
        "buying the first product whose type looks right without checking brand, material or options"),
    _mechanism(
        "option_selection", "choose_options", "variant and price verification",
        "an option axis is still unselected or holds a value other than the profile's colour or size",
        "Select the profile's option values",
        "a product page lists option axes such as colour or size",
        ("For each axis, find the value that equals the profile's preferred colour or size",
         "Click that value instead of the first listed one",
         "Only on axes the profile does not mention, pick a value that fits the task"),
        "the page shows every axis selected with the profile's values before buying",
        "accepting the first listed option value"),
    _mechanism(
        "budget_check", "check_budget", "variant and price verification",
        "the selected price shown on the product page exceeds the task's budget",
        "Verify the selected price against the budget",
        "the task states a budget and all options are selected",
        ("Read the selected price shown after the options are chosen",
         "If it exceeds the budget, try another value on an axis the profile does not fix",
         "If no variant fits, go back and open the next plausible product"),
        "the shown selected price is within the budget when buying",
        "buying on the listing price range without checking the price of the chosen variant"),
    _mechanism(
        "action_budget", None, "backtracking and purchase termination",
        "many actions are used while the same pages repeat and no product has been bought",
        "Keep actions in reserve to finish",
        "several actions have passed without an open plausible product",
        ("Avoid revisiting pages and queries already seen",
         "Once a plausible product is open, complete its options and buy",
         "Keep at least four actions to open, select and buy"),
        "a purchase is made before the action limit",
        "looping between the same pages until the episode runs out"),
    _mechanism(
        "tool_protocol", None, "backtracking and purchase termination",
        "the last turn was answered with a tool protocol error",
        "Answer with exactly one valid tool call",
        "every turn",
        ("Call exactly one tool per turn and write no other text",
         "Use search only on the search page and copy click values verbatim from the listed options"),
        "the page reports the last action as executed",
        "free text, several calls or values that are not among the listed options"),
)}

SURFACE_MECHANISMS: dict[str, tuple[str, ...]] = {
    QUERY_NEVER_MATCHED: ("query_formulation",),
    STOPPED_AT_PAGE_ONE: ("paging", "query_formulation"),
    WRONG_TYPE: ("candidate_inspection", "query_formulation"),
    MISSING_ATTRIBUTE: ("candidate_inspection", "query_formulation"),
    WRONG_OPTION: ("option_selection", "candidate_inspection"),
    OVER_BUDGET: ("budget_check", "candidate_inspection"),
    UNVERIFIABLE_PRICE: ("budget_check", "candidate_inspection"),
    ACTION_LIMIT: ("action_budget",),
    PROTOCOL_ERRORS: ("tool_protocol",),
}
"""Mechanisms to try for each surface, most specific first."""


DECODE_OPTION = "decode_option"
"""The reader testbed's repair (``docs/testbed.md``): the profile's colour is a house code, and the chunk states
the store's rule for it; its key is ``decode_option:<code>``, so each code's rule is its own candidate."""


def decode_mechanism(code: str, colour: str) -> Mechanism:
    """The chunk that states the house-code rule ``code`` → ``colour`` (a convention of the store, true for every
    profile with that code)."""
    return _mechanism(
        f"{DECODE_OPTION}:{code}", None, "variant and price verification",
        f"the profile color is the house code {code} and the color axis is unselected",
        f"House code {code}", f"the profile color is {code}", (RULE_TEMPLATE.format(code=code, value=colour),),
        "the color axis shows the color the rule names", "the first listed color")


def target_chunk(mechanism: Mechanism, active: Sequence[Skill]) -> Skill | None:
    """The first active chunk tagged with ``mechanism`` (key or competence), or ``None``."""
    names = {mechanism.key} | ({mechanism.competence} if mechanism.competence else set())
    for skill in active:
        tags = {skill.metadata.get("mechanism"), skill.metadata.get("competence")}
        if tags & names:
            return skill
    return None


def rewrite_chunk(mechanism: Mechanism, target: Skill) -> Chunk:
    """The REWRITE version of ``target``: its title kept, the mechanism's concrete trigger, procedure,
    verification and pitfall in place of the old text."""
    try:
        title = parse_chunk(target.content).title
    except ValueError:
        title = mechanism.chunk.title
    return Chunk(title, mechanism.observable_trigger, mechanism.chunk.procedure,
                 mechanism.chunk.verification, mechanism.chunk.common_failure)
