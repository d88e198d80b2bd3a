"""The purchase reward (``shopsimulator-paper-reward-v2``, ``docs/store.md`` §5).

Pure functions of (purchased product, selected options, private goal). With N_att target
attributes, N_opt target option values and M_att, M_opt of them matched:

- ``r_loose  = r_type · (M_att + M_opt + r_price) / (N_att + N_opt + 1)``
- ``r_strict = r_type · r_att · r_option · r_price`` (the scalar ``reward``)
- ``r_success = 1`` when all four components equal 1.

``target_asin_match`` is diagnostic only: a non-gold product meeting every requirement succeeds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from intraskill.shop.price import PRICE_RESOLUTION_VERSION, UNVERIFIABLE, PriceResolution, resolve_price
from intraskill.shop.text import fuzzy_match, title_terms
from intraskill.shop.types import Goal, Product

REWARD_VERSION = "shopsimulator-paper-reward-v2"
CATEGORY_MATCH_MIN_SHARED_NODES = 2
"""Two category paths match when they share at least this many nodes (compared as sets)."""
NEUTRAL_TITLE_SCORE = 0.2
"""``title_score`` when the gold title yields no terms; also the threshold above which R_type is 1."""
LOW_TITLE_SCORE = 0.1
"""Below this (and above 0) R_type is 0.1; between this and the neutral score it is 0.5."""
TERMINATION_REASONS = ("purchase", "action_limit", "generation_length")
_CATEGORY_SPLIT_RE = re.compile(r"[›>/\\]")
PRIMARY_REWARD = "reward"
"""The name of the primary scalar in a reward's JSON form (it equals :data:`PRIMARY_REWARD_COMPONENT`)."""
PRIMARY_REWARD_COMPONENT = "r_strict"
"""The reward component the primary scalar equals (the shop service's ``/healthz`` names it)."""


class RewardError(ValueError):
    """A reward that cannot be trusted (the episode is unscored)."""


