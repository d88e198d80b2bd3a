"""Gold recall of the search engine: hand-checked ranks and the persona effect on the small store."""

from __future__ import annotations

import pytest

from intraskill.shop.recall import gold_recall, instruction_recall


def test_recall_and_mrr_from_known_ranks(small_store) -> None:
    catalog, index, _ = small_store
    goal = catalog.goal(catalog.task_ids("val")[0])
    ranked = index.search(goal.instruction_text, k=150)
    rank = ranked.index(goal.asin) + 1
    scores = gold_recall(index, [(goal.instruction_text, goal.asin), ("zzzz-no-match", goal.asin)], ks=(1, 150))
    assert scores["tasks"] == 2
    assert scores["recall@150"] == pytest.approx(0.5)
    assert scores["recall@1"] == pytest.approx(0.5 if rank == 1 else 0.0)
    assert scores["mrr@150"] == pytest.approx(0.5 / rank)


def test_full_instruction_retrieves_better_than_the_short_request(small_store) -> None:
    catalog, index, _ = small_store
    recall = instruction_recall(catalog, index, split="val")
    simple, full = recall["instruction_simple"], recall["instruction"]
    assert simple["tasks"] == full["tasks"] == len(catalog.task_ids("val"))
    assert full["recall@1"] > simple["recall@1"]
    assert full["mrr@150"] > simple["mrr@150"]
    assert all(0.0 <= simple[k] <= simple["recall@150"] for k in ("recall@1", "recall@20"))
