"""Append-only JSONL records are chained by digest: an edited, removed or reordered record is refused by name."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from policy_doubles import KilledAfter
from test_eval_runner import make_params

from intraskill.evaluate.runner import run_eval
from intraskill.jsonl import DIGEST_KEY, JsonlError, JsonlWriter, read_jsonl, verify_jsonl_tree
from intraskill.policy.expert_policy import ExpertPolicy

RECORDS = [{"episode_id": f"e{k}", "reward": float(k % 2), "by_task": {"10": k, "9": [k, 0.1]}} for k in range(4)]


def written(path: Path) -> Path:
    with JsonlWriter(path) as writer:
        for record in RECORDS:
            writer.append(record)
    return path


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def test_records_read_back_as_appended_and_a_reopened_writer_continues_the_chain(tmp_path: Path) -> None:
    path = written(tmp_path / "records.jsonl")
    assert read_jsonl(path) == RECORDS and all(DIGEST_KEY in json.loads(line) for line in lines(path))
    with JsonlWriter(path) as writer:
        writer.append({"episode_id": "e4", "reward": 1.0})
    assert read_jsonl(path) == [*RECORDS, {"episode_id": "e4", "reward": 1.0}]
    with pytest.raises(ValueError, match=DIGEST_KEY):
        JsonlWriter(path).append({DIGEST_KEY: "0" * 64})


@pytest.mark.parametrize("damage, line", [
    (lambda rows: [rows[0], rows[1].replace('"reward": 1.0', '"reward": 0.0'), *rows[2:]], 2),  # the edit
    (lambda rows: [rows[0], *rows[2:]], 2),  # a record removed
    (lambda rows: [rows[0], rows[2], rows[1], rows[3]], 2),  # two records swapped
    (lambda rows: [rows[0], rows[1], rows[2].replace('"e2"', '"e9"'), rows[3]], 3),
    (lambda rows: [*rows[:3], json.dumps({k: v for k, v in json.loads(rows[3]).items() if k != DIGEST_KEY}) + "\n"],
     4),  # a digest stripped
])
def test_a_broken_chain_names_the_file_and_line_for_readers_and_writers(tmp_path: Path, damage, line: int) -> None:
    path = written(tmp_path / "records.jsonl")
    path.write_text("".join(damage(lines(path))), encoding="utf-8")
    for attempt in (lambda: read_jsonl(path), lambda: JsonlWriter(path), lambda: verify_jsonl_tree(tmp_path)):
        with pytest.raises(JsonlError, match=rf"^{re.escape(str(path))}:{line}: "):
            attempt()


def test_a_file_from_before_the_digests_reads_as_it_is_and_is_chained_before_an_append(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in RECORDS), encoding="utf-8")
    assert read_jsonl(path) == RECORDS
    with caplog.at_level(logging.WARNING), JsonlWriter(path) as writer:
        writer.append({"episode_id": "e4"})
    assert "written before records carried digests; chaining its 4 records" in caplog.text
    assert read_jsonl(path) == [*RECORDS, {"episode_id": "e4"}]
    assert all(DIGEST_KEY in json.loads(row) for row in lines(path))


def test_an_edited_trace_reward_is_refused_on_resume(tmp_path: Path, small_store_root: Path) -> None:
    """The issue's repro: a completed trace's reward edited 1.0 → 0.0 no longer changes the resumed summary."""
    params, out = make_params(tmp_path), tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_eval(params, "val", None, None, out, policy=KilledAfter(ExpertPolicy(seed=7), calls=9),
                 progress=False, batch_size=2, store_root=small_store_root)
    rows = lines(out / "traces.jsonl")
    number = next(n for n, row in enumerate(rows, start=1) if json.loads(row)["reward"]["reward"] == 1.0)
    record = json.loads(rows[number - 1])
    record["reward"]["reward"] = 0.0
    rows[number - 1] = json.dumps(record) + "\n"
    (out / "traces.jsonl").write_text("".join(rows), encoding="utf-8")
    with pytest.raises(JsonlError, match=rf"{re.escape(str(out / 'traces.jsonl'))}:{number}: record does not match"):
        run_eval(params, "val", None, None, out, progress=False, batch_size=2, store_root=small_store_root)
    assert not (out / "summary.json").exists()
