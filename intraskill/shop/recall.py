"""Gold-ASIN retrieval quality of the search engine (the reference's ``evaluate_search`` table).

Reference (docs/store.md §3, persona_eval, 1,274 tasks): ``instruction_simple`` R@1 24.10 %,
R@20 69.07 %, R@150 95.68 %, MRR@150 0.3536; the full instruction 49.84 % / 85.71 % / 95.29 % / 0.6098.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from intraskill.shop.search import SearchIndex
from intraskill.shop.types import Goal

QUERY_FIELDS: dict[str, Callable[[Goal], str]] = {
    "instruction_simple": lambda goal: goal.instruction_simple or goal.instruction_text,
    "instruction": lambda goal: goal.instruction_text,
}
"""The two query sources of the reference table."""


def gold_recall(index: SearchIndex, pairs: Iterable[tuple[str, str]],
                ks: tuple[int, ...] = (1, 20, 150)) -> dict[str, float]:
    """Recall@k and MRR@max(k) of ``(query, gold_asin)`` pairs; ``{"tasks", "recall@k"…, "mrr@K"}``."""
    depth = max(ks)
    hits = {k: 0 for k in ks}
    reciprocal, count = 0.0, 0
    for query, gold in pairs:
        ranked = index.search(query, k=depth)
        rank = ranked.index(gold) + 1 if gold in ranked else None
        count += 1
        for k in ks:
            hits[k] += int(rank is not None and rank <= k)
        reciprocal += 1.0 / rank if rank else 0.0
    out: dict[str, float] = {"tasks": count}
    out.update({f"recall@{k}": hits[k] / max(1, count) for k in ks})
    out[f"mrr@{depth}"] = reciprocal / max(1, count)
    return out


def instruction_recall(catalog: Any, index: SearchIndex, split: str = "val", limit: int | None = None,
                       ks: tuple[int, ...] = (1, 20, 150)) -> dict[str, dict[str, float]]:
    """Gold recall with ``instruction_simple`` and with the full instruction as the query."""
    goals = [catalog.goal(task_id) for task_id in list(catalog.task_ids(split))[:limit]]
    return {name: gold_recall(index, ((query(g), g.asin) for g in goals), ks) for name, query in QUERY_FIELDS.items()}
