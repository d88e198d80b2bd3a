"""Deterministic synthetic catalogue and persona tasks in the ShopSimulator raw product schema.

No real product text ships (``docs/store.md`` §2), so the store is generated from a seed. The
records have exactly the raw fields of the cleaned v2 files (asin, tag, domain labels, title,
sub_title, shop_name, category joined with '›', product_category, attribute, customization_options,
pricing, images, full_description = title, instructions, user_persona), so the one loader in
:mod:`intraskill.shop.data` reads both.

Design (chosen for a store a tiny CPU model can learn and an expert can solve):

* **One task per target product.** The target carries one instruction (``instruction_simple``,
  full ``instruction``, ``attributes``, ``instruction_options``, ``price_upper``, ids) and a persona.
* **Titles** read ``<Brand> <material> <feature1> <feature2> <type> <model code>``; the brand is the
  shop name; ``attribute`` = ``[material, feature1, feature2]``. Model codes (``bx412k``) are one
  letters-and-digits token that never equals a budget number.
* **Goal attributes** = ``[feature1, type, brand, material]``. ``instruction_simple`` states only the
  type, feature1 and the budget ("a foldable cutting board under 30 dollars"); the brand, material,
  colour and size live in the persona's ``preferences`` (fixed keys), so reading the persona matters.
  Goal options = ``[color, size]`` from the persona (``[color]`` for colour-only products).
* **Options.** Axis ``color`` (never price-affecting) and, for ~85 % of products, axis ``size`` (the
  single price-affecting axis; prices rise with size). The persona's colour and size are never the
  first listed values, so "pick the first value" fails.
* **Budgets.** ~61 % approximate ("around/about A dollars", stored ``price_upper`` = 1.1·A), ~35 % hard
  ("under/at most/no more than/within B dollars"), ~4 % none. The goal variant is within budget;
  the next larger size and the pricier twin are over it.
* **Near-miss distractors** per target (same type): a *brand* distractor (other shop, same material),
  a *material* distractor (same shop, other material), a *colour twin* (same text, the persona colour
  missing from its options) and a *price twin* (same text, every variant over budget). Gold and
  twins have identical indexed text, so BM25 ties them and the ASIN tie-break decides their order:
  the gold has the smallest ASIN in ~80 % of tasks (:data:`GOLD_FIRST_PROBABILITY`), so "open the first
  result" is usually right and inspecting candidates still matters.
* **Uniqueness.** No product outside a gold's twin set carries the gold's query key (type, brand,
  material, feature1), so the query "instruction_simple + persona brand + persona material" ranks
  the gold's twin set first.
* **Groups for the split.** ~8 % of tasks come from returning users (a shared ``user_id``) and one
  power user owns more than 20 tasks, so the group-disjoint split has linked groups to respect.
* **Task ids** are the gold's index in the (shuffled) product list, as in the reference, where
  ``task_id`` equals the raw ``source_product_index``; distractors carry an empty ``instructions`` list.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from intraskill.hashing import canonical_json, seed32, sha256_text
from intraskill.params import STORE_SEED
from intraskill.shop import vocab
from intraskill.shop.types import APPROXIMATE_BUDGET_FACTOR, CATEGORY_SEPARATOR

GENERATOR_VERSION = "intraskill-synth-v1"
GOLD_FIRST_PROBABILITY = 0.80
"""Probability that the gold has the smallest ASIN of its twin set (so it ranks first among them)."""
SIZE_AXIS_PROBABILITY = 0.85
RETURNING_USER_PROBABILITY = 0.08
BUDGET_KIND_WEIGHTS = {"approximate_upper": 0.61, "hard_upper": 0.35, "no_budget": 0.04}
"""Mix of budget kinds, after the reference annotation counts (2752 / 1578 / 123 of 4526, §2)."""
DOMAIN_WEIGHTS = {"appliances": 534, "beauty": 695, "clothing": 639, "food": 289, "home": 756,
                  "kids": 196, "leisure": 593, "sports": 293, "supplies": 671}
"""Raw persona product counts per domain (reference §2), used as sampling weights."""
DISTRACTOR_ROLES = ("brand", "material", "color_twin", "price_twin")


@dataclass(frozen=True)
class ScaleSpec:
    """Size of a generated store: persona tasks and the held-out split sizes."""

    n_tasks: int
    val_size: int
    test_size: int
    power_user_tasks: int

    @property
    def train_size(self) -> int:
        return self.n_tasks - self.val_size - self.test_size


SCALES: dict[str, ScaleSpec] = {
    "default": ScaleSpec(n_tasks=4526, val_size=400, test_size=400, power_user_tasks=30),
    "small": ScaleSpec(n_tasks=200, val_size=40, test_size=40, power_user_tasks=21),
}
"""``default`` mirrors the reference project split (3726 / 400 / 400, five products per task ⇒ 22,630
products); ``small`` (200 tasks, 1,000 products) is for tests."""


def scale_spec(scale: str) -> ScaleSpec:
    """The :class:`ScaleSpec` named ``scale``; a clear error for unknown names."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {sorted(SCALES)}, got {scale!r}")
    return SCALES[scale]


