"""SkillBank schema, hashing, load/save, chunk rendering and the prompt skill block."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from intraskill.paths import project_root, release_data_dir
from intraskill.skills import (
    Chunk,
    Skill,
    SkillBank,
    SkillBankError,
    content_sha256,
    load_skillbank,
    parse_chunk,
    render_chunk,
    render_skill_block,
    save_skillbank,
)

RELEASE = release_data_dir()
COLD_START = RELEASE / "cold-start" / "selected_skillbank.json"
ROUND_003 = RELEASE / "round-003" / "gate" / "selected_skillbank.json"


def _bank() -> SkillBank:
    return SkillBank(
        bank_version="test-v1",
        skills=(
            Skill("chunk-a", "### A\n\n- Applies when: x", version="1", metadata={"estimated_effect": 0.02}),
            Skill("chunk-b", "### 价格\n\n- Applies when: 预算", version="2", metadata={"estimated_effect": 0.05}),
        ),
        metadata={"round_id": "round-000"},
    )


def test_content_sha256_uses_json_encoded_content() -> None:
    content = "### 标题\n- Applies when: 任务"
    expected = hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()
    assert content_sha256(content) == expected
    assert content_sha256(content) != hashlib.sha256(content.encode("utf-8")).hexdigest()


def test_bank_round_trip_keeps_identity(tmp_path: Path) -> None:
    bank = _bank()
    path = save_skillbank(bank, tmp_path / "bank.json")
    loaded = load_skillbank(path)
    assert loaded == bank
    assert loaded.sha256 == bank.sha256
    assert json.loads(path.read_text(encoding="utf-8"))["skills"][1]["content"].startswith("### 价格")


def test_bank_sha256_changes_with_content() -> None:
    bank = _bank()
    edited = SkillBank(bank.bank_version, (bank.skills[0], Skill("chunk-b", "### B", version="2")), bank.metadata)
    assert edited.sha256 != bank.sha256


def test_skill_defaults() -> None:
    bank = SkillBank.from_dict(
        {"schema_version": "shopsimrl-skillbank-v1", "bank_version": "v", "skills": [{"skill_id": "s", "content": "c"}]}
    )
    skill = bank.skills[0]
    assert (skill.version, skill.enabled, skill.metadata, skill.task_ids) == ("1", True, {}, None)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(schema_version="other"), "schema_version"),
        (lambda d: d.pop("bank_version"), "bank_version"),
        (lambda d: d.update(skills={}), "skills"),
        (lambda d: d["skills"][1].pop("content"), "skills[1].content"),
        (lambda d: d["skills"][0].update(content="   "), "skills[0].content"),
        (lambda d: d["skills"][0].update(skill_id=""), "skills[0].skill_id"),
        (lambda d: d["skills"][1].update(skill_id="chunk-a"), "skills[1].skill_id"),
        (lambda d: d["skills"][0].update(enabled="yes"), "skills[0].enabled"),
        (lambda d: d["skills"][0].update(version=3), "skills[0].version"),
        (lambda d: d["skills"][0].update(task_ids=["7"]), "skills[0].task_ids"),
        (lambda d: d["skills"][0].update(colour="red"), "skills[0]: unknown field"),
        (lambda d: d["skills"][0]["metadata"].update(estimated_effect="big"), "skills[0].metadata.estimated_effect"),
        (lambda d: d["skills"][0].update(content_sha256="0" * 64), "skills[0].content_sha256"),
    ],
)
def test_validation_errors_name_the_field(mutate, field: str, tmp_path: Path) -> None:
    data = _bank().to_dict()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(SkillBankError) as info:
        load_skillbank(path)
    assert field in str(info.value)


def test_release_cold_start_bank_loads_and_hashes_check() -> None:
    assert b"\r\n" in COLD_START.read_bytes()
    raw = json.loads(COLD_START.read_text(encoding="utf-8"))
    bank = load_skillbank(COLD_START)
    assert len(bank.skills) == 10
    recorded = [skill["content_sha256"] for skill in raw["skills"]]
    assert [skill.content_sha256 for skill in bank.skills] == recorded
    assert bank.metadata["selected_count"] == 10
    assert [s.skill_id for s in bank.skills] == bank.metadata["selected_chunk_ids"]
    # the normalized record reproduces the file exactly, so the identity is that of the file's JSON
    assert bank.to_dict() == raw


def test_release_round_003_bank_loads() -> None:
    bank = load_skillbank(ROUND_003)
    assert len(bank.skills) == 8
    assert {skill.version for skill in bank.skills} == {"candidate"}
    assert [s.skill_id for s in bank.skills][:2] == ["chunk-a9e98e128a35", "chunk-c83ed5ae8b70"]
    assert all(skill.estimated_effect > 0 for skill in bank.skills)


@pytest.mark.parametrize("path", [COLD_START, ROUND_003], ids=["cold-start", "round-003"])
def test_release_contents_follow_the_chunk_template(path: Path) -> None:
    for skill in load_skillbank(path).skills:
        chunk = parse_chunk(skill.content)
        assert render_chunk(chunk) == skill.content
        assert len(chunk.procedure) >= 1


def test_render_chunk_exact() -> None:
    chunk = Chunk(
        title="Complete every option axis",
        applicable_when="the product page lists option axes",
        procedure=("Read the missing axes line", "Click one axis=value per axis"),
        verification="the page says every axis is selected",
        common_failure="clicking buy now too early",
    )
    assert render_chunk(chunk) == (
        "### Complete every option axis\n"
        "\n"
        "- Applies when: the product page lists option axes\n"
        "- Procedure:\n"
        "  1. Read the missing axes line\n"
        "  2. Click one axis=value per axis\n"
        "- Verify: the page says every axis is selected\n"
        "- Avoid: clicking buy now too early"
    )
    assert parse_chunk(render_chunk(chunk)) == chunk


def test_chunk_rejects_empty_procedure() -> None:
    with pytest.raises(ValueError, match="procedure"):
        Chunk("t", "a", (), "v", "f")
    with pytest.raises(ValueError, match="procedure step 2"):
        parse_chunk("### t\n\n- Applies when: a\n- Procedure:\n  1. x\n  3. y\n- Verify: v\n- Avoid: f")


def test_skill_block_exact_layout_and_order() -> None:
    skills = [
        Skill("chunk-b", "\n### B\n- Applies when: y\n\n", version="paired-delta-positive-1"),
        Skill("chunk-\"a\"", "### A", version="1"),
    ]
    assert render_skill_block(skills) == (
        "[Optional strategy hints]\n"
        "These hints are general strategies; always verify them against the current task and page.\n"
        '<skill id="chunk-b" version="paired-delta-positive-1">\n'
        "### B\n- Applies when: y\n"
        "</skill>\n"
        '<skill id="chunk-\\"a\\"" version="1">\n'
        "### A\n"
        "</skill>"
    )


def test_skill_block_chinese_header_and_empty() -> None:
    block = render_skill_block([Skill("s", "### 标题", version="1")], language="zh")
    assert block.splitlines()[0] == "[可选策略提示]"
    assert block.splitlines()[2] == '<skill id="s" version="1">'
    assert render_skill_block([]) == ""
    with pytest.raises(ValueError, match="language"):
        render_skill_block([Skill("s", "c")], language="fr")


def test_provider_identity_refuses_truncating_max_skills() -> None:
    bank = _bank()
    assert bank.provider_identity()["bank_sha256"] == bank.sha256
    with pytest.raises(SkillBankError, match="max_skills"):
        bank.provider_identity(max_skills=1)


def test_the_reworded_organism_bank_mirrors_the_hand_written_one() -> None:
    """``organism_s0_paraphrased.json`` (the wording probe, docs/cold-start.md) keeps every chunk's ID, roles,
    structure and step count and changes every title and line of text."""
    original = load_skillbank(project_root() / "params" / "organism_s0.json")
    reworded = load_skillbank(project_root() / "params" / "organism_s0_paraphrased.json")
    assert [s.skill_id for s in reworded.skills] == [s.skill_id for s in original.skills]
    for before, after in zip(original.skills, reworded.skills):
        assert after.metadata == before.metadata
        old, new = parse_chunk(before.content), parse_chunk(after.content)
        assert len(new.procedure) == len(old.procedure)
        pairs = [(old.title, new.title), (old.applicable_when, new.applicable_when),
                 (old.verification, new.verification), (old.common_failure, new.common_failure),
                 *zip(old.procedure, new.procedure)]
        assert all(a != b for a, b in pairs), before.skill_id
