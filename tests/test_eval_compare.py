"""Paired run comparison: alignment checks, bootstrap CIs, transitions, files and the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from intraskill.agent.traces import read_traces
from intraskill.cli import app
from intraskill.evaluate.bootstrap import paired_bootstrap_ci
from intraskill.evaluate.compare import AlignmentError, compare_runs, write_comparison
from intraskill.evaluate.records import PairedComparison
from intraskill.evaluate.runner import run_eval
from intraskill.params import params_from_dict
from intraskill.skills.bank import Skill, SkillBank, save_skillbank
from intraskill.skills.library import LibraryStore

PARAMS: dict[str, Any] = {
    "experiment": {"name": "compare-test", "seed": 7, "run_root": "runs"},
    "store": {"scale": "small", "seed": 11},
    "model": {"spec": "expert", "device": "cpu"},
    "sampling": {"temperature": 1.0, "max_tokens_per_turn": 48, "max_turns": 30},
    "evaluation": {"repeats": 1, "task_limit": 10, "bootstrap_samples": 1000},
}


def _run(tmp_path: Path, store: Path, name: str, spec: str = "expert", skills: Any = None,
         limit: int = 10) -> Path:
    data = {**PARAMS, "model": {**PARAMS["model"], "spec": spec},
            "experiment": {**PARAMS["experiment"], "run_root": str(tmp_path / "runs")}}
    run_eval(params_from_dict(data), "val", None, skills, tmp_path / name, progress=False, limit=limit,
             store_root=store)
    return tmp_path / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, small_store_root: Path) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("compare-runs")
    bank = SkillBank("test-v1", (Skill("chunk-a", "### A\n\n- Applies when: x"),))
    bank_path = save_skillbank(bank, tmp / "bank.json")
    return {
        "full": _run(tmp, small_store_root, "full"),
        "ablated": _run(tmp, small_store_root, "ablated", "expert:without:read_persona"),
        "equipped": _run(tmp, small_store_root, "equipped", skills=bank_path),
        "short": _run(tmp, small_store_root, "short", limit=8),
    }


def test_cross_checkpoint_comparison(runs: dict[str, Path], tmp_path: Path) -> None:
    result = compare_runs(runs["ablated"], runs["full"], kind="cross-checkpoint", samples=500)
    assert result.schema_version == "shopsimrl-paired-run-comparison-v1"
    assert result.alignment.plan.status == "matched"
    assert "model" not in result.alignment.plan.checked_fields
    assert result.alignment.traces.pairs == 10
    paired = result.paired
    assert paired.difference_direction == "b_minus_a"
    assert paired.metric_aggregation == "mean_of_task_level_values"
    assert paired.bootstrap.to_dict() == {"method": "task_level_paired_percentile", "samples": 500,
                                          "seed": 20260901, "confidence_level": 0.95}
    expected = {"reward", "r_att", "r_loose", "r_option", "r_price", "r_strict", "r_success", "r_type",
                "steps", "actions", "protocol_error_rate", "policy_failure_rate", "invalid_action_rate",
                "prompt_tokens", "completion_tokens", "total_tokens", "duration_ms"}
    assert set(paired.metrics) == expected
    for metric, row in paired.metrics.items():
        low, high = row.confidence_interval
        assert low <= row.mean_difference <= high and row.pairs == 10, metric
    assert sum(paired.success_transitions.values()) == paired.pairs == 10
    a = {t.task_id: t.reward for t in read_traces(runs["ablated"] / "traces.jsonl")}
    b = {t.task_id: t.reward for t in read_traces(runs["full"] / "traces.jsonl")}
    tasks = [task for task, _ in json.loads((runs["full"] / "plan.json").read_text())["jobs"]]
    direct = paired_bootstrap_ci([a[t].reward for t in tasks], [b[t].reward for t in tasks], "reward",
                                 samples=500)
    assert result.metric("reward").confidence_interval == tuple(direct.ci95)
    success = {label: result.absolute[label].primary.success_rate for label in ("a", "b")}
    assert result.metric("r_success").mean_difference == pytest.approx(success["b"] - success["a"])
    json_path, md_path = write_comparison(result, tmp_path / "out")
    stored = json.loads(json_path.read_text())
    assert stored["paired"]["pairs"] == 10 and stored["paired"]["metrics"]["reward"]["confidence_interval"] == \
        list(direct.ci95)  # the file keeps the release's shape
    assert PairedComparison.read(json_path) == result
    assert md_path.read_text().count("\n| ") == len(expected) + 1


def test_same_checkpoint_requires_the_same_model_and_a_bare_reference(runs: dict[str, Path]) -> None:
    with pytest.raises(AlignmentError, match="model"):
        compare_runs(runs["ablated"], runs["full"], kind="same-checkpoint", samples=200)
    result = compare_runs(runs["full"], runs["equipped"], kind="same-checkpoint", samples=200)
    traces = result.alignment.traces
    assert traces.a_skill_ids == [] and traces.b_skill_ids == ["chunk-a"] and traces.a_bare_episodes is None
    assert "model" in result.alignment.plan.checked_fields
    with pytest.raises(AlignmentError, match="must be bare"):
        compare_runs(runs["equipped"], runs["full"], kind="same-checkpoint", samples=200)


def test_different_task_sets_are_misaligned(runs: dict[str, Path]) -> None:
    with pytest.raises(AlignmentError, match="jobs"):
        compare_runs(runs["full"], runs["short"], kind="same-checkpoint", samples=200)


@pytest.mark.e2e
def test_cli_eval_and_compare(tmp_path: Path, small_store_root: Path) -> None:
    run_root = tmp_path / "runs"
    (run_root / "store").mkdir(parents=True)
    (run_root / "store" / "small-11").symlink_to(small_store_root, target_is_directory=True)
    params = {**PARAMS, "model": {"spec": "organism", "device": "cpu"},
              "experiment": {**PARAMS["experiment"], "run_root": str(run_root)}}
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params), encoding="utf-8")
    runner = CliRunner()
    outputs = []
    for name, model, limit in (("a", "expert:without:page_on,read_persona", ["--set", "evaluation.task_limit=5"]),
                               ("b", "expert", ["--limit", "5"])):  # --limit is the same task limit
        result = runner.invoke(app, ["eval", "--params", str(params_path), "--split", "val", "--skills",
                                     "none", "--out", str(tmp_path / name), "--allow-outside-run-root", "--set", f"model.spec={model}",
                                     *limit, "--no-progress", "--json"])
        assert result.exit_code == 0, result.output
        outputs.append(json.loads(result.stdout))
    assert outputs[1]["counts"]["completed"] == 5 and set(outputs[1]["primary"]) == {
        "reward_mean", "reward_sem", "success_rate"}
    assert 0 <= outputs[1]["behavior"]["protocol_error_rate"] <= 1
    text = runner.invoke(app, ["eval", "--params", str(params_path), "--split", "val", "--skills", "none", "--out",
                               str(tmp_path / "b"), "--allow-outside-run-root", "--set", "model.spec=expert",
                               "--limit", "5", "--no-progress"])  # resumes the finished run: its summary
    assert text.exit_code == 0 and "episodes: 5 scored of 5 requested (100.0 %)" in text.stdout, text.output
    success = f"success: {100 * outputs[1]['primary']['success_rate']:.1f} %"
    assert success in text.stdout and re.search(r"protocol errors: \d+\.\d % of \d+ model turns", text.stdout)
    one = runner.invoke(app, ["eval", "--params", str(params_path), "--split", "val", "--skills", "none", "--out",
                              str(tmp_path / "one"), "--allow-outside-run-root", "--set", "model.spec=expert",
                              "--limit", "1", "--no-progress"])
    assert one.exit_code == 0 and "(± — s.e.)" in one.stdout, one.output  # one episode: no standard error
    result = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json",
                                 "--kind", "cross-checkpoint", "--samples", "200"])
    assert result.exit_code == 0, result.output
    comparison = json.loads(result.stdout)
    assert comparison["paired"]["pairs"] == 5 and (tmp_path / "b" / "comparison.md").is_file()
    refused = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--samples", "200"])
    assert refused.exit_code == 1 and "model" in refused.output and "--kind cross-checkpoint" in refused.output
    bad = runner.invoke(app, ["eval", "--params", str(params_path), "--split", "holdout", "--skills", "none",
                              "--out", str(tmp_path / "c"), "--allow-outside-run-root"])
    assert bad.exit_code != 0 and "--split" in bad.output
    unknown = runner.invoke(app, ["eval", "--params", str(params_path), "--split", "val", "--skills", "none",
                                  "--out", str(tmp_path / "c"), "--allow-outside-run-root", "--set", "grpo.lrr=1"])
    assert unknown.exit_code == 1 and "grpo.lrr" in unknown.stderr and "Traceback" not in unknown.output
    untrained = runner.invoke(app, ["eval", "--params", str(params_path), "--split", "val", "--skills", "none",
                                    "--out", str(tmp_path / "c"), "--allow-outside-run-root", "--set", "model.spec=smollm2",
                                    "--set", "model.checkpoint=untrained"])
    assert untrained.exit_code == 1 and "model" in untrained.stderr and "untrained" in untrained.stderr


@pytest.mark.e2e
def test_cli_eval_deploys_a_skill1_library(tmp_path: Path, small_store_root: Path) -> None:
    """``eval --library`` runs Skill1's deployed path (query, retrieval, rank, act) with the real encoder; it pairs
    with the bare run by task and seed, and bad combinations are refused in one line."""
    run_root = tmp_path / "runs"
    (run_root / "store").mkdir(parents=True)
    (run_root / "store" / "small-11").symlink_to(small_store_root, target_is_directory=True)
    params = {**PARAMS, "model": {"spec": "expert", "device": "cpu"}, "skill1": {"top_k": 2},
              "experiment": {**PARAMS["experiment"], "run_root": str(run_root)}}
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params), encoding="utf-8")
    with LibraryStore.open(tmp_path / "library") as store:
        store.library.seed("buying clothes in a given size", "Action Insight: pick the size | Navigation Insight: -")
        store.library.seed("buying under a price limit", "Action Insight: check the price | Navigation Insight: -")
        store.commit(0)
    snapshot = tmp_path / "library" / "snapshot.json"
    runner = CliRunner()
    common = ["eval", "--params", str(params_path), "--split", "val", "--set", "evaluation.task_limit=4",
              "--no-progress", "--json"]
    bare = runner.invoke(app, [*common, "--skills", "none", "--out", str(tmp_path / "bare"), "--allow-outside-run-root"])
    deployed = runner.invoke(app, [*common, "--skills", "none", "--library", str(snapshot),
                                   "--out", str(tmp_path / "deployed"), "--allow-outside-run-root"])
    assert bare.exit_code == 0 and deployed.exit_code == 0, deployed.output
    plan = json.loads((tmp_path / "deployed" / "plan.json").read_text(encoding="utf-8"))
    assert plan["skills"]["provider"] == "skill1-library" and plan["skills"]["skill_ids"] == ["skill1-0", "skill1-1"]
    traces = read_traces(tmp_path / "deployed" / "traces.jsonl")
    selected = [[skill["skill_id"] for skill in t.provenance["selected_skills"]] for t in traces]
    assert len(traces) == 4 and all(ids in (["skill1-0"], ["skill1-1"]) for ids in selected), selected

    def jobs(run: str) -> set[tuple[int, int]]:
        return {(t.task_id, t.provenance["seeds"]["episode_seed"]) for t in read_traces(tmp_path / run / "traces.jsonl")}

    assert jobs("deployed") == jobs("bare")
    both = runner.invoke(app, [*common, "--skills", str(snapshot), "--library", str(snapshot),
                               "--out", str(tmp_path / "x"), "--allow-outside-run-root"])
    assert both.exit_code == 1 and "--skills none" in both.output
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{", encoding="utf-8")
    broken = runner.invoke(app, [*common, "--skills", "none", "--library", str(corrupt), "--out", str(tmp_path / "y"), "--allow-outside-run-root"])
    assert broken.exit_code == 1 and "corrupt.json" in broken.output and "Traceback" not in broken.output
