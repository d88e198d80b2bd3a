"""Curriculum ρ mapping, the hashed state file, deterministic group draws and the assignment registry."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from intraskill.paths import release_data_dir
from intraskill.skills import (
    CurriculumError,
    GroupAssignment,
    GroupAssignmentRegistry,
    Skill,
    SkillBank,
    assign_group,
    build_curriculum,
    full_skill_assignment,
    inclusion_probability,
    load_curriculum,
    load_skillbank,
    save_curriculum,
    treatment_draw,
)

COLD_START = release_data_dir() / "cold-start" / "selected_skillbank.json"


def _bank(effects: list[float | None]) -> SkillBank:
    skills = []
    for index, effect in enumerate(effects):
        metadata = {} if effect is None else {"estimated_effect": effect}
        skills.append(Skill(f"chunk-{index}", f"### chunk {index}", version="1", metadata=metadata))
    return SkillBank("test-v1", tuple(skills))


def test_reference_example_rho() -> None:
    assert round(inclusion_probability(0.02928, 0.074971, 0.2, 0.9), 4) == 0.4734
    assert inclusion_probability(0.074971, 0.074971, 0.2, 0.9) == pytest.approx(0.9)
    assert round(inclusion_probability(2e-5, 0.074971, 0.2, 0.9), 4) == 0.2002


def test_cold_start_curriculum_reproduces_release_mapping() -> None:
    state = build_curriculum(load_skillbank(COLD_START), round_id="round-000", created_at="2026-01-01T00:00:00")
    by_effect = {round(c.contribution, 6): c.inclusion_probability for c in state.chunks}
    assert state.source["probability_mapping"]["contribution_scale"] == pytest.approx(0.074971, abs=1e-6)
    assert state.source["probability_mapping"]["scale_source"] == "largest_active_contribution"
    assert by_effect[0.074971] == pytest.approx(0.9)
    assert round(by_effect[0.029279], 4) == 0.4734
    assert min(by_effect.values()) >= 0.2
    assert state.skill_ids[0] == "chunk-27a7e5bb9344"  # bank order kept


def test_explicit_scale_clips_at_ceiling() -> None:
    state = build_curriculum(_bank([0.01, 0.04]), round_id="r", contribution_scale=0.02, created_at="t")
    assert [c.inclusion_probability for c in state.chunks] == pytest.approx([0.55, 0.9])
    assert state.source["probability_mapping"]["scale_source"] == "explicit"


@pytest.mark.parametrize("effects", [[0.1, 0.0], [0.1, -0.2], [0.1, None]])
def test_refuses_non_positive_or_missing_effect(effects: list[float | None]) -> None:
    with pytest.raises(CurriculumError, match="chunk-1.*estimated_effect"):
        build_curriculum(_bank(effects), round_id="r")


def test_state_id_covers_the_reference_fields() -> None:
    state = build_curriculum(_bank([0.01, 0.04]), round_id="round-001", seed=7, created_at="t")
    payload = {
        "round_id": "round-001",
        "seed": 7,
        "skill_free_probability": 0.2,
        "chunks": [chunk.to_dict() for chunk in state.chunks],
        "source": state.source,
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert state.state_id == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    later = build_curriculum(_bank([0.01, 0.04]), round_id="round-001", seed=7, created_at="later")
    assert later.state_id == state.state_id  # created_at is not part of the identity


def test_round_trip_and_tamper_detection(tmp_path: Path) -> None:
    state = build_curriculum(_bank([0.01, 0.04]), round_id="r", created_at="t")
    path = save_curriculum(state, tmp_path / "curriculum.json")
    assert load_curriculum(path) == state
    data = json.loads(path.read_text(encoding="utf-8"))
    data["chunks"][0]["inclusion_probability"] = 0.99
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(CurriculumError, match="state_id"):
        load_curriculum(path)
    data = json.loads(save_curriculum(state, path).read_text(encoding="utf-8"))
    data["schema_version"] = "other"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(CurriculumError, match="schema_version"):
        load_curriculum(path)


def test_treatment_draw_is_sha256_of_the_key() -> None:
    digest = hashlib.sha256(b"20260901:abc:17:skill-free").digest()
    assert treatment_draw(20260901, "abc", 17, "skill-free") == int.from_bytes(digest[:8], "big") / 2**64


def test_assignment_is_deterministic_and_follows_draws() -> None:
    state = build_curriculum(_bank([0.01, 0.02, 0.04]), round_id="r", created_at="t")
    for group in range(200):
        first, second = assign_group(state, group), assign_group(state, str(group))
        assert first == second
        free = treatment_draw(state.seed, state.draw_id, group, "skill-free") < 0.2
        assert (first.mode == "skill_free") == free
        if not free:
            expected = tuple(
                c.skill_id for c in state.chunks
                if treatment_draw(state.seed, state.draw_id, group, f"chunk:{c.skill_id}") < c.inclusion_probability
            )
            assert first.skill_ids == expected
            assert first.mode == ("assisted" if expected else "assisted_empty")


def test_draws_follow_content_never_provenance_paths_or_float_noise() -> None:
    def curriculum(effects: list[float], **source: object) -> object:
        bank = _bank(effects)
        skills = tuple(replace(s, version="v9", metadata={**s.metadata, **source}) for s in bank.skills)
        return build_curriculum(SkillBank("v", skills, dict(source)), round_id="round-001",
                                skillbank_path=str(source.get("path")), created_at="t")

    base = curriculum([0.0123, 0.04])
    # another gate provenance (a weights digest in bank and chunk metadata), version and path: a new state_id,
    # the same draws
    moved = curriculum([0.0123 + 3e-6, 0.04], checkpoint_sha256="f" * 64, path="/elsewhere/selected.json")
    assert moved.state_id != base.state_id and moved.draw_id == base.draw_id
    expected = hashlib.sha256(json.dumps(
        {"chunks": [["chunk-0", "### chunk 0", "0.0123"], ["chunk-1", "### chunk 1", "0.0400"]],
         "round_id": "round-001"}, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert base.draw_id == expected
    groups = range(300)
    assert [assign_group(moved, g).skill_ids for g in groups] == [assign_group(base, g).skill_ids for g in groups]
    assert all(assign_group(moved, g).state_id == moved.state_id for g in groups)  # integrity keeps state_id
    # content moves them: α at the stated precision, a chunk's text, the round
    changed = [curriculum([0.0124, 0.04]).draw_id,
               build_curriculum(SkillBank("v", (Skill("chunk-0", "### other", metadata={"estimated_effect": 0.0123}),
                                                _bank([0, 0.04]).skills[1])), round_id="round-001").draw_id,
               build_curriculum(_bank([0.0123, 0.04]), round_id="round-002").draw_id]
    assert base.draw_id not in changed and len(set(changed)) == 3


def test_assignment_rates_match_q_and_rho() -> None:
    state = build_curriculum(_bank([0.005, 0.02, 0.04]), round_id="r", created_at="t")
    assignments = [assign_group(state, g) for g in range(4000)]
    free_rate = sum(a.mode == "skill_free" for a in assignments) / len(assignments)
    assert free_rate == pytest.approx(0.2, abs=0.03)
    assisted = [a for a in assignments if a.mode != "skill_free"]
    assert any(a.mode == "assisted_empty" for a in assisted)
    for chunk in state.chunks:
        rate = sum(chunk.skill_id in a.skill_ids for a in assisted) / len(assisted)
        assert rate == pytest.approx(chunk.inclusion_probability, abs=0.04)


def test_full_skill_assignment_and_skills_selection() -> None:
    state = build_curriculum(_bank([0.01, 0.04]), round_id="r", created_at="t")
    retry = full_skill_assignment(state, 3)
    assert retry.mode == "diagnostic_full_skill" and retry.skill_ids == ("chunk-0", "chunk-1")
    assert [s.skill_id for s in state.skills(["chunk-1"])] == ["chunk-1"]
    with pytest.raises(CurriculumError, match="not in curriculum"):
        state.skills(["chunk-9"])


def test_assignment_mode_consistency() -> None:
    with pytest.raises(CurriculumError, match="skill_ids"):
        GroupAssignment("s", "1", "skill_free", ("chunk-0",))
    with pytest.raises(CurriculumError, match="mode"):
        GroupAssignment("s", "1", "half", ())


def test_registry_accepts_siblings_and_reports_leader() -> None:
    state = build_curriculum(_bank([0.01, 0.04]), round_id="r", created_at="t")
    registry = GroupAssignmentRegistry(n_samples_per_prompt=3)
    assignment = assign_group(state, 5)
    for index in range(3):
        registry.register(assign_group(state, 5), index)
    assert [registry.complete(5, index) for index in (2, 0, 1)] == [False, False, True]
    assert assignment == assign_group(state, 5)


def test_registry_violations() -> None:
    registry = GroupAssignmentRegistry(n_samples_per_prompt=2)
    registry.register(GroupAssignment("s1", "g", "assisted", ("a",)), 0)
    with pytest.raises(CurriculumError, match="siblings have"):
        registry.register(GroupAssignment("s1", "g", "assisted", ("a", "b")), 1)
    with pytest.raises(CurriculumError, match="curriculum changed"):
        registry.register(GroupAssignment("s2", "g", "assisted", ("a",)), 1)
    with pytest.raises(CurriculumError, match="registered twice"):
        registry.register(GroupAssignment("s1", "g", "assisted", ("a",)), 0)
    registry.register(GroupAssignment("s1", "g", "assisted", ("a",)), 1)
    with pytest.raises(CurriculumError, match="n_samples_per_prompt"):
        registry.register(GroupAssignment("s1", "g", "assisted", ("a",)), 2)
    registry.complete("g", 0)
    with pytest.raises(CurriculumError, match="completed twice"):
        registry.complete("g", 0)
    with pytest.raises(CurriculumError, match="without being registered"):
        registry.complete("g", 7)