@dataclass
class _Variant:
    """Option values and per-size prices of one product."""

    colors: list[str]
    sizes: list[str]
    prices: list[float]  # one per size, or a single price when ``sizes`` is empty


@dataclass
class _User:
    user_id: str
    registered: str
    region: dict[str, str]
    demographics: dict[str, str]
    device: str
    active_hours: str
    payment: str


def _nice_price(value: float) -> float:
    """A shelf price ending in .9 (at least 1.9)."""
    return max(1.9, math.floor(value) + 0.9)


def _entry(value: str, price: float) -> dict[str, Any]:
    """One raw ``customization_options`` entry (values are title-cased, as raw crawls often are)."""
    return {"value": value.title(), "price": price, "image": ""}


def _round_up(value: float, step: int) -> int:
    return int(math.ceil(value / step) * step)


def _budget_amount(goal_price: float, next_price: float | None, kind: str) -> tuple[int, float]:
    """Stated amount and the resulting ``price_upper``: goal price within it, the next size above it."""
    factor = APPROXIMATE_BUDGET_FACTOR if kind == "approximate_upper" else 1.0
    floor_amount = goal_price / factor
    for step in (10, 5, 1):
        amount = max(1, _round_up(floor_amount - 1e-9, step))
        upper = round(amount * factor, 2)
        if upper >= goal_price and (next_price is None or upper < next_price):
            return amount, upper
    raise ValueError(f"no budget separates {goal_price} from {next_price}")


