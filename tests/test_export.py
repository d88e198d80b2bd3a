"""intraskill.analysis.export and ``intraskill export``: episode / turn tables of real expert runs laid out
as a round directory (an evaluation with a plan, a rollout step, a retry file), in Parquet and CSV."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from intraskill.agent.traces import read_traces
from intraskill.analysis.export import (
    PANDAS_DTYPES,
    SCHEMA,
    export_run,
    read_run,
    schema_frame,
)
from intraskill.cli import app
from intraskill.evaluate.runner import run_eval
from intraskill.jsonl import read_jsonl
from intraskill.params import params_from_dict
from intraskill.policy.expert_policy import ExpertPolicy
from intraskill.report.data import export_report_data
from intraskill.skills.bank import load_skillbank
from intraskill.skills.render import chunk_title

BANK = Path(__file__).resolve().parents[1] / "params" / "ci_s0.json"


@pytest.fixture(scope="module")
def run_dir(small_store_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A round-like folder: ``eval/val-s0`` (an evaluation with S0, plan.json split val), ``steps/step-0001``
    (the same traces as a rollout step) and a ``retries.jsonl`` holding its first two records."""
    tmp = tmp_path_factory.mktemp("export")
    params = params_from_dict({
        "experiment": {"name": "export-test", "seed": 5, "run_root": str(tmp / "runs")},
        "store": {"scale": "small", "seed": 11},
        "model": {"spec": "expert", "device": "cpu"},
        "sampling": {"temperature": 1.0, "max_tokens_per_turn": 48, "max_turns": 30},
        "evaluation": {"repeats": 1, "task_limit": 6},
    })
    root = tmp / "round-7"
    evaluation = root / "eval" / "val-s0"
    run_eval(params, "val", None, BANK, evaluation, policy=ExpertPolicy(), progress=False,
             store_root=small_store_root)
    step = root / "steps" / "step-0001"
    step.mkdir(parents=True)
    shutil.copy(evaluation / "traces.jsonl", step / "traces.jsonl")
    lines = (evaluation / "traces.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (root / "retries.jsonl").write_text("\n" + "".join(lines[:2]), encoding="utf-8")
    return root


def test_tables_follow_the_traces(run_dir: Path) -> None:
    traces = read_traces(run_dir / "eval" / "val-s0" / "traces.jsonl")
    tables = read_run(run_dir)
    assert tables.run == "round-7"
    assert tables.files == ("eval/val-s0/traces.jsonl", "retries.jsonl", "steps/step-0001/traces.jsonl")
    episodes = pd.DataFrame(tables.episodes)
    assert episodes.groupby("part")["split"].first().to_dict() == {"eval/val-s0": "val", ".": "train",
                                                                   "steps/step-0001": "train"}
    assert list(episodes.loc[episodes["file"] == "retries.jsonl", "line"]) == [2, 3]  # a blank first line
    bank = load_skillbank(BANK)
    titles = "; ".join(chunk_title(skill.content) for skill in bank.skills)
    assert not titles.startswith("#") and titles.count("; ") == len(bank.skills) - 1
    first = episodes[episodes["part"] == "eval/val-s0"].iloc[0]
    assert first["skill_titles"] == titles and first["n_skills"] == len(bank.skills)
    assert first["reward"] == traces[0].reward.reward and first["success"] == (traces[0].reward.r_success == 1)
    assert first["turns"] == len(traces[0].turns) and first["seed"] == traces[0].provenance["seeds"]["episode_seed"]
    assert len(tables.turns) == 2 * sum(len(t.turns) for t in traces) + sum(len(t.turns) for t in traces[:2])
    turn = tables.turns[0]
    assert turn["action"] == traces[0].turns[0].action and turn["page_chars"] == len(traces[0].turns[0].observation)


def test_export_writes_typed_parquet_and_csv_without_gold(run_dir: Path, tmp_path: Path) -> None:
    result = export_run(run_dir, tmp_path / "data")
    assert result.episodes == 14 and result.turns > result.episodes
    for table, columns in SCHEMA.items():
        parquet = pd.read_parquet(result.paths[table]["parquet"])
        assert list(parquet.columns) == [c.name for c in columns]
        assert {str(parquet[c.name].dtype) for c in columns} <= set(PANDAS_DTYPES.values())
        csv = pd.read_csv(result.paths[table]["csv"], keep_default_na=False, na_values=[""])
        assert len(csv) == len(parquet) and list(csv.columns) == list(parquet.columns)
    text = "".join(Path(p).read_text(encoding="utf-8") for p in (result.paths["episodes"]["csv"],
                                                                  result.paths["turns"]["csv"]))
    for trace in read_traces(run_dir / "eval" / "val-s0" / "traces.jsonl"):
        goal = trace.private_goal or {}
        assert goal["instruction_text"] not in text and goal["name"] not in text


def test_corrupt_trace_names_file_and_line(run_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken" / "gate"
    broken.mkdir(parents=True)
    first = read_jsonl(run_dir / "steps" / "step-0001" / "traces.jsonl")[0]  # written below without its digest
    del first["turns"][0]["turn"]
    (broken / "traces.jsonl").write_text(json.dumps(first) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"gate/traces\.jsonl:1: not an intraskill-episode-v1 trace"):
        read_run(broken.parent)
    (broken / "traces.jsonl").write_text("{not json\n" + json.dumps(first) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"gate/traces\.jsonl:1: truncated or corrupt JSON"):
        read_run(broken.parent)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no trace files"):
        read_run(tmp_path / "empty")


def test_cli_export(run_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["export", "--run", str(run_dir), "--out", str(tmp_path), "--allow-outside-run-root", "--format", "csv",
                                 "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["episodes"] == 14 and set(record["paths"]["turns"]) == {"csv"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episodes.csv", "turns.csv"]
    bad = runner.invoke(app, ["export", "--run", str(run_dir), "--out", str(tmp_path), "--allow-outside-run-root", "--format", "xlsx"])
    assert bad.exit_code == 1 and "formats: expected some of parquet, csv" in bad.stderr


def test_schema_pages_document_every_column() -> None:
    for table, columns in SCHEMA.items():
        for language in ("en", "zh"):
            frame = schema_frame(table, language)
            assert list(frame["column"]) == [c.name for c in columns]
            assert frame["meaning"].str.len().min() >= 5 and frame["type"].isin(list(PANDAS_DTYPES)).all()
    assert "奖励" in schema_frame("episodes", "zh").set_index("column").loc["r_strict", "meaning"]


def test_report_data_pages_link_every_file(run_dir: Path, tmp_path: Path) -> None:
    root = run_dir.parent
    data = export_report_data(root, ["round-*", "round-7/steps/*", "nothing-*"], tmp_path / "data",
                              echo=lambda line: None)
    assert [(run.name, run.episodes) for run in data.runs] == [("round-7", 14)]  # the nested match is inside
    data.copy_into(tmp_path / "_site")
    page = tmp_path / "_site" / "report" / "en" / "data.html"
    for language in ("en", "zh"):
        text = (tmp_path / "data" / f"runs.{language}.md").read_text(encoding="utf-8")
        links = re.findall(r"\]\((\.\./\.\./data/[^)]+)\)", text)
        assert len(links) == 4 and all((page.parent / link).resolve().is_file() for link in links)
        schema = (tmp_path / "data" / f"schema-turns.{language}.md").read_text(encoding="utf-8")
        assert schema.count("\n") == len(SCHEMA["turns"]) + 2
    assert "轮次数" in (tmp_path / "data" / "runs.zh.md").read_text(encoding="utf-8")
    empty = export_report_data(root, ["nothing-*"], tmp_path / "none", echo=lambda line: None)
    assert not empty.runs and "`nothing-*`" in (tmp_path / "none" / "runs.en.md").read_text(encoding="utf-8")


@pytest.mark.e2e
def test_skill1_round_rollouts(tmp_path: Path, small_store_root: Path) -> None:
    """A one-step Skill1 round of the untrained organism: its records carry the trace under ``trace``."""
    from test_skill1_round import skill1_params

    from intraskill.pipeline.round import run_round

    params = skill1_params(tmp_path)
    params = params.model_copy(update={"round": params.round.model_copy(update={"rollout_steps": 1})})
    run_round(params, 0, out_dir=tmp_path / "skill1-round", store_root=small_store_root, progress=False)
    tables = read_run(tmp_path / "skill1-round")
    assert tables.files == ("steps/step-0001/skill1_episodes.jsonl",)
    episodes = pd.DataFrame(tables.episodes)
    assert len(episodes) == 4 and set(episodes["split"]) == {"train"}
    injected = episodes[episodes["n_skills"] > 0]
    assert len(injected) > 0, episodes[["episode_id", "n_skills"]]
    assert all(ids.startswith("skill1-") for ids in injected["skill_ids"])
    descs = {skill["desc"] for skill in json.loads((tmp_path / "seeds.json").read_text(encoding="utf-8"))}
    assert set(injected["skill_titles"]) <= descs
