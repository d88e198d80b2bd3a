"""Typed records of the store: products, private goals and the public task view.

Field names follow the ShopSimulator reference (``docs/store.md`` §1–§2). A :class:`Goal` is
private: it is scored against, never rendered into a prompt. The public :class:`Task` carries
only what the agent may see in persona mode (``instruction_simple`` and the persona without
``__reasoning__``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CATEGORY_SEPARATOR = "›"
ENVIRONMENT_VERSION = "shopsimulator-paper-aligned-v8"
BUDGET_KINDS = ("hard_upper", "approximate_upper", "no_budget", "lower_only")
APPROXIMATE_BUDGET_FACTOR = 1.10


def normalize_option_value(value: str) -> str:
    """Runtime form of an option value: lower-cased, '/' replaced by ' | ' (reference §2 loader)."""
    return str(value).lower().replace("/", " | ")


@dataclass(frozen=True)
class Product:
    """One catalogue product in runtime form (after the reference's ``load_products`` transform).

    ``options`` maps axis name (raw, never translated) to lower-cased values in catalogue order;
    ``option_prices`` maps axis → value → price (``None`` where the catalogue gives none).
    """

    asin: str
    title: str
    brand: str
    category: str
    product_category: str = ""
    sub_title: str = ""
    attributes: tuple[str, ...] = ()
    options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    option_prices: dict[str, dict[str, float | None]] = field(default_factory=dict)
    pricing: tuple[float, ...] = (100.0,)
    domain: str = ""
    bullets: str = ""
    description: str = ""

    @property
    def price_display(self) -> str:
        """The listing price string: ``"p"`` or ``"p0 to p1"`` from the first two pricing entries."""
        shown = [float(p) for p in self.pricing[:2]]
        if len(shown) == 1 or shown[0] == shown[1]:
            return f"{shown[0]}"
        return f"{shown[0]} to {shown[1]}"

    @property
    def category_path(self) -> tuple[str, ...]:
        return tuple(part.strip() for part in self.category.split(CATEGORY_SEPARATOR) if part.strip())

    def summary(self) -> dict[str, Any]:
        """The public product summary used on result and product pages (observation v7)."""
        return {
            "asin": self.asin,
            "title": self.title,
            "brand": self.brand,
            "category": self.category,
            "price": self.price_display,
            "key_attributes": list(self.attributes[:10]),
        }


@dataclass(frozen=True)
class Goal:
    """The private scoring goal of one task (reference ``get_goals``). Never enters a prompt."""

    task_id: int
    task_uid: str
    asin: str
    category: str
    name: str
    instruction_text: str
    instruction_simple: str
    attributes: tuple[str, ...]
    goal_options: tuple[str, ...]
    price_upper: float | None
    budget_kind: str = "no_budget"
    user_persona: dict[str, Any] = field(default_factory=dict)
    source_product_index: int = -1
    weight: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        """The goal as the terminal response reveals it (``goal`` field)."""
        return {
            "task_id": self.task_id,
            "task_uid": self.task_uid,
            "source_product_index": self.source_product_index,
            "asin": self.asin,
            "category": self.category,
            "name": self.name,
            "instruction_text": self.instruction_text,
            "instruction_simple": self.instruction_simple,
            "attributes": list(self.attributes),
            "price_upper": self.price_upper,
            "budget_kind": self.budget_kind,
            "goal_options": list(self.goal_options),
            "user_persona": self.user_persona,
            "weight": self.weight,
        }

    def public_task(self) -> "Task":
        """What the agent may see in persona mode."""
        persona = {k: v for k, v in self.user_persona.items() if k != "__reasoning__"}
        return Task(task_id=self.task_id, task_uid=self.task_uid,
                    instruction_simple=self.instruction_simple or self.instruction_text,
                    user_persona=persona)


@dataclass(frozen=True)
class Task:
    """The public view of a task: the short request and the persona (no goal fields)."""

    task_id: int
    task_uid: str
    instruction_simple: str
    user_persona: dict[str, Any]