class _Generator:
    """Stateful generation of one catalogue; all draws come from one seeded ``random.Random``."""

    def __init__(self, spec: ScaleSpec, seed: int) -> None:
        self.spec = spec
        self.seed = seed
        self.rng = random.Random(seed32(f"{GENERATOR_VERSION}:{seed}"))
        self.asins: set[str] = set()
        self.keys: set[tuple[str, str, str, str]] = set()
        self.query_keys: set[tuple[str, str, str, str]] = set()
        self.users: list[_User] = []
        self.power_user = self._new_user()

    # --- small draws -------------------------------------------------------------------------
    def _asin(self) -> str:
        while True:
            asin = str(self.rng.randrange(10**9, 10**10))
            if asin not in self.asins:
                self.asins.add(asin)
                return asin

    def _model_code(self) -> str:
        prefix = self.rng.choice(vocab.MODEL_PREFIXES)
        return f"{prefix}{self.rng.randrange(100, 1000)}{self.rng.choice('abcdefghjkmnpqrstuvwxyz')}"

    def _new_user(self) -> _User:
        province, cities = self.rng.choice(vocab.PROVINCES)
        user = _User(
            user_id=f"u{self.rng.randrange(10**6, 10**7)}",
            registered=f"20{self.rng.randrange(15, 25)}-{self.rng.randrange(1, 13):02d}",
            region={"province": province, "city": self.rng.choice(cities)},
            demographics={"gender": self.rng.choice(vocab.GENDERS),
                          "age_band": self.rng.choice(vocab.AGE_BANDS),
                          "spend_level": self.rng.choice(vocab.SPEND_LEVELS),
                          "member_level": self.rng.choice(vocab.MEMBER_LEVELS)},
            device=self.rng.choice(vocab.DEVICES), active_hours=self.rng.choice(vocab.ACTIVE_HOURS),
            payment=self.rng.choice(vocab.PAYMENT_METHODS))
        self.users.append(user)
        return user

    def _user_for(self, task_index: int) -> _User:
        if task_index < self.spec.power_user_tasks:
            return self.power_user
        if len(self.users) > 1 and self.rng.random() < RETURNING_USER_PROBABILITY:
            return self.rng.choice(self.users[1:])
        return self._new_user()

    def _claim(self, type_name: str, features: tuple[str, str], pairs: list[tuple[str, str]]) -> bool:
        """Reserve the keys of a new task's products unless they would tie with another task's gold.

        The task's query key is (type, brand, material, feature1); no other product may carry it,
        and none of the new products may carry another task's query key.
        """
        query_key = (type_name, *pairs[0], features[0])
        keys = {(type_name, brand, material, f) for brand, material in pairs for f in features}
        if query_key in self.keys or any(k in self.query_keys for k in keys):
            return False
        self.keys |= keys
        self.query_keys.add(query_key)
        return True

    def _pick(self, items: tuple[str, ...], k: int) -> tuple[str, ...]:
        """``k`` distinct items in random order (a fast ``random.sample`` for small tuples)."""
        picked: list[str] = []
        while len(picked) < k:
            item = items[int(self.rng.random() * len(items))]
            if item not in picked:
                picked.append(item)
        return tuple(picked)

    def _variant(self, subtype: vocab.ProductType, domain: vocab.Domain) -> tuple[_Variant, str, str, int]:
        """Gold options and prices, the persona colour/size and the index of the goal size."""
        colors = list(self._pick(domain.colors, self.rng.randint(3, 5)))
        if self.rng.random() < SIZE_AXIS_PROBABILITY:
            n_sizes = self.rng.randint(2, 4)
            start = self.rng.randint(0, len(domain.sizes) - n_sizes)
            sizes = list(domain.sizes[start : start + n_sizes])
            base = self.rng.uniform(subtype.price_low, subtype.price_high)
            ratio = self.rng.uniform(1.25, 1.45)
            prices = [_nice_price(base * ratio**i) for i in range(n_sizes)]
            goal_size_index = self.rng.randint(1, n_sizes - 1)
        else:
            sizes, goal_size_index = [], -1
            prices = [_nice_price(self.rng.uniform(subtype.price_low, subtype.price_high))]
        persona_color = colors[self.rng.randint(1, len(colors) - 1)]
        persona_size = sizes[goal_size_index] if sizes else self.rng.choice(domain.sizes[1:])
        return _Variant(colors, sizes, prices), persona_color, persona_size, goal_size_index

    # --- records -----------------------------------------------------------------------------
    def _product(self, *, asin: str, domain: vocab.Domain, sub: vocab.Subcategory, subtype: vocab.ProductType,
                 brand: str, material: str, features: tuple[str, str], variant: _Variant, model: str) -> dict:
        title = f"{brand} {material} {features[0]} {features[1]} {subtype.name} {model}"
        options = {"color": [_entry(c, variant.prices[0]) for c in variant.colors]}
        if variant.sizes:
            options["size"] = [_entry(s, p) for s, p in zip(variant.sizes, variant.prices)]
        low, high = min(variant.prices), max(variant.prices)
        return {
            "asin": asin,
            "tag": "eval" if self.rng.random() < 0.28 else "train",
            "domain_zh": domain.label_zh,
            "domain_en_short": domain.key,
            "domain_en_long": domain.label_long,
            "title": title,
            "sub_title": f"{features[0]} and {features[1]} {subtype.name}",
            "shop_name": brand,
            "category": CATEGORY_SEPARATOR.join((domain.key, sub.name, subtype.name)),
            "product_category": subtype.name,
            "attribute": [material, features[0], features[1]],
            "customization_options": options,
            "pricing": [low] if low == high else [low, high],
            "images": [],
            "full_description": title,
            "instructions": [],
        }

    def _persona(self, user: _User, domain: vocab.Domain, sub: vocab.Subcategory, subtype: vocab.ProductType,
                 brand: str, other_brand: str, material: str, color: str, size: str, goal_price: float,
                 budget_kind: str) -> dict:
        other_type = self.rng.choice([t for s in domain.subcategories for t in s.types if t != subtype])
        return {
            "user_id": user.user_id,
            "registered": user.registered,
            "region": dict(user.region),
            "demographics": dict(user.demographics),
            "behaviour": {
                "recent_searches": [subtype.name, f"{color} {subtype.name}", other_type.name],
                "followed_shops": sorted([brand, other_brand]),
                "device": user.device,
                "active_hours": user.active_hours,
            },
            "transactions": {
                "avg_order_value": int(round(goal_price * self.rng.uniform(0.7, 1.3))),
                "orders_90d": self.rng.randint(1, 12),
                "price_sensitive": budget_kind == "hard_upper",
                "payment": user.payment,
            },
            "preferences": {
                "category": CATEGORY_SEPARATOR.join((domain.key, sub.name)),
                "brand": brand,
                "material": material,
                "color": color,
                "size": size,
            },
        }

    def _instruction(self, *, kind: str, subtype: vocab.ProductType, brand: str, material: str,
                     features: tuple[str, str], color: str, size: str | None, goal_price: float,
                     next_price: float | None) -> dict:
        article = "an" if features[0][0] in "aeiou" else "a"
        if kind == "no_budget":
            phrase, price_upper = "", None
        else:
            amount, price_upper = _budget_amount(goal_price, next_price, kind)
            approximate = kind == "approximate_upper"
            templates = vocab.APPROX_BUDGET_PHRASES if approximate else vocab.HARD_BUDGET_PHRASES
            phrase = self.rng.choice(templates).format(amount)
        simple = " ".join(p for p in (article, features[0], subtype.name, phrase) if p)
        spec = f"in {color}" + (f", size {size}" if size else "")
        full = f"i need {article} {features[0]} {features[1]} {material} {subtype.name} from {brand}, {spec}"
        full = f"{full}, {phrase}" if phrase else full
        return {
            "instruction": full,
            "instruction_simple": simple,
            "attributes": [features[0], subtype.name, brand, material],
            "instruction_options": [color, size] if size else [color],
            "options": {"color": color, **({"size": size} if size else {})},
            "worker_id": "synthetic",
            "price_upper": price_upper,
        }

    def task_products(self, task_index: int) -> list[tuple[str, dict]]:
        """The gold record (with instruction and persona) and its four near-miss distractors."""
        domain = self.rng.choices(vocab.DOMAINS, weights=[DOMAIN_WEIGHTS[d.key] for d in vocab.DOMAINS])[0]
        brands = vocab.domain_brands(vocab.DOMAINS.index(domain))
        while True:
            sub = self.rng.choice(domain.subcategories)
            subtype = self.rng.choice(sub.types)
            brand, other_brand = self._pick(brands, 2)
            material, other_material = self._pick(sub.materials, 2)
            features = self._pick(sub.features, 2)
            pairs = [(brand, material), (other_brand, material), (brand, other_material)]
            if self._claim(subtype.name, features, pairs):
                break
        variant, color, size, k = self._variant(subtype, domain)
        goal_price = variant.prices[k] if variant.sizes else variant.prices[0]
        next_price = variant.prices[k + 1] if variant.sizes and k + 1 < len(variant.prices) else None
        kind = self.rng.choices(list(BUDGET_KIND_WEIGHTS), weights=list(BUDGET_KIND_WEIGHTS.values()))[0]
        instruction = self._instruction(kind=kind, subtype=subtype, brand=brand, material=material,
                                        features=features,
                                        color=color, size=size if variant.sizes else None,
                                        goal_price=goal_price, next_price=next_price)
        upper = instruction["price_upper"] or goal_price * 1.3
        common = dict(domain=domain, sub=sub, subtype=subtype, features=features)
        twin_asins = sorted(self._asin() for _ in range(3))
        gold_rank = 0 if self.rng.random() < GOLD_FIRST_PROBABILITY else self.rng.randint(1, 2)
        gold_asin = twin_asins.pop(gold_rank)
        self.rng.shuffle(twin_asins)
        gold = self._product(asin=gold_asin, brand=brand, material=material, variant=variant,
                             model=self._model_code(), **common)
        gold["instructions"] = [instruction]
        user = self._user_for(task_index)
        gold["user_persona"] = self._persona(user, domain, sub, subtype, brand, other_brand, material, color, size,
                                             goal_price, kind)
        rest = [c for c in domain.colors if c not in variant.colors]
        twin_colors = [c for c in variant.colors if c != color] + rest[:1]
        markup = max(1.35, upper / goal_price * 1.12)
        pricier = _Variant(list(variant.colors), list(variant.sizes),
                           [_nice_price(p * markup) for p in variant.prices])
        no_color = _Variant(twin_colors, list(variant.sizes), list(variant.prices))
        distractors = {
            "brand": self._product(asin=self._asin(), brand=other_brand, material=material, variant=variant,
                                   model=self._model_code(), **common),
            "material": self._product(asin=self._asin(), brand=brand, material=other_material,
                                      variant=variant,                                      model=self._model_code(), **common),
            "color_twin": self._product(asin=twin_asins[0], brand=brand, material=material, variant=no_color,
                                        model=self._model_code(), **common),
            "price_twin": self._product(asin=twin_asins[1], brand=brand, material=material, variant=pricier,
                                        model=self._model_code(), **common),
        }
        return [("gold", gold)] + list(distractors.items())


def generate_raw_products(scale: str = "default", seed: int = STORE_SEED) -> list[dict]:
    """Generate the raw product list of a synthetic store (deterministic in ``scale`` and ``seed``).

    Returns records in the reference raw schema; each target's single instruction carries
    ``task_id`` (its index in the list), ``task_uid``, ``instruction_index`` = 0 and ``price_upper``.

    >>> records = generate_raw_products("small", seed=1)
    >>> sum(1 for r in records if r["instructions"])
    200
    """
    spec = scale_spec(scale)
    generator = _Generator(spec, seed)
    records = [record for i in range(spec.n_tasks) for _, record in generator.task_products(i)]
    generator.rng.shuffle(records)
    for index, record in enumerate(records):
        for position, instruction in enumerate(record["instructions"]):
            instruction["task_id"] = index
            instruction["instruction_index"] = position
            instruction["task_uid"] = task_uid(record["asin"], position, instruction["instruction"])
    return records


def task_uid(asin: str, instruction_index: int, instruction: str) -> str:
    """Stable task uid (reference §1): ``shopsim-`` + 24 hex of SHA-256 of [asin, index, text]."""
    return "shopsim-" + sha256_text(canonical_json([asin, instruction_index, instruction]))[:24]
