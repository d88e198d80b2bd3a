"""ShopSimulator's own files in their published layout: find, check and load them (``docs/store.md`` §1, §2).

The build reads two files of a ShopSimulator ``shop_env`` directory:

* ``data/fine_items_eval_train_all.cleaned.v2.json.gz`` — the cleaned v2 catalogue (§2 build step 4): one
  gzip-compressed JSON list of products, each with its ``instructions`` (one task each);
* ``persona_splits.v1.json`` — the project split (§1): explicit train / val / test task-id lists, each with its
  SHA-256. The reference does not say which folder holds it, so ``configs/``, ``data/`` and the directory
  itself are searched, in that order.

Every field the store relies on is checked before anything is built; a problem raises
:class:`ShopSimulatorDataError` as one line ``<file>: <field path>: <problem>``. The checks follow the
contract: ASINs are unique non-empty strings of at most 20 characters; each product has a title, a
category path and a non-empty ``instructions`` list; option entries are ``{value, price}`` objects with a
number or null price, and at most one axis has more than one distinct price (catalog filter
``single-price-axis-v1``); each instruction has ``instruction``, ``attributes``, ``instruction_options``,
an integer ``task_id`` unique across the file and a ``price_upper`` key (a positive number or null), and
``instruction_simple`` is there exactly when the product has a ``user_persona``. The split's lists are
disjoint, each list matches its stored SHA-256, and each id is an active persona task of the catalogue.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intraskill.hashing import sha256_file
from intraskill.shop.data import MAX_ASIN_LENGTH, Catalog, read_raw_products
from intraskill.shop.splits import SPLIT_NAMES, Splits

CATALOG_FILE = "fine_items_eval_train_all.cleaned.v2.json.gz"
CATALOG_FOLDERS = ("data",)
SPLITS_FILE = "persona_splits.v1.json"
SPLITS_FOLDERS = ("configs", "data", ".")
SOURCE_KIND = "shopsimulator"


class ShopSimulatorDataError(ValueError):
    """A ShopSimulator file is missing or malformed; the message names the file and the field."""


@dataclass(frozen=True)
class ShopSimulatorFiles:
    """The located files of a ShopSimulator directory."""

    root: Path
    catalog: Path
    splits: Path

    def sha256(self) -> dict[str, str]:
        """SHA-256 of each file by its path relative to :attr:`root` (the store's provenance)."""
        return {path.relative_to(self.root).as_posix(): sha256_file(path) for path in (self.catalog, self.splits)}


def _find(root: Path, name: str, folders: tuple[str, ...]) -> Path:
    candidates = [root / folder / name for folder in folders]
    for path in candidates:
        if path.is_file():
            return path.resolve()
    looked = ", ".join(str(p.parent.relative_to(root)) if p.parent != root else "." for p in candidates)
    raise ShopSimulatorDataError(f"{root}: no {name} (looked in {looked} of the shop_env directory)")


def locate(root: str | Path) -> ShopSimulatorFiles:
    """The catalogue and split files of the ShopSimulator ``shop_env`` directory ``root``."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise ShopSimulatorDataError(f"{root}: not a directory (expected ShopSimulator's shop_env directory)")
    return ShopSimulatorFiles(root, _find(root, CATALOG_FILE, CATALOG_FOLDERS),
                              _find(root, SPLITS_FILE, SPLITS_FOLDERS))


class _Checker:
    """Field checks of one file; every failure names the file and the field path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> ShopSimulatorDataError:
        return ShopSimulatorDataError(f"{self.path}: {where}: {problem}")

    def field(self, record: dict[str, Any], name: str, where: str, kinds: tuple[type, ...],
              required: bool = True) -> Any:
        """``record[name]`` when it has one of ``kinds`` (bool never counts as a number)."""
        if name not in record:
            if required:
                raise self.fail(f"{where}.{name}", "missing")
            return None
        value = record[name]
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            expected = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
            raise self.fail(f"{where}.{name}", f"expected {expected}, got {type(value).__name__}")
        return value

    def strings(self, record: dict[str, Any], name: str, where: str, required: bool = True) -> list[str]:
        values = self.field(record, name, where, (list,), required) or []
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise self.fail(f"{where}.{name}[{i}]", f"expected str, got {type(value).__name__}")
        return values


NUMBER = (int, float)


def _check_options(check: _Checker, record: dict[str, Any], where: str) -> None:
    options = check.field(record, "customization_options", where, (dict, type(None)), required=False) or {}
    priced = []
    for axis, entries in options.items():
        at = f"{where}.customization_options[{axis!r}]"
        if not isinstance(entries, list):
            raise check.fail(at, f"expected a list of option objects, got {type(entries).__name__}")
        prices = set()
        for j, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise check.fail(f"{at}[{j}]", f"expected an object with value and price, got {type(entry).__name__}")
            check.field(entry, "value", f"{at}[{j}]", (str,))
            price = check.field(entry, "price", f"{at}[{j}]", (*NUMBER, type(None)), required=False)
            if price is not None:
                prices.add(float(price))
        if len(prices) > 1:
            priced.append(axis)
    if len(priced) > 1:
        raise check.fail(f"{where}.customization_options", f"{len(priced)} price-affecting axes {priced}; the "
                         "cleaned v2 catalogue keeps at most one (catalog filter single-price-axis-v1)")


def _check_instruction(check: _Checker, instruction: Any, where: str, persona: bool, task_ids: set[int]) -> None:
    if not isinstance(instruction, dict):
        raise check.fail(where, f"expected an object, got {type(instruction).__name__}")
    if not check.field(instruction, "instruction", where, (str,)).strip():
        raise check.fail(f"{where}.instruction", "empty")
    check.strings(instruction, "attributes", where)
    check.strings(instruction, "instruction_options", where)
    task_id = check.field(instruction, "task_id", where, (int,))
    if task_id < 0 or task_id in task_ids:
        raise check.fail(f"{where}.task_id", f"{task_id} is {'negative' if task_id < 0 else 'not unique'}")
    task_ids.add(task_id)
    budget = check.field(instruction, "price_upper", where, (*NUMBER, type(None)))
    if budget is not None and budget <= 0:
        raise check.fail(f"{where}.price_upper", f"must be a positive number or null, got {budget}")
    simple = check.field(instruction, "instruction_simple", where, (str,), required=persona)
    if not persona and simple is not None:
        raise check.fail(f"{where}.instruction_simple", "present on a product without user_persona (build step "
                         "1: instruction_simple is there exactly when user_persona is)")


def check_products(records: list[Any], path: Path) -> None:
    """Check the fields the store relies on in every product of ``records`` (read from ``path``)."""
    check, seen, task_ids = _Checker(path), set(), set()
    for i, record in enumerate(records):
        where = f"products[{i}]"
        if not isinstance(record, dict):
            raise check.fail(where, f"expected a product object, got {type(record).__name__}")
        asin = check.field(record, "asin", where, (str,)).strip()
        if not asin or asin.lower() == "nan" or len(asin) > MAX_ASIN_LENGTH:
            raise check.fail(f"{where}.asin", f"{asin!r} is not an ASIN (1–{MAX_ASIN_LENGTH} characters, not 'nan')")
        if asin in seen:
            raise check.fail(f"{where}.asin", f"{asin} repeats an earlier product")
        seen.add(asin)
        where = f"products[{i}] (asin {asin})"
        for name in ("title", "category"):
            if not check.field(record, name, where, (str,)).strip():
                raise check.fail(f"{where}.{name}", "empty")
        check.strings(record, "attribute", where, required=False)
        for j, price in enumerate(check.field(record, "pricing", where, (list,), required=False) or []):
            if isinstance(price, bool) or not isinstance(price, NUMBER):
                raise check.fail(f"{where}.pricing[{j}]", f"expected a number, got {type(price).__name__}")
        _check_options(check, record, where)
        persona = bool(check.field(record, "user_persona", where, (dict,), required=False))
        instructions = check.field(record, "instructions", where, (list,))
        if not instructions:
            raise check.fail(f"{where}.instructions", "empty (every product carries one task)")
        for j, instruction in enumerate(instructions):
            _check_instruction(check, instruction, f"{where}.instructions[{j}]", persona, task_ids)


def load_splits(path: Path, catalog: Catalog) -> Splits:
    """The persona split of ``path``, checked against its SHA-256s and against ``catalog``'s active tasks."""
    check = _Checker(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ShopSimulatorDataError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise check.fail("(top level)", f"expected an object, got {type(data).__name__}")
    lists = data.get("splits", data)
    for name in SPLIT_NAMES:
        if not isinstance(lists, dict) or name not in lists:
            raise check.fail(f"splits.{name}", "missing")
        nested = isinstance(lists[name], dict)
        ids = lists[name].get("task_ids") if nested else lists[name]
        where = f"splits.{name}.task_ids" if nested else f"splits.{name}"
        if not isinstance(ids, list):
            raise check.fail(where, f"expected a list of task ids, got {type(ids).__name__}")
        for i, task_id in enumerate(ids):
            if isinstance(task_id, bool) or not isinstance(task_id, int):
                raise check.fail(f"{where}[{i}]", f"expected an integer task id, got {type(task_id).__name__}")
    try:
        splits = Splits.from_dict(data)
    except (TypeError, ValueError) as error:
        raise ShopSimulatorDataError(f"{path}: {error}") from None
    owner: dict[int, str] = {}
    for name in SPLIT_NAMES:
        for task_id in splits.ids(name):
            where = f"splits.{name}"
            if task_id in owner:
                raise check.fail(where, f"task {task_id} is also in splits.{owner[task_id]}")
            owner[task_id] = name
            goal = catalog.goals.get(task_id)
            if goal is None:
                raise check.fail(where, f"task {task_id} is not an active task of the catalogue (no such task_id, "
                                 "or its attributes list is empty)")
            if not goal.user_persona:
                raise check.fail(where, f"task {task_id} has no user_persona (the project split holds persona "
                                 "tasks only)")
    return Splits(lists={n: splits.ids(n) for n in SPLIT_NAMES}, seed=splits.seed, meta=splits.meta)


@dataclass(frozen=True)
class ShopSimulatorSource:
    """The checked contents of a ShopSimulator directory: raw records, catalogue (split attached) and files."""

    files: ShopSimulatorFiles
    records: list[dict[str, Any]]
    catalog: Catalog
    splits: Splits


def load_source(root: str | Path) -> ShopSimulatorSource:
    """Locate, check and load the catalogue and persona split of the ShopSimulator directory ``root``."""
    files = locate(root)
    try:
        records = read_raw_products(files.catalog)
    except ValueError as error:
        raise ShopSimulatorDataError(str(error)) from None
    check_products(records, files.catalog)
    catalog = Catalog.from_records(records)
    splits = load_splits(files.splits, catalog)
    catalog.attach_splits(splits)
    return ShopSimulatorSource(files, records, catalog, splits)
