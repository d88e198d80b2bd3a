"""Mask assignment: release masks reproduced, slot order, draw laws, Gate A, m > 1, rank check and redraws,
reload."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from intraskill.gate import design
from intraskill.gate.design import (
    MaskAssignment,
    MaskAssignmentError,
    Slot,
    SlotVersion,
    assign_gate_a_masks,
    assign_online_masks,
    load_mask_assignment,
    mask_draw,
    save_mask_assignment,
    slots_from_interventions,
    slots_from_pool,
)
from intraskill.gate.ols import RankDeficientDesignError
from intraskill.gate.selection import Intervention
from intraskill.hashing import u64
from intraskill.paths import release_data_dir
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.pool import Candidate, build_candidate_pool, online_candidate_id
from intraskill.skills.render import Chunk, render_chunk

RELEASE = release_data_dir()


def chunk(title: str) -> str:
    return render_chunk(Chunk(title, "always", (f"do {title}",), "ok", "skipping"))


def candidate(operation: str, target: str | None, title: str) -> Candidate:
    content = chunk(title)
    return Candidate(online_candidate_id(operation, target, content), operation, target, content,
                     {"title": title, "proposal_checkpoint": "ckpt-round-000"})


@pytest.fixture(scope="module")
def pool():
    bank = SkillBank("b1", tuple(Skill(f"chunk-{x}", chunk(x)) for x in "bac"))
    candidates = [candidate("ADD", None, "new one"), candidate("REWRITE", "chunk-a", "a v2"),
                  candidate("REWRITE", "chunk-a", "a v3"), candidate("ADD", None, "new two")]
    return build_candidate_pool(bank, candidates, round_id="round-000", proposal_checkpoint="ckpt-round-000",
                                created_at="2026-01-01T00:00:00+00:00")


@pytest.mark.parametrize("round_index", [0, 1, 2, 3])
def test_release_masks_are_reproduced_from_the_seed(round_index: int) -> None:
    gate = json.loads((RELEASE / f"round-{round_index:03d}" / "gate" / "contributions.json").read_text())
    slots = slots_from_interventions([Intervention.from_dict(r) for r in gate["contributions"]])
    assignment = assign_online_masks(slots, [row["task_id"] for row in gate["observations_table"]],
                                     mask_seed=20260901, split="val", pool_sha256=gate["pool_sha256"])
    assert assignment.columns == list(gate["estimates"]["reward"]["coefficients"])
    for job, row in zip(assignment.jobs, gate["observations_table"], strict=True):
        assert job.episode_id == row["episode_id"]
        assert list(job.mask) == row["mask"]
        assert list(job.included_chunk_ids) == row["included_chunk_ids"]


def test_pool_slot_order_follows_section_1_6(pool) -> None:
    slots = slots_from_pool(pool)
    rewrites = sorted(c.candidate_id for c in pool.candidates if c.operation == "REWRITE")
    adds = sorted(c.candidate_id for c in pool.candidates if c.operation == "ADD")
    assert [s.slot_id for s in slots] == ["chunk-b", "chunk-a", "chunk-c", *adds]
    assert [s.order for s in slots] == [1, 2, 3, 4, 5]
    assert [v.intervention_id for v in slots[1].versions] == ["chunk-a", *rewrites]
    assignment = assign_online_masks(pool, range(60))
    assert assignment.pool_sha256 == pool.pool_sha256
    assert assignment.columns == ["chunk-b", "chunk-a", *rewrites, "chunk-c", *adds]
    interventions = assignment.interventions()
    assert [(i.kind, i.operation, i.logical_chunk_id, i.order) for i in interventions[1:4]] == [
        ("current", None, "chunk-a", 2),
        ("candidate", "REWRITE", "chunk-a", 2),
        ("candidate", "REWRITE", "chunk-a", 2),
    ]


def test_online_draw_is_the_documented_modulus_and_families_are_exclusive(pool) -> None:
    assignment = assign_online_masks(pool, range(1, 41), mask_seed=7, split="val", samples_per_task=2)
    family = assignment.slots[1]
    for job in assignment.jobs:
        choice = u64(f"7:val:{job.task_id}:{job.sample_id}:chunk-a") % 4
        expected = family.versions[choice - 1].intervention_id if choice else None
        assert job.slot_states["chunk-a"] == expected
        family_bits = job.mask[1:4]
        assert sum(family_bits) == (0 if expected is None else 1)
        assert list(job.included_chunk_ids) == [s for s in job.slot_states.values() if s is not None]


def test_family_states_are_uniform_and_plain_slots_are_half() -> None:
    slots = (Slot("old", 1, (SlotVersion("old", "current", None), SlotVersion("new1", "candidate", "REWRITE"),
                             SlotVersion("new2", "candidate", "REWRITE"))),
             Slot("plain", 2, (SlotVersion("plain", "current", None),)))
    assignment = assign_online_masks(slots, range(4000), pool_sha256="p" * 64)
    states = Counter(job.slot_states["old"] for job in assignment.jobs)
    assert set(states) == {None, "old", "new1", "new2"}
    assert all(abs(count / 4000 - 0.25) < 0.03 for count in states.values())
    present = sum(job.slot_states["plain"] is not None for job in assignment.jobs)
    assert abs(present / 4000 - 0.5) < 0.03


def test_multiple_samples_per_task_get_their_own_draws(pool) -> None:
    assignment = assign_online_masks(pool, [5, 3, 40, 41], samples_per_task=3)
    keys = [(j.task_id, j.sample_id) for j in assignment.jobs[:6]]
    assert keys == [(3, 0), (3, 1), (3, 2), (5, 0), (5, 1), (5, 2)]
    assert assignment.jobs[0].episode_id == "task-000003__sample-000"
    big = assign_online_masks(pool, range(50), samples_per_task=3)
    per_task = [{big.jobs[3 * t + s].mask for s in range(3)} for t in range(50)]
    assert any(len(masks) > 1 for masks in per_task)
    with pytest.raises(MaskAssignmentError, match="samples_per_task"):
        assign_online_masks(pool, [1, 2], samples_per_task=0)
    with pytest.raises(MaskAssignmentError, match="duplicate task"):
        assign_online_masks(pool, [1, 1])


def test_assignment_is_deterministic_and_seed_sensitive(pool) -> None:
    first = assign_online_masks(pool, range(30))
    assert assign_online_masks(pool, range(30)).assignment_sha256 == first.assignment_sha256
    assert assign_online_masks(pool, range(30), mask_seed=1).assignment_sha256 != first.assignment_sha256


def _singular(seed: int, redraws: range, tasks: int) -> bool:
    """Every job of these draws leaves slot ``x`` absent (its column all zero)."""
    return all(mask_draw(seed, r, "val", t, 0, "x") % 2 == 0 for r in redraws for t in range(tasks))


def test_singular_draw_is_redrawn_and_recorded(pool, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(RankDeficientDesignError, match="n must exceed k.*no redraw can help"):
        assign_online_masks(pool, range(4))  # 4 jobs for 7 columns
    single = (Slot("x", 1, (SlotVersion("x", "current", None),)),)
    seed = next(s for s in range(1000) if _singular(s, range(1), 3) and not _singular(s, range(1, 2), 3))
    assert all(u64(f"{seed}:val:{t}:0:x") % 2 == 0 for t in range(3))  # redraw 0 is the reference's key
    with caplog.at_level(logging.WARNING, logger="intraskill.gate.design"):
        assignment = assign_online_masks(single, range(3), mask_seed=seed, pool_sha256="p" * 64)
    assert assignment.redraw == 1 and "all-zero columns: ['x']" in caplog.text
    assert [job.mask for job in assignment.jobs] == \
        [(int(u64(f"{seed}:redraw-1:val:{t}:0:x") % 2 == 1),) for t in range(3)]
    stored = json.loads(save_mask_assignment(assignment, tmp_path / "m.json").read_text())
    assert stored["redraw"] == 1 and load_mask_assignment(tmp_path / "m.json") == assignment
    with pytest.raises(MaskAssignmentError, match="differs from the draw.*redraw 0"):
        MaskAssignment.from_dict({**stored, "redraw": 0, "assignment_sha256": ""})
    # a first draw keeps the hash it had before redraws existed: no `redraw` field
    assert "redraw" not in assign_online_masks(pool, range(40)).to_dict()


def test_design_singular_through_every_redraw_aborts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(design, "MAX_MASK_REDRAWS", 2)
    single = (Slot("x", 1, (SlotVersion("x", "current", None),)),)
    seed = next(s for s in range(10_000) if _singular(s, range(3), 2))
    with pytest.raises(RankDeficientDesignError, match=r"all 3 draws \(redraw 0–2\) gave a singular design.*"
                                                       "more val tasks"):
        assign_online_masks(single, range(2), mask_seed=seed, pool_sha256="p" * 64)


def test_gate_a_bernoulli_half(pool) -> None:
    chunks = tuple(Skill(f"chunk-{i}", chunk(str(i)), version="draft-1", metadata={"draft_only": True})
                   for i in range(16))
    draft = SkillBank("draft", chunks)
    assignment = assign_gate_a_masks(draft, range(200), mask_seed=11, split="val")
    assert assignment.mask_probability == 0.5 and assignment.pool_sha256 == draft.sha256
    for job in assignment.jobs[:40]:
        expected = [int(u64(f"11:val:{job.task_id}:0:chunk-{i}") < 2**63) for i in range(16)]
        assert list(job.mask) == expected
    rate = sum(sum(job.mask) for job in assignment.jobs) / (200 * 16)
    assert abs(rate - 0.5) < 0.03
    with pytest.raises(MaskAssignmentError, match="exactly 0.5"):
        assign_gate_a_masks(draft, range(200), mask_probability=0.4)
    with pytest.raises(MaskAssignmentError, match="draft_only"):
        assign_gate_a_masks(SkillBank("plain", chunks[:3] + (Skill("x", chunk("x")),)), range(50))
    too_many = SkillBank("draft", chunks + (Skill("chunk-16", chunk("16")),), metadata={"draft_only": True})
    with pytest.raises(MaskAssignmentError, match="1–16"):
        assign_gate_a_masks(too_many, range(200))


def test_reload_verifies_hash_and_draws(pool, tmp_path: Path) -> None:
    assignment = assign_online_masks(pool, range(40))
    path = save_mask_assignment(assignment, tmp_path / "mask_assignments.json")
    assert load_mask_assignment(path) == assignment
    stored = json.loads(path.read_text())
    assert {"mask_seed", "pool_sha256", "slots", "columns", "jobs", "assignment_sha256"} <= set(stored)
    assert set(stored["jobs"][0]) == {"episode_id", "split", "task_id", "sample_id", "mask",
                                      "included_chunk_ids", "slot_states"}
    tampered = json.loads(path.read_text())
    tampered["mask_seed"] = 1
    with pytest.raises(MaskAssignmentError, match="differs from the draw"):
        MaskAssignment.from_dict(tampered)
    rehashed = json.loads(path.read_text())
    rehashed["jobs"][0]["mask"] = [1 - bit for bit in rehashed["jobs"][0]["mask"]]
    with pytest.raises(MaskAssignmentError, match="differs from the draw"):
        MaskAssignment.from_dict({**rehashed, "assignment_sha256": ""})
    wrong_sha = json.loads(path.read_text())
    wrong_sha["assignment_sha256"] = "0" * 64
    with pytest.raises(MaskAssignmentError, match="assignment_sha256"):
        MaskAssignment.from_dict(wrong_sha)
