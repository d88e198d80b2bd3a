"""Raw product files (ShopSimulator schema), the runtime transform, private goals and the catalogue.

One reader serves the synthetic store and the real ShopSimulator files (cleaned v2 catalogue as
``.json`` or ``.json.gz``): ``docs/store.md`` §1 (tasks, ``get_goals``) and §2 (``load_products``).

* :func:`load_products` drops bad ASINs ("nan", longer than 20 characters, missing) and duplicate
  ASINs (first wins), keeps the first two ``pricing`` entries for the price tag (a missing or empty
  ``pricing`` becomes ``[100.0]``), lower-cases option values with '/' → ' | ' and builds the
  axis → value → price map.
* :func:`get_goals` skips instructions with an empty ``attributes`` list (the task becomes inactive);
  a stored ``price_upper`` wins, otherwise the budget parser reads ``instruction_simple`` and then the
  full instruction. The budget is never derived from the gold price.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from intraskill.hashing import sha256_json
from intraskill.shop.budget import parse_budget, resolve_goal_budget
from intraskill.shop.splits import Splits
from intraskill.shop.synth import task_uid as make_task_uid
from intraskill.shop.types import Goal, Product, Task, normalize_option_value

if TYPE_CHECKING:
    from intraskill.shop.splits import Splits

MAX_ASIN_LENGTH = 20
DEFAULT_PRICING = (100.0,)
GZIP_LEVEL = 6


def read_raw_products(path: str | Path) -> list[dict[str, Any]]:
    """Read a raw product file: one JSON list, plain or gzip-compressed (by the ``.gz`` suffix).

    A truncated or corrupt file raises ``ValueError`` naming it.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            records = json.load(handle)
    except (EOFError, gzip.BadGzipFile, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: truncated or corrupt product file ({type(error).__name__}: {error})") from None
    if not isinstance(records, list):
        kind = type(records).__name__
        raise ValueError(f"{path}: a raw product file must hold a JSON list of products, got {kind}")
    return records


def write_raw_products(records: list[dict[str, Any]], path: str | Path) -> Path:
    """Write a raw product file deterministically (gzip with mtime 0 when the name ends in ``.gz``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(records, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".gz":
        with open(tmp, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=GZIP_LEVEL) as packed:
                packed.write(data)
    else:
        tmp.write_bytes(data)
    tmp.replace(path)
    return path


def _bad_asin(asin: Any) -> bool:
    text = str(asin).strip() if asin is not None else ""
    return not text or text.lower() == "nan" or len(text) > MAX_ASIN_LENGTH


def _float_or_none(value: Any) -> float | None:
    try:
        return None if value is None or value == "" else float(value)
    except (TypeError, ValueError):
        return None


def _pricing(raw: Any) -> tuple[float, ...]:
    entries = raw[:2] if isinstance(raw, list) else []
    values = [v for v in (_float_or_none(x) for x in entries) if v is not None]
    return tuple(values) if values else DEFAULT_PRICING


def _options(raw: Any, asin: str) -> tuple[dict[str, tuple[str, ...]], dict[str, dict[str, float | None]]]:
    """Runtime options (lower-cased, '/' → ' | ') and the axis → value → price map."""
    if not raw:
        return {}, {}
    if not isinstance(raw, dict):
        kind = type(raw).__name__
        raise ValueError(f"product {asin}: customization_options must be a mapping axis -> list, got {kind}")
    options: dict[str, tuple[str, ...]] = {}
    prices: dict[str, dict[str, float | None]] = {}
    for axis, entries in raw.items():
        values: dict[str, float | None] = {}
        for entry in entries or []:
            is_dict = isinstance(entry, dict)
            value, price = (entry.get("value"), entry.get("price")) if is_dict else (entry, None)
            if value is None or str(value).strip() == "":
                continue
            values.setdefault(normalize_option_value(value), _float_or_none(price))
        if values:
            options[str(axis)] = tuple(values)
            prices[str(axis)] = values
    return options, prices


def product_from_raw(record: dict[str, Any]) -> Product:
    """One raw record in runtime form (the reference ``load_products`` transform of one product)."""
    asin = str(record["asin"]).strip()
    options, option_prices = _options(record.get("customization_options"), asin)
    return Product(
        asin=asin,
        title=str(record.get("title") or ""),
        brand=str(record.get("brand") or record.get("shop_name") or ""),
        category=str(record.get("category") or record.get("product_category") or ""),
        product_category=str(record.get("product_category") or ""),
        sub_title=str(record.get("sub_title") or ""),
        attributes=tuple(str(a) for a in (record.get("attribute") or []) if str(a).strip()),
        options=options,
        option_prices=option_prices,
        pricing=_pricing(record.get("pricing")),
        domain=str(record.get("domain_en_short") or ""),
        bullets=str(record.get("small_description") or ""),
        description=str(record.get("full_description") or ""),
    )


def _valid_records(records: Iterable[dict[str, Any]]) -> Iterable[tuple[int, dict[str, Any]]]:
    """(source index, record) of records with a good, first-seen ASIN."""
    seen: set[str] = set()
    for index, record in enumerate(records):
        asin = record.get("asin")
        if _bad_asin(asin) or str(asin).strip() in seen:
            continue
        seen.add(str(asin).strip())
        yield index, record


def load_products(records: Iterable[dict[str, Any]]) -> dict[str, Product]:
    """Runtime products by ASIN, in file order (bad and duplicate ASINs dropped)."""
    return {str(r["asin"]).strip(): product_from_raw(r) for _, r in _valid_records(records)}


def _budget_of(instruction: dict[str, Any], simple: str, full: str) -> tuple[float | None, str]:
    stored = _float_or_none(instruction.get("price_upper"))
    if stored is None:
        budget = resolve_goal_budget(None, simple, full)
        return budget.price_upper, budget.kind
    parsed = parse_budget(simple)
    if parsed.price_upper is None:
        parsed = parse_budget(full)
    kind = parsed.kind if parsed.price_upper is not None else "hard_upper"
    return stored, kind


def get_goals(records: Iterable[dict[str, Any]]) -> dict[int, Goal]:
    """Private goals by task id (reference ``get_goals``).

    Instructions with an empty ``attributes`` list are skipped; a missing ``task_id`` falls back to
    the product's source index (ids are assigned once, before filtering, so they have gaps).
    """
    goals: dict[int, Goal] = {}
    for index, record in _valid_records(records):
        asin = str(record["asin"]).strip()
        for position, instruction in enumerate(record.get("instructions") or []):
            attributes = tuple(str(a) for a in (instruction.get("attributes") or []) if str(a).strip())
            if not attributes:
                continue
            full = str(instruction.get("instruction") or "")
            simple = str(instruction.get("instruction_simple") or "") or full
            task_id = int(instruction.get("task_id", index))
            if task_id in goals:
                raise ValueError(f"product {asin}: instructions[{position}].task_id {task_id} is not unique")
            instruction_index = int(instruction.get("instruction_index", position))
            price_upper, kind = _budget_of(instruction, simple, full)
            goals[task_id] = Goal(
                task_id=task_id,
                task_uid=str(instruction.get("task_uid") or make_task_uid(asin, instruction_index, full)),
                asin=asin,
                category=str(record.get("category") or ""),
                name=str(record.get("title") or ""),
                instruction_text=full,
                instruction_simple=simple,
                attributes=attributes,
                goal_options=tuple(str(o) for o in (instruction.get("instruction_options") or [])),
                price_upper=price_upper,
                budget_kind=kind,
                user_persona=dict(record.get("user_persona") or {}),
                source_product_index=index,
            )
    return goals


@dataclass
class Catalog:
    """Products by ASIN, private goals by task id, the product-data SHA-256 and an optional split.

    ``sha256`` is the SHA-256 of the canonical JSON of the raw records (the search index checks it).
    """

    products: dict[str, Product]
    goals: dict[int, Goal]
    sha256: str
    splits: "Splits | None" = field(default=None)

    @classmethod
    def from_records(cls, records: list[dict[str, Any]], splits: "Splits | None" = None) -> "Catalog":
        """Build a catalogue from raw records (see :func:`load_products`, :func:`get_goals`)."""
        catalog = cls(products=load_products(records), goals=get_goals(records), sha256=sha256_json(records))
        if splits is not None:
            catalog.attach_splits(splits)
        return catalog

    @classmethod
    def load(cls, path: str | Path, splits_path: str | Path | None = None) -> "Catalog":
        """Read a raw product file (and optionally a split file) into a catalogue."""
        splits = Splits.load(splits_path) if splits_path is not None else None
        return cls.from_records(read_raw_products(path), splits=splits)

    def attach_splits(self, splits: "Splits") -> None:
        """Attach a split; every listed task id must be an active task of this catalogue."""
        missing = [t for name in splits.names for t in splits.ids(name) if t not in self.goals]
        if missing:
            raise ValueError(f"splits list {len(missing)} task ids that are not active tasks, "
                             f"e.g. {missing[:5]}")
        self.splits = splits

    def goal(self, task_id: int) -> Goal:
        """The private goal of an active task; a clear error for inactive ids."""
        if task_id not in self.goals:
            raise KeyError(f"task_id {task_id} is not an active task")
        return self.goals[task_id]

    def task(self, task_id: int) -> Task:
        """The public view of a task (persona mode)."""
        return self.goal(task_id).public_task()

    def task_ids(self, split: str | None = None) -> tuple[int, ...]:
        """Task ids of a split (in split-file order), or every active task id when ``split`` is None."""
        if split is None:
            return tuple(sorted(self.goals))
        if self.splits is None:
            raise ValueError("this catalogue has no split attached")
        return self.splits.ids(split)

    def tasks(self, split: str | None = None) -> list[Task]:
        """Public tasks of a split (or all)."""
        return [self.task(t) for t in self.task_ids(split)]
