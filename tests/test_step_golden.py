"""Golden trajectories of the store's step path: every response byte-for-byte as recorded.

A seeded mix of the benchmark's browsing policy, random clicks on the page's clickable elements,
purchases, invalid actions and terminations plays the small store in English and Chinese. Each
response is reduced to its page type, clickable actions, validity, reward and a digest of every
field (serialised in insertion order, so key order counts too), and compared with
``tests/fixtures/step_golden.json``, recorded before the click path was optimised. Re-record
(only when the contract itself changes) with ``PYTHONPATH=. python tests/test_step_golden.py``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import SMALL_STORE_SEED

from intraskill.shop.build import build_store, open_store
from intraskill.shop.data import Catalog
from intraskill.shop.engine import ShopEngine, StoreConfig
from intraskill.shop.observation import BUY_NOW, NAVIGATION_LABELS
from intraskill.shop.search import SearchIndex

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_store import next_action  # noqa: E402  (the store benchmark's browsing policy)

GOLDEN = Path(__file__).parent / "fixtures" / "step_golden.json"
RUNS = (("en", 7, 400), ("zh", 8, 200))
"""(language, seed, steps) of each recorded trajectory."""

def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()[:16]


def _summary(label: str, response: dict[str, Any]) -> dict[str, Any]:
    state = response["observation_state"]
    feedback = response.get("action_feedback", {})
    return {
        "action": label,
        "page": state["page_type"],
        "actions": state["actions"],
        "valid": feedback.get("valid"),
        "reason": feedback.get("reason"),
        "done": response.get("done"),
        "reward": response.get("reward"),
        "fields": [[key, _digest(value)] for key, value in response.items()],
    }


def _invalid_action(rng: random.Random, state: dict[str, Any], asins: list[str], query: str) -> str:
    selected = [f"{axis}={value}" for axis, value in state.get("selected_options", {}).items()]
    choices = [f"click[{rng.choice(asins)}]", f"click[{BUY_NOW}]", f"search[{query}]", "click[]",
               "buy it now", "Thought: two.\nAction: click[a]\nAction: click[b]", "click[x] click[y]"]
    choices += [f"click[{label}]" for label in selected]
    return rng.choice(choices)


def play(engine: ShopEngine, task_ids: list[int], queries: list[str], seed: int, steps: int) -> list[dict[str, Any]]:
    """Summaries of ``steps`` seeded actions (plus the resets and terminations between episodes)."""
    rng, tasks, texts = random.Random(seed), itertools.cycle(task_ids), itertools.cycle(queries)
    asins = sorted(engine.products)
    session = engine.new_session()
    personas = itertools.cycle((None, True, False))
    task = next(tasks)
    response, turn = session.reset(task, next(personas)), 0
    records = [_summary(f"reset:{task}", response)]
    for _ in range(steps):
        state = response["observation_state"]
        query = next(texts)
        roll = rng.random()
        if roll < 0.02:
            response = session.terminate("generation_length")
            records.append(_summary("terminate:generation_length", response))
        else:
            clickable = [a for a in state["actions"] if a not in NAVIGATION_LABELS or a == BUY_NOW]
            if roll < 0.45 or (state["page_type"] == "search_home" and roll < 0.9):
                action = next_action(state, turn, query)
            elif roll < 0.85 and clickable:
                action = f"click[{rng.choice(state['actions'] + clickable)}]"
            else:
                action = _invalid_action(rng, state, asins, query)
            response, turn = session.step(action), turn + 1
            records.append(_summary(action, response))
            records[-1]["state"] = _digest(session.state)
        if response["done"]:
            task = next(tasks)
            response, turn = session.reset(task, next(personas)), 0
            records.append(_summary(f"reset:{task}", response))
    return records


def trajectories(catalog: Catalog, index: SearchIndex) -> dict[str, list[dict[str, Any]]]:
    """Every trajectory of :data:`RUNS`, keyed by ``language-seed``."""
    task_ids = [t for t in catalog.task_ids() if catalog.goal(t).attributes][:60]
    queries = [catalog.task(t).instruction_simple for t in task_ids]
    out = {}
    for language, seed, steps in RUNS:
        engine = ShopEngine(catalog.products, catalog.goals, index, StoreConfig(language=language))
        out[f"{language}-{seed}"] = play(engine, task_ids, queries, seed, steps)
    return out


@pytest.mark.parametrize("run", [f"{language}-{seed}" for language, seed, _ in RUNS])
def test_step_responses_match_golden(small_store: tuple[Catalog, SearchIndex, Any], run: str) -> None:
    catalog, index, _ = small_store
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))[run]
    actual = trajectories(catalog, index)[run]
    assert len(actual) == len(expected)
    for i, (got, want) in enumerate(zip(actual, expected, strict=True)):
        assert got == want, f"{run} record {i} ({want['action']!r}) differs from the golden trajectory"


def test_golden_covers_every_kind_of_step() -> None:
    records = [r for run in json.loads(GOLDEN.read_text(encoding="utf-8")).values() for r in run]
    reasons = {r["reason"] for r in records}
    assert {"executed", "unavailable_action", "incomplete_options", "search_unavailable",
            "invalid_format", "multiple_actions_not_allowed", "already_selected"} <= reasons
    assert {r["page"] for r in records} == {"search_home", "search_results", "product_detail", "terminal"}
    assert any(r["action"] == f"click[{BUY_NOW}]" and r["done"] and r["reward"] > 0 for r in records)
    assert any(r["action"].startswith("click[") and "=" in r["action"] and r["valid"] for r in records)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        build_store(tmp, scale="small", seed=SMALL_STORE_SEED)
        store_catalog, store_index, _ = open_store(tmp)
        try:
            GOLDEN.write_text(json.dumps(trajectories(store_catalog, store_index), ensure_ascii=False) + "\n",
                              encoding="utf-8")
        finally:
            store_index.close()
    sys.exit(0)
