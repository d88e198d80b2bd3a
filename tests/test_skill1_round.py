"""A Skill1 round on the ci parameter set: the untrained organism, the real MiniLM encoder, the small store."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from intraskill.jsonl import read_jsonl
from intraskill.layout import RoundDir
from intraskill.params import Params, load_params, params_from_dict
from intraskill.paths import project_root, store_dir
from intraskill.pipeline.round import RoundPlanMismatchError, run_round
from intraskill.pipeline.skill1 import MAX_WAVES

ROUND = {"method": "skill1", "skillbank": None, "n_samples_per_prompt": 2, "rollout_batch_size": 2,
         "over_sampling_batch_size": 2, "rollout_steps": 2, "val_tasks": 0}
SEEDS = [{"desc": "buying clothes in a given colour and size", "strat": "Select every option axis first.",
          "utility": 0.9},
         {"desc": "buying kitchen items under a price limit", "strat": "Compare prices on the results page.",
          "utility": 0.2},
         {"desc": "buying shoes", "strat": "Check the size first."}]
SKILL1_KEYS = ["skill1/library_size", "skill1/admissions", "skill1/evictions", "skill1/selection_precision",
               "skill1/ndcg_mean", "skill1/rerank_advantage_mean", "skill1/u_hat_mean", "skill1/r_distill_mean",
               "skill1/success_with_skill",
               "skill1/success_without_skill", "skill1/protocol_error_rate/query", "skill1/protocol_error_rate/rank",
               "skill1/protocol_error_rate/act", "skill1/protocol_error_rate/distill",
               "rollout/shopsim/success_rate", "train/loss", "time/rollout_s"]


class Killed(BaseException):
    """A simulated kill."""


class KillAt:
    """Raises :class:`Killed` at the ``count``-th event ``name``."""

    def __init__(self, name: str, count: int = 1) -> None:
        self.name, self.count = name, count

    def __call__(self, name: str, info: Mapping[str, Any]) -> None:
        if name == self.name:
            self.count -= 1
            if self.count == 0:
                raise Killed(name)


def skill1_params(tmp_path: Path, **skill1: Any) -> Params:
    """``params/ci.yaml`` shrunk (2 steps of 2 tasks × 2 rollouts, short episodes), Skill1 with a seed library."""
    seeds = tmp_path / "seeds.json"
    seeds.write_text(json.dumps(SEEDS), encoding="utf-8")
    data = load_params(project_root() / "params" / "ci.yaml").model_dump(mode="json")
    data["experiment"]["run_root"] = str(tmp_path / "runs")
    data["round"].update(ROUND)
    data["sampling"].update({"max_turns": 4, "max_tokens_per_turn": 32})
    data["skill1"] = {"top_k": 2, "seed_library": str(seeds), **skill1}
    return params_from_dict(data)


def episode_ids(root: Path) -> list[str]:
    return [r["job"]["episode_id"] for step in RoundDir(root).step_dirs() for r in read_jsonl(step.skill1_episodes)]


@pytest.mark.e2e
def test_skill1_round_commits_resumes_after_kills_and_refuses_another_plan(tmp_path: Path,
                                                                          small_store_root: Path) -> None:
    params = skill1_params(tmp_path)
    root = tmp_path / "round"
    # killed while step 2's rollouts are persisted (2 of 4 written), then after step 2's checkpoint but
    # before its library commit
    for kill in (KillAt("episode", 6), KillAt("trained")):
        with pytest.raises(Killed):
            run_round(params, 0, out_dir=root, store_root=small_store_root, progress=False, on_event=kill)
        ids = episode_ids(root)
        assert len(ids) == len(set(ids))
    assert len(read_jsonl(RoundDir(root).step(2).skill1_episodes)) == 4
    result = run_round(params, 0, out_dir=root, store_root=small_store_root, progress=False)

    assert [row.step for row in result.metrics] == [1, 2]
    for row in (line.to_dict() for line in result.metrics):
        assert [key for key in SKILL1_KEYS if key not in row] == []
        # the untrained organism writes no well-formed reply and never buys: nothing is admitted
        assert row["skill1/library_size"] == 3 and row["skill1/admissions"] == 0
        assert row["skill1/protocol_error_rate/query"] == 1.0 and row["skill1/success_with_skill"] == 0.0
    assert result.metrics[0].rollout["skill1/u_hat_mean"] == pytest.approx(0.9)
    ids = episode_ids(root)
    assert len(ids) == len(set(ids)) == 8
    rollout = json.loads((root / "steps" / "step-0002" / "rollout.json").read_text(encoding="utf-8"))
    assert rollout["method"] == "skill1" and len(rollout["admitted_groups"]) == 2

    # the library: every rollout's K = 2 retrieved skills updated once per step, each step committed once
    history = read_jsonl(RoundDir(root).library.history)
    assert [r["step"] for r in history if r["event"] == "commit"] == [1, 2]
    assert [r["event"] for r in history].count("abort") == 1  # step 2's events before the second kill
    snapshot = json.loads(RoundDir(root).library.snapshot.read_text(encoding="utf-8"))
    assert snapshot["step"] == 2 and sum(skill["uses"] for skill in snapshot["skills"]) == 2 * 4 * 2
    state = json.loads((result.checkpoint / "state.json").read_text(encoding="utf-8"))
    assert state["step"] == 2

    # the CLI selects Skill1 with --set and resumes the round after its last marker is deleted
    import yaml
    from typer.testing import CliRunner

    from intraskill.cli import app

    RoundDir(root).step(2).done.unlink()
    shutil.copytree(small_store_root, store_dir("small", 11, params.experiment.run_root))
    data = params.model_dump(mode="json")
    data["round"]["method"] = "intraskill"
    params_file = tmp_path / "skill1.yaml"
    params_file.write_text(yaml.safe_dump(data), encoding="utf-8")
    cli = CliRunner().invoke(app, ["round", "--params", str(params_file), "--set", "round.method=skill1",
                                   "--out", str(root), "--allow-outside-run-root", "--no-progress", "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout)["steps"] == 2
    assert RoundDir(root).step(2).done.exists()
    assert len(episode_ids(root)) == 8
    assert read_jsonl(root / "metrics.jsonl") == [row.to_dict() for row in result.metrics]
    assert read_jsonl(RoundDir(root).library.history) == history

    with pytest.raises(RoundPlanMismatchError, match="skill1"):
        run_round(skill1_params(tmp_path, top_k=3), 0, out_dir=root, store_root=small_store_root, progress=False)
    with pytest.raises(RoundPlanMismatchError):
        run_round(params.model_copy(update={"round": params.round.model_copy(update={"method": "intraskill"})}), 0,
                  out_dir=root, store_root=small_store_root, progress=False)


def test_skill1_params_refuse_a_skillbank(tmp_path: Path) -> None:
    from intraskill.params import ParamsError

    data = skill1_params(tmp_path).model_dump(mode="json")
    data["round"]["skillbank"] = "params/organism_s0.json"
    with pytest.raises(ParamsError, match="round: skillbank .* must be null for method: skill1"):
        params_from_dict(data)


def test_co_evolution_refuses_a_skill1_round(tmp_path: Path) -> None:
    from intraskill.pipeline.coevolve import co_evolve

    with pytest.raises(ValueError, match="round.method: co-evolution trains with the curriculum"):
        co_evolve(skill1_params(tmp_path), 1, out_dir=tmp_path / "co", progress=False)


@pytest.mark.e2e
def test_paper_settings_round_oversamples_and_weighs_terms(tmp_path: Path, small_store_root: Path) -> None:
    # Every issue-36 option at once: oversampled waves with the zero-variance filter, J_util on r_strict, the
    # per-term objective, the random-order rerank baseline, NDCG@1, the trajectory distillation prompt and a KL
    # term to a frozen copy of the starting weights.
    base = skill1_params(tmp_path, oversample=True, util_reward="strict", objective="term_means",
                         rerank_baseline="random_order", ndcg_cutoff=1, distill_context="trajectory")
    data = base.model_dump(mode="json")
    data["round"].update(rollout_batch_size=1, over_sampling_batch_size=1, rollout_steps=1)
    data["grpo"]["kl_coef"] = 0.01
    params = params_from_dict(data, source="test")
    result = run_round(params, 0, out_dir=tmp_path / "round", store_root=small_store_root, progress=False)
    rollout = json.loads((tmp_path / "round" / "steps" / "step-0001" / "rollout.json").read_text(encoding="utf-8"))
    # the untrained organism never buys: no group varies, so every wave runs (MAX_WAVES × 1 group × 2
    # rollouts, all updating the library) and the step trains on one topped-up group, as the GRPO step would
    assert rollout["episodes"] == 2 * MAX_WAVES and len(rollout["admitted_groups"]) == 1
    # the trainer receives the admitted group's 2 rollouts, not the 2 × MAX_WAVES played
    assert rollout["metrics"]["rollout/shopsim/train_trajectory_count"] == 2
    assert len(set(episode_ids(tmp_path / "round"))) == 2 * MAX_WAVES
    kl_loss = result.metrics[0].train.kl_loss
    assert kl_loss is not None and kl_loss >= 0.0


@pytest.mark.e2e
def test_the_shipped_skill1_warm_start_admits_distilled_skills_and_the_step_names_them(tmp_path: Path) -> None:
    # The untrained organism never admits a skill, so a step record's admitted IDs went untested: the library's
    # integer skill IDs were refused by a record typed for strings (the skill1 arm of a matrix stopped at its
    # first admission). The Skill1 warm start succeeds and distils, so a small step admits some.
    data = load_params(project_root() / "params" / "organism_skill1.yaml").model_dump(mode="json")
    data["experiment"]["run_root"] = str(tmp_path / "runs")
    data["round"].update(rollout_steps=1, rollout_batch_size=6, over_sampling_batch_size=6, n_samples_per_prompt=4,
                         val_tasks=0)
    run_round(params_from_dict(data, source="test"), 0, out_dir=tmp_path / "round", progress=False)
    rollout = json.loads((tmp_path / "round" / "steps" / "step-0001" / "rollout.json").read_text(encoding="utf-8"))
    history = read_jsonl(RoundDir(tmp_path / "round").library.history)
    admitted = [event["skill"]["skill_id"] for event in history if event["event"] == "admit"]
    assert admitted and rollout["admitted_skills"] == admitted
    assert all(isinstance(skill_id, int) for skill_id in rollout["admitted_skills"])