def _finite(name: str, value: object) -> float:
    """``value`` as a float when it is a finite number (not a bool), else :class:`RewardError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RewardError(f"{name}: must be a finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Reward:
    """The validated score of one finished episode: every ``r_*`` component of its detail.

    Values are finite floats and ``r_success`` ∈ {0, 1}. The JSON form (:meth:`to_dict`) is the trace's
    reward dict: the primary ``reward`` (= ``r_strict``) first, then the components in detail order.
    """

    r_type: float
    r_att: float
    r_option: float
    r_price: float
    r_loose: float
    r_strict: float
    r_success: float

    def __post_init__(self) -> None:
        for name in self.components():
            object.__setattr__(self, name, _finite(name, getattr(self, name)))
        if self.r_success not in (0.0, 1.0):
            raise RewardError(f"r_success: must be 0 or 1, got {self.r_success}")

    @classmethod
    def components(cls) -> tuple[str, ...]:
        """The ``r_*`` names, in detail order."""
        return tuple(f.name for f in fields(cls))

    @property
    def reward(self) -> float:
        """The primary scalar: ``r_strict``."""
        return self.r_strict

    @property
    def success(self) -> bool:
        """``r_success == 1``."""
        return self.r_success == 1.0

    def metric(self, name: str) -> float:
        """The value of ``reward`` or of an ``r_*`` component, by name."""
        if name != PRIMARY_REWARD and name not in self.components():
            raise KeyError(f"no reward metric {name!r}; expected {PRIMARY_REWARD!r} or one of {self.components()}")
        return float(getattr(self, name))

    def to_dict(self) -> dict[str, float]:
        """The JSON form: ``{"reward", "r_type", …, "r_success"}``."""
        return {PRIMARY_REWARD: self.reward, **{name: getattr(self, name) for name in self.components()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Reward":
        """Parse the JSON form (or a terminal's ``reward`` plus its detail's ``r_*``); checks ``reward == r_strict``."""
        missing = [name for name in (PRIMARY_REWARD, *cls.components()) if name not in data]
        if missing:
            raise RewardError(f"{missing[0]}: missing")
        reward = cls(**{name: data[name] for name in cls.components()})
        primary = _finite(PRIMARY_REWARD, data[PRIMARY_REWARD])
        if primary != reward.r_strict:
            raise RewardError(f"reward: {primary} differs from r_strict {reward.r_strict}")
        return reward


def parse_reward(data: Mapping[str, Any] | None) -> Reward | None:
    """The :class:`Reward` of a JSON reward dict, or ``None`` for an unscored episode (``None``)."""
    return Reward.from_dict(data) if data is not None else None


@dataclass(frozen=True)
class RewardDetail:
    """Every reward component of one episode, with the keys of the reference ``reward_detail``."""

    termination_reason: str
    r_type: float
    category_match: bool
    title_score: float
    num_attr_matches: int
    num_option_matches: int
    r_att: float
    r_option: float
    r_price: float
    r_loose: float
    r_strict: float
    r_success: float
    target_asin_match: bool
    price_verifiable: bool
    price_upper: float | None
    price_resolution: PriceResolution
    reward_version: str = field(default=REWARD_VERSION)

    @property
    def reward(self) -> float:
        """The primary scalar: ``r_strict``."""
        return self.r_strict

    def to_dict(self) -> dict[str, Any]:
        """The reference ``reward_detail`` object (key order as documented)."""
        return {
            "reward_version": self.reward_version,
            "termination_reason": self.termination_reason,
            "r_type": self.r_type,
            "category_match": self.category_match,
            "title_score": self.title_score,
            "num_attr_matches": self.num_attr_matches,
            "num_option_matches": self.num_option_matches,
            "r_att": self.r_att,
            "r_option": self.r_option,
            "r_price": self.r_price,
            "r_loose": self.r_loose,
            "r_strict": self.r_strict,
            "r_success": self.r_success,
            "target_asin_match": self.target_asin_match,
            "price_verifiable": self.price_verifiable,
            "price_upper": self.price_upper,
            "price_resolution": self.price_resolution.to_dict(),
        }


def category_nodes(path: str) -> frozenset[str]:
    """Casefolded nodes of a category path split on ``› > / \\``."""
    return frozenset(part.strip().casefold() for part in _CATEGORY_SPLIT_RE.split(path or "") if part.strip())


def type_reward(product: Product, goal: Goal) -> tuple[float, bool, float]:
    """R_type ∈ {0, 0.1, 0.5, 1} with ``category_match`` and ``title_score`` (§5.1).

    1.0 if the category paths share ≥ 2 nodes or ``title_score`` > 0.2; else 0 if the score is 0,
    0.1 if it is below 0.1, and 0.5 otherwise. ``title_score`` is the share of gold-title terms
    found in the purchased title, or 0.2 (neutral) when the gold title has no terms.
    """
    shared = category_nodes(product.category) & category_nodes(goal.category)
    category_match = len(shared) >= CATEGORY_MATCH_MIN_SHARED_NODES
    gold_terms = title_terms(goal.name)
    if gold_terms:
        title_score = len(title_terms(product.title) & gold_terms) / len(gold_terms)
    else:
        title_score = NEUTRAL_TITLE_SCORE
    if category_match or title_score > NEUTRAL_TITLE_SCORE:
        r_type = 1.0
    elif title_score == 0:
        r_type = 0.0
    elif title_score < LOW_TITLE_SCORE:
        r_type = 0.1
    else:
        r_type = 0.5
    return r_type, category_match, title_score


def attribute_matches(product: Product, attributes: tuple[str, ...] | list[str]) -> int:
    """Target attributes found in the product (§5.2): a fuzzy match > 85 with some product attribute
    string, or the casefolded target as a substring of title + bullet points + description."""
    text = " ".join((product.title, product.bullets, product.description)).casefold()
    return sum(
        1
        for target in attributes
        if any(fuzzy_match(target, attr) for attr in product.attributes) or str(target).casefold() in text
    )


def option_matches(selected_options: Mapping[str, str], goal_options: tuple[str, ...] | list[str]) -> int:
    """Target option values matched by some selected value (> 85 fuzzy); axis names are ignored (§5.3)."""
    values = list(selected_options.values())
    return sum(1 for target in goal_options if any(fuzzy_match(target, value) for value in values))


def price_reward(resolution: PriceResolution, price_upper: float | None) -> float:
    """R_price (binary, §5.4): 1 without a budget; else 1 only for a verified price ≤ the budget."""
    if price_upper is None:
        return 1.0
    return 1.0 if resolution.verified and resolution.price is not None and resolution.price <= price_upper else 0.0


def score_purchase(
    product: Product,
    selected_options: Mapping[str, str],
    price_resolution: PriceResolution | None,
    goal: Goal,
) -> RewardDetail:
    """Score buying ``product`` with ``selected_options`` against the private ``goal``.

    ``price_resolution`` is the resolution shown on the product page at purchase; ``None``
    resolves it here (the result is the same, since resolution is pure).
    """
    resolution = price_resolution if price_resolution is not None else resolve_price(product, selected_options)
    r_type, category_match, title_score = type_reward(product, goal)
    n_att, n_opt = len(goal.attributes), len(goal.goal_options)
    m_att = attribute_matches(product, goal.attributes)
    m_opt = option_matches(selected_options, goal.goal_options)
    r_att = m_att / n_att if n_att else 1.0
    r_option = m_opt / n_opt if n_opt else 1.0
    r_price = price_reward(resolution, goal.price_upper)
    r_strict = r_type * r_att * r_option * r_price
    return RewardDetail(
        termination_reason="purchase",
        r_type=r_type,
        category_match=category_match,
        title_score=title_score,
        num_attr_matches=m_att,
        num_option_matches=m_opt,
        r_att=r_att,
        r_option=r_option,
        r_price=r_price,
        r_loose=r_type * (m_att + m_opt + r_price) / (n_att + n_opt + 1),
        r_strict=r_strict,
        r_success=1.0 if (r_type, r_att, r_option, r_price) == (1.0, 1.0, 1.0, 1.0) else 0.0,
        target_asin_match=product.asin == goal.asin,
        price_verifiable=resolution.verified,
        price_upper=goal.price_upper,
        price_resolution=resolution,
    )


def zero_detail(termination_reason: str) -> RewardDetail:
    """The detail of a terminal without a purchase: every component 0 or false.

    ``price_upper`` is ``None`` and the price resolution is an unverifiable ``no_purchase``
    record, so the keys are the same as for a purchase.
    """
    if termination_reason not in TERMINATION_REASONS or termination_reason == "purchase":
        raise ValueError(f"termination_reason must be 'action_limit' or 'generation_length', got {termination_reason!r}")
    return RewardDetail(
        termination_reason=termination_reason, r_type=0.0, category_match=False, title_score=0.0,
        num_attr_matches=0, num_option_matches=0, r_att=0.0, r_option=0.0, r_price=0.0, r_loose=0.0,
        r_strict=0.0, r_success=0.0, target_asin_match=False, price_verifiable=False, price_upper=None,
        price_resolution=PriceResolution(UNVERIFIABLE, None, "no_purchase", {}, PRICE_RESOLUTION_VERSION),
    )
