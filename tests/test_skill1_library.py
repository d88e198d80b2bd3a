"""Skill1 library: EMA, admission gate, eviction order, persistence and resume (docs/method.md §10.2)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from intraskill.jsonl import DIGEST_KEY, read_jsonl
from intraskill.skills.library import (
    LibraryStore,
    SkillLibrary,
    SkillLibraryError,
    SkillProvenance,
    ema,
    library_from_snapshot,
)

PROV = SkillProvenance("distilled", task_id=7, round=1, step=3)


def test_ema_and_use_count() -> None:
    library = SkillLibrary()
    skill = library.admit("when buying shoes", "filter by size first", 1.0, PROV).skill
    assert (skill.utility, skill.uses) == (0.5, 0)
    after = library.update(skill.skill_id, 1.0)
    assert after.utility == pytest.approx(0.95 * 0.5 + 0.05)  # 0.525
    after = library.update(skill.skill_id, 0.0)
    assert after.utility == pytest.approx(0.95 * 0.525)  # 0.49875
    assert after.uses == 2
    assert ema(0.2, 1.0, rate=0.5) == pytest.approx(0.6)


def test_admission_only_on_success() -> None:
    library = SkillLibrary()
    assert library.admit("desc", "strat", 0.0, PROV) is None
    assert len(library) == 0
    admitted = library.admit("desc", "strat", 1.0, PROV)
    assert admitted is not None and admitted.evicted is None and admitted.skill.provenance == PROV
    with pytest.raises(SkillLibraryError, match="reward r must be 0 or 1"):
        library.admit("desc", "strat", 0.5, PROV)


def test_eviction_order_uses_u_log_max_n_2() -> None:
    library = SkillLibrary(capacity=3)
    a = library.seed("a", "sa", utility=0.9, uses=10)  # 0.9·ln 10 = 2.072
    b = library.seed("b", "sb", utility=0.2, uses=20)  # 0.2·ln 20 = 0.599
    c = library.seed("c", "sc", utility=0.5, uses=0)  # 0.5·ln 2 = 0.347  (n ≤ 1 floored at 2)
    assert c.skill.eviction_score == pytest.approx(0.5 * math.log(2))
    first = library.admit("d", "sd", 1.0, PROV)
    assert first is not None and first.evicted == c.skill  # lowest score
    second = library.admit("e", "se", 1.0, PROV)
    # d (new, 0.5·ln 2 = 0.347) < b (0.599): the fresh skill goes, as U·log2 is below b's score.
    assert second is not None and second.evicted == first.skill
    assert [s.skill_id for s in library.skills] == [a.skill.skill_id, b.skill.skill_id, 4]
    # A fresh skill outlives a much-used failing one: 0.5·ln 2 = 0.347 > 0.01·ln 30 = 0.034.
    library = SkillLibrary(capacity=2)
    bad = library.seed("bad", "s", utility=0.01, uses=30)
    fresh = library.seed("fresh", "s").skill
    third = library.admit("new", "s", 1.0, PROV)
    assert third is not None and third.evicted == bad.skill and fresh in library.skills


def test_eviction_ties_go_to_fewer_uses_then_oldest() -> None:
    library = SkillLibrary(capacity=3)
    library.seed("x", "s", utility=0.5, uses=1)
    library.seed("y", "s", utility=0.5, uses=0)
    library.seed("z", "s", utility=0.5, uses=0)
    assert library.eviction_candidate().desc == "y"


def test_bad_input_is_a_typed_error() -> None:
    with pytest.raises(SkillLibraryError, match="capacity"):
        SkillLibrary(capacity=0)
    library = SkillLibrary()
    with pytest.raises(SkillLibraryError, match="desc must be non-empty"):
        library.admit(" ", "s", 1.0, PROV)
    with pytest.raises(SkillLibraryError, match="skill_id 9 is not in the library"):
        library.update(9, 1.0)
    with pytest.raises(SkillLibraryError, match="needs task_id"):
        SkillProvenance("distilled", task_id=1)


def test_history_snapshot_and_resume(tmp_path: Path) -> None:
    with LibraryStore.open(tmp_path, capacity=2) as store:
        library = store.library
        library.admit("a", "sa", 1.0, PROV)
        library.admit("b", "sb", 1.0, PROV)
        library.update(0, 1.0)
        store.commit(0)
        library.admit("c", "sc", 1.0, PROV)  # evicts b (0.5·ln2 < 0.525·ln2)
        store.commit(1)
        expected = library.skills
    events = [r["event"] for r in read_jsonl(tmp_path / "history.jsonl")]
    assert events == ["admit", "admit", "update", "commit", "evict", "admit", "commit"]
    with LibraryStore.open(tmp_path, capacity=2) as store:
        assert store.library.skills == expected and store.step == 1 and store.library.next_id == 3


def test_resume_replays_committed_steps_beyond_a_stale_snapshot(tmp_path: Path) -> None:
    with LibraryStore.open(tmp_path) as store:
        store.library.admit("a", "sa", 1.0, PROV)
        store.commit(0)
        stale = (tmp_path / "snapshot.json").read_text()
        store.library.update(0, 0.0)
        store.commit(1)
        expected = store.library.skills
    (tmp_path / "snapshot.json").write_text(stale)  # a kill between the commit line and the snapshot
    with LibraryStore.open(tmp_path) as store:
        assert store.library.skills == expected and store.step == 1


def test_a_killed_step_is_discarded_and_recorded(tmp_path: Path) -> None:
    with LibraryStore.open(tmp_path) as store:
        store.library.admit("a", "sa", 1.0, PROV)
        store.commit(0)
        committed = store.library.skills
        store.library.update(0, 1.0)  # killed before commit
        store.library.admit("b", "sb", 1.0, PROV)
    with LibraryStore.open(tmp_path) as store:
        assert store.library.skills == committed and store.library.next_id == 1
        store.library.admit("c", "sc", 1.0, PROV)
        store.commit(1)
    records = read_jsonl(tmp_path / "history.jsonl")
    assert records[4] == {"event": "abort", "seq": 5, "discarded_seq": [3, 4]}
    with LibraryStore.open(tmp_path) as store:  # replaying the full history from scratch agrees
        assert [s.desc for s in store.library.skills] == ["a", "c"]


def test_corrupt_history_names_file_and_line(tmp_path: Path) -> None:
    with LibraryStore.open(tmp_path) as store:
        store.library.admit("a", "sa", 1.0, PROV)
        store.commit(0)
    snapshot = json.loads((tmp_path / "snapshot.json").read_text())
    snapshot["seq"] = 0  # force replay of the whole history
    snapshot["skills"], snapshot["next_id"] = [], 0
    (tmp_path / "snapshot.json").write_text(json.dumps(snapshot))
    history = tmp_path / "history.jsonl"
    chained = history.read_text().splitlines()
    history.write_text("\n".join([chained[0].replace('"event": "admit"', '"event": "grow"'), *chained[1:]]) + "\n")
    with pytest.raises(SkillLibraryError, match=rf"{history}:1: record does not match its {DIGEST_KEY}"):
        LibraryStore.open(tmp_path)  # an edit by hand breaks the record chain
    lines = [json.dumps({k: v for k, v in json.loads(line).items() if k != DIGEST_KEY}) for line in chained]
    lines[0] = lines[0].replace('"event": "admit"', '"event": "grow"')
    history.write_text("\n".join(lines) + "\n")  # a file without digests is read as it is, and checked
    with pytest.raises(SkillLibraryError, match=rf"{history}:1: unknown event 'grow'"):
        LibraryStore.open(tmp_path)
    history.write_text(lines[1] + "\n")
    with pytest.raises(SkillLibraryError, match=rf"{history}:1: expected event seq 1, got 2"):
        LibraryStore.open(tmp_path)


def test_settings_must_match_the_snapshot(tmp_path: Path) -> None:
    LibraryStore.open(tmp_path, capacity=10).close()
    with pytest.raises(SkillLibraryError, match="capacity is 10 but the library was opened with 20"):
        LibraryStore.open(tmp_path, capacity=20)


def test_seed_library(tmp_path: Path) -> None:
    seed = tmp_path / "seed.json"
    seed.write_text(
        json.dumps([{"desc": "d1", "strat": "s1", "utility": 0.8}, {"desc": "d2", "strat": "s2"}])
    )
    with LibraryStore.open(tmp_path / "lib", seed_path=seed) as store:
        skills = store.library.skills
    assert [(s.desc, s.utility, s.provenance.origin) for s in skills] == [
        ("d1", 0.8, "seed"),
        ("d2", 0.5, "seed"),
    ]
    with LibraryStore.open(tmp_path / "lib", seed_path=seed) as store:  # resumed: seeds not added twice
        assert store.library.skills == skills
    seed.write_text(json.dumps([{"desc": "d1"}]))
    with pytest.raises(SkillLibraryError, match=rf"{seed}: entry 0 needs the keys 'desc' and 'strat'"):
        LibraryStore.open(tmp_path / "other", seed_path=seed)


def test_bad_snapshot_names_the_file(tmp_path: Path) -> None:
    LibraryStore.open(tmp_path).close()
    snapshot = tmp_path / "snapshot.json"
    data = json.loads(snapshot.read_text())
    data["skills"] = [
        {
            "skill_id": 0,
            "desc": "d",
            "strat": "s",
            "utility": 2.0,
            "uses": 0,
            "provenance": {"origin": "seed"},
        }
    ]
    snapshot.write_text(json.dumps(data))
    with pytest.raises(
        SkillLibraryError, match=rf"{snapshot}: skill 0: utility must be in \[0, 1\], got 2.0"
    ):
        LibraryStore.open(tmp_path)


def test_a_library_starts_from_another_ones_snapshot(tmp_path: Path) -> None:
    with LibraryStore.open(tmp_path / "round-0", capacity=2) as store:
        store.library.admit("a", "sa", 1.0, PROV)
        store.library.admit("b", "sb", 1.0, PROV)
        store.library.update(0, 1.0)
        store.library.admit("c", "sc", 1.0, PROV)  # evicts b: ids 0 and 2 remain
        store.commit(1)
        carried = store.library.skills
    start = tmp_path / "round-0" / "snapshot.json"
    assert library_from_snapshot(start, capacity=2).skills == carried
    with LibraryStore.open(tmp_path / "round-1", capacity=2, start=start) as store:
        assert store.library.skills == carried and store.library.next_id == 3 and store.step is None
        assert store.library.get(0).uses == 1 and store.library.get(0).provenance == PROV
        store.library.update(2, 0.0)
        store.commit(1)
    assert [r["event"] for r in read_jsonl(tmp_path / "round-1" / "history.jsonl")] == ["update", "commit"]
    with LibraryStore.open(tmp_path / "round-1", capacity=2, start=start) as store:  # resumed: start ignored
        assert store.library.get(2).uses == 1 and store.step == 1
    with pytest.raises(SkillLibraryError, match="capacity is 2 but the library was opened with 5"):
        LibraryStore.open(tmp_path / "other", capacity=5, start=start)
    with pytest.raises(SkillLibraryError, match="a seed library or a start snapshot, not both"):
        LibraryStore.open(tmp_path / "other", start=start, seed_path=start)
