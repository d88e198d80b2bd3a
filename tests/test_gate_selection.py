"""Gate selection: reproduce every released status and rank, plus planted families, ties and budgets."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from intraskill.gate.selection import (
    ContributionStatus,
    Intervention,
    select_from_contributions,
    select_gate_a,
    select_online,
)

S = ContributionStatus


def current(ident: str, order: int) -> Intervention:
    return Intervention(ident, "current", ident, None, order)


def add(ident: str, order: int) -> Intervention:
    return Intervention(ident, "candidate", ident, "ADD", order)


def rewrite(ident: str, target: str, order: int) -> Intervention:
    return Intervention(ident, "candidate", target, "REWRITE", order)


def by_id(result) -> dict:
    return {record.intervention_id: record for record in result.contributions}


@pytest.mark.parametrize("round_index", [0, 1, 2, 3])
def test_release_statuses_ranks_and_winners_are_reproduced(release_dir: Path, round_index: int) -> None:
    gate = json.loads((release_dir / f"round-{round_index:03d}" / "gate" / "contributions.json").read_text())
    result = select_from_contributions(gate)
    produced = [record.to_dict() for record in result.contributions]
    stored = [
        {k: v for k, v in record.items() if k != "auxiliary_coefficients"} for record in gate["contributions"]
    ]
    assert produced == stored
    assert result.selected_intervention_ids == gate["selected_intervention_ids"]
    assert result.selected_count == gate["selected_count"]
    assert list(result.replacement_winners.items()) == list(gate["replacement_winners"].items())


def test_chunk_contributions_csv_is_reproduced(release_dir: Path) -> None:
    with open(release_dir / "analysis" / "chunk_contributions.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    produced = []
    for round_index in range(4):
        path = release_dir / f"round-{round_index:03d}" / "gate" / "contributions.json"
        gate = json.loads(path.read_text())
        for record in select_from_contributions(gate).contributions:
            produced.append(
                {
                    "round": str(round_index),
                    "intervention_id": record.intervention_id,
                    "kind": record.kind,
                    "logical_chunk_id": record.logical_chunk_id,
                    "operation": record.operation or "",
                    "order": str(record.order),
                    "coefficient": repr(record.coefficient),
                    "rank": "" if record.rank is None else str(record.rank),
                    "status": record.status.value,
                }
            )
    assert len(produced) == 52
    assert produced == rows


def test_planted_rewrite_beats_its_old_version_under_the_old_slot_id() -> None:
    pool = [current("chunk-a", 1), rewrite("online-new", "chunk-a", 1), current("chunk-b", 2)]
    result = select_online(pool, {"chunk-a": 0.2, "online-new": 0.6, "chunk-b": 0.1})
    records = by_id(result)
    assert result.replacement_winners == {"chunk-a": "online-new", "chunk-b": "chunk-b"}
    assert records["online-new"].status is S.SELECTED and records["online-new"].rank == 1
    assert records["chunk-a"].status is S.REWRITE_LOSER and records["chunk-a"].rank is None
    assert result.selected_intervention_ids == ["online-new", "chunk-b"]


def test_ties_go_to_the_old_version_then_to_the_earlier_rewrite_id() -> None:
    pool = [current("chunk-a", 1), rewrite("online-z", "chunk-a", 1), rewrite("online-m", "chunk-a", 1)]
    tied_with_old = select_online(pool, {"chunk-a": 0.3, "online-z": 0.3, "online-m": 0.3})
    assert tied_with_old.replacement_winners == {"chunk-a": "chunk-a"}
    assert by_id(tied_with_old)["online-z"].status is S.REWRITE_LOSER
    rewrites_tied = select_online(pool, {"chunk-a": 0.1, "online-z": 0.3, "online-m": 0.3})
    assert rewrites_tied.replacement_winners == {"chunk-a": "online-m"}


def test_positive_rewrite_losers_get_no_rank_and_a_negative_winner_is_non_positive() -> None:
    pool = [current("chunk-a", 1), rewrite("online-r", "chunk-a", 1)]
    result = by_id(select_online(pool, {"chunk-a": -0.3, "online-r": -0.1}))
    assert result["chunk-a"].status is S.REWRITE_LOSER
    assert result["online-r"].status is S.NON_POSITIVE and result["online-r"].rank == 1


def test_top_k_cut_statuses_and_no_padding() -> None:
    currents = [current(f"chunk-{i:02d}", i) for i in range(6)]
    adds = [add(f"online-{i:02d}", 6 + i) for i in range(7)]
    beta = {c.intervention_id: 0.5 - 0.01 * c.order for c in currents + adds}
    beta["chunk-05"] = 0.01  # positive current chunk ranked past the budget
    beta["online-00"] = 0.005  # positive candidate ranked past the budget
    beta["online-06"] = -0.2
    beta["chunk-04"] = 1e-13  # |β| <= 1e-12 counts as zero
    records = by_id(select_online(currents + adds, beta, budget=9))
    selected = [r for r in records.values() if r.status is S.SELECTED]
    assert len(selected) == 9 and all(r.rank <= 9 for r in selected)
    assert (records["chunk-05"].rank, records["online-00"].rank) == (10, 11)
    assert records["chunk-05"].status is S.RETIRED
    assert records["online-00"].status is S.BUDGET_EXCLUDED
    assert records["online-06"].status is S.NON_POSITIVE
    assert records["chunk-04"].status is S.RETIRED and records["chunk-04"].coefficient == 0.0
    assert sorted(r.rank for r in records.values()) == list(range(1, 14))
    few = select_online([current("chunk-x", 1), add("online-y", 2)], {"chunk-x": -0.1, "online-y": 0.0})
    assert few.selected_intervention_ids == []
    assert [r.status for r in few.contributions] == [S.RETIRED, S.NON_POSITIVE]


def test_rank_ties_are_broken_by_intervention_id() -> None:
    pool = [add("online-b", 1), add("online-a", 2)]
    result = by_id(select_online(pool, {"online-a": 0.2, "online-b": 0.2}))
    assert (result["online-a"].rank, result["online-b"].rank) == (1, 2)


def test_gate_a_has_no_families_and_breaks_ties_by_chunk_id() -> None:
    beta = {"chunk-c": 0.2, "chunk-a": 0.2, "chunk-b": -0.1, "chunk-d": 0.05}
    result = select_gate_a(["chunk-c", "chunk-a", "chunk-b", "chunk-d"], beta, budget=2)
    records = by_id(result)
    assert (records["chunk-a"].rank, records["chunk-c"].rank) == (1, 2)
    assert result.selected_intervention_ids == ["chunk-c", "chunk-a"]
    assert records["chunk-d"].status is S.BUDGET_EXCLUDED
    assert records["chunk-b"].status is S.NON_POSITIVE
    assert {r.status for r in records.values()} <= {S.SELECTED, S.NON_POSITIVE, S.BUDGET_EXCLUDED}


def test_invalid_pools_are_rejected_with_the_field_named() -> None:
    with pytest.raises(ValueError, match="kind"):
        Intervention("x", "draft", "x", None, 1)
    with pytest.raises(ValueError, match="operation"):
        Intervention("x", "candidate", "x", None, 1)
    with pytest.raises(ValueError, match="logical_chunk_id"):
        Intervention("online-x", "candidate", "online-x", "REWRITE", 1)
    with pytest.raises(ValueError, match="not in the pool"):
        select_online([rewrite("online-r", "chunk-gone", 1)], {"online-r": 0.1})
    with pytest.raises(ValueError, match="lack intervention ids"):
        select_online([current("chunk-a", 1)], {})
    with pytest.raises(ValueError, match="budget"):
        select_online([current("chunk-a", 1)], {"chunk-a": 0.1}, budget=0)
