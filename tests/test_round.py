"""A training round on the ci parameter set with a random-init organism: commit order, resume, outputs."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from intraskill.jsonl import JsonlError, read_jsonl
from intraskill.layout import RoundDir
from intraskill.params import Params, ParamsError, load_params, params_from_dict
from intraskill.paths import project_root
from intraskill.pipeline.round import RoundPlanMismatchError, run_round
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.curriculum import build_curriculum

EXPECTED_KEYS = [
    "round", "step",
    "rollout/shopsim/reward_mean", "rollout/shopsim/success_rate", "rollout/shopsim/scored_rate",
    "rollout/shopsim/skill_free_group_rate", "rollout/shopsim/assisted_empty_group_rate",
    "rollout/shopsim/skills_per_assisted_group_mean", "rollout/shopsim/all_wrong_group_rate",
    "rollout/shopsim/full_skill_retry_rate", "rollout/shopsim/train_group_count",
    "rollout/shopsim/zero_std_group_drop_rate", "rollout/shopsim/chunk/tidy/inclusion_rate",
    "rollout/shopsim/chunk/tidy/target_rho", "rollout/dynamic_filter/drop_shopsim_zero_std_group",
    "train/loss", "train/pg_clipfrac", "train/ppo_kl", "train/entropy_loss", "train/grad_norm", "train/lr",
    "time/rollout_s", "time/retry_s", "time/train_s", "time/io_s",
]


class Killed(BaseException):
    """A simulated kill (not an Exception, so nothing on the way swallows it)."""


@pytest.fixture(scope="module")
def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("round-runs")


def ci_params(run_root: Path, sampling: Mapping[str, Any] | None = None, **round_overrides: Any) -> Params:
    """``params/ci.yaml`` with the run root (hence the organism cache) under ``run_root``."""
    data = load_params(project_root() / "params" / "ci.yaml").model_dump(mode="json")
    data["experiment"]["run_root"] = str(run_root)
    data["round"].update(round_overrides)
    data["sampling"].update(sampling or {})
    return params_from_dict(data)


# The kill tests use the smallest round that still has two steps, retries and a spare group.
SMALL_ROUND = {"n_samples_per_prompt": 2, "rollout_batch_size": 1, "over_sampling_batch_size": 2, "val_tasks": 0}


def bank_curriculum(params: Params):
    skills = (Skill("tidy", "### Be tidy\n- Click only listed values.", metadata={"estimated_effect": 0.05}),
              Skill("budget", "### Budget\n- Compare prices.", metadata={"estimated_effect": 0.01}))
    r = params.round
    return build_curriculum(SkillBank("ci-1", skills), round_id="round-000", skill_free_probability=r.q,
                            rho_min=r.rho_min, rho_max=r.rho_max, seed=r.curriculum_seed)


def episode_ids(root: Path) -> list[str]:
    return [t["episode_id"] for path in sorted(root.glob("steps/*/traces.jsonl")) for t in read_jsonl(path)]


@pytest.mark.e2e
def test_real_round_trains_saves_and_compares(run_root: Path, small_store_root: Path) -> None:
    from transformers import AutoModelForCausalLM

    from intraskill.policy.factory import build_policy

    params = ci_params(run_root)
    policy = build_policy(params.model, None, store=params.store, experiment=params.experiment)[0]
    initial = {k: v.clone() for k, v in policy.model.state_dict().items()}
    result = run_round(params, 0, curriculum=bank_curriculum(params), out_dir=run_root / "real",
                       store_root=small_store_root, progress=False)
    rows = read_jsonl(result.root / "metrics.jsonl")
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        assert [key for key in EXPECTED_KEYS if key not in row] == []
        assert row["rollout/shopsim/train_group_count"] == 2
        assert row["rollout/shopsim/group_count"] == 4
    trained = AutoModelForCausalLM.from_pretrained(str(result.model_dir)).state_dict()
    changed = [name for name, tensor in initial.items() if not tensor.equal(trained[name])]
    # a random init never buys, so every advantage is 0 and only AdamW's decay moves the matrices
    assert "model.embed_tokens.weight" in changed and len(changed) >= 16
    assert all(row["train/grad_norm"] == 0.0 and row["rollout/shopsim/reward_mean"] == 0.0 for row in rows)
    for name in ("optimizer.pt", "rng.pt", "state.json"):
        assert (result.checkpoint / name).is_file()
    paired = result.comparison.paired
    assert paired.pairs == 4 and "r_success" in paired.metrics
    assert (result.root / "val-compare" / "comparison.json").is_file()
    assert RoundDir(result.root).finished_steps() == [1, 2]
    assert len(read_jsonl(result.root / "triage.jsonl")) == 8
    # a finished round re-runs as a no-op
    again = run_round(params, 0, curriculum=bank_curriculum(params), out_dir=run_root / "real",
                      store_root=small_store_root, progress=False)
    assert [row.to_dict() for row in again.metrics] == rows


class KillAt:
    """Raises :class:`Killed` at the ``count``-th occurrence of event ``name``."""

    def __init__(self, name: str, count: int = 1) -> None:
        self.name, self.count, self.fired = name, count, False

    def __call__(self, name: str, info: Mapping[str, Any]) -> None:
        if name == self.name:
            self.count -= 1
            if self.count == 0:
                self.fired = True
                raise Killed(name)


@pytest.mark.e2e
def test_resume_after_kills_keeps_every_episode_once(run_root: Path, small_store_root: Path) -> None:
    params = ci_params(run_root, {"max_tokens_per_turn": 16}, **SMALL_ROUND)
    curriculum = bank_curriculum(params)
    reference = run_round(params, 0, curriculum=curriculum, out_dir=run_root / "reference",
                          store_root=small_store_root, progress=False)
    root = run_root / "killed"
    kills = [
        KillAt("step-start"),          # before any episode
        KillAt("episode", 2),          # mid-wave: 2 of the 4 episodes of step 1 recorded
        KillAt("admitted"),            # after admission, before the update
        KillAt("trained"),             # after the update and checkpoint, before metrics and marker
        KillAt("metrics"),             # step 1 resumed: metrics written, marker missing
        KillAt("episode", 5),          # step 2: its 4 episodes and 1 of 2 retries recorded
    ]
    for kill in kills:
        with pytest.raises(Killed):
            run_round(params, 0, curriculum=curriculum, out_dir=root, store_root=small_store_root,
                      progress=False, on_event=kill)
        assert kill.fired
        ids = episode_ids(root)
        assert len(ids) == len(set(ids)), f"duplicated episodes after the kill at {kill.name}"
        if kill is kills[1]:
            assert len(read_jsonl(root / "steps" / "step-0001" / "traces.jsonl")) == 2
        if kill is kills[-1]:
            assert len(read_jsonl(root / "steps" / "step-0002" / "traces.jsonl")) == 4
            assert len([r for r in read_jsonl(root / "retries.jsonl") if "group-00001" in r["episode_id"]]) == 2
            assert len([r for r in read_jsonl(root / "retries.jsonl") if "group-00002" in r["episode_id"]]) == 1
    result = run_round(params, 0, curriculum=curriculum, out_dir=root, store_root=small_store_root, progress=False)
    assert sorted(episode_ids(root)) == sorted(episode_ids(reference.root))
    assert Counter(episode_ids(root)).most_common(1)[0][1] == 1
    assert [row.step for row in result.metrics] == [1, 2]
    triage = [t["group_index"] for t in read_jsonl(root / "triage.jsonl")]
    assert sorted(triage) == sorted(t["group_index"] for t in read_jsonl(reference.root / "triage.jsonl"))
    assert len(triage) == len(set(triage))
    retries = [r["episode_id"] for r in read_jsonl(root / "retries.jsonl")]
    assert sorted(retries) == sorted(r["episode_id"] for r in read_jsonl(reference.root / "retries.jsonl"))
    assert len(retries) == len(set(retries))
    assert [r["admitted_groups"] for r in _rollouts(root)] == [r["admitted_groups"] for r in _rollouts(reference.root)]
    with pytest.raises(RoundPlanMismatchError, match="round"):
        run_round(ci_params(run_root, {"max_tokens_per_turn": 16}, **{**SMALL_ROUND, "rollout_steps": 3}), 0,
                  curriculum=curriculum, out_dir=root, store_root=small_store_root, progress=False)


def _rollouts(root: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(path.read_text()) for path in sorted(root.glob("steps/*/rollout.json"))]


def test_round_params_errors_name_the_field(run_root: Path) -> None:
    data = ci_params(run_root).model_dump(mode="json")
    data["round"]["over_sampling_batch_size"] = 1
    with pytest.raises(ParamsError, match="round"):
        params_from_dict(data)
    data = ci_params(run_root).model_dump(mode="json")
    data["grpo"]["global_batch_size"] = 3
    with pytest.raises(ParamsError, match="grpo.global_batch_size"):
        params_from_dict(data)
    data = ci_params(run_root).model_dump(mode="json")
    data["round"]["q"] = 1.5
    with pytest.raises(ParamsError, match=r"round\.q"):
        params_from_dict(data)


def test_round_zero_draws_do_not_depend_on_the_run_directory(tmp_path: Path) -> None:
    from intraskill.pipeline.prepare import prepare_round

    params = load_params(project_root() / "params" / "organism.yaml")
    near = prepare_round(params, 0, tmp_path / "a")
    far = prepare_round(params, 0, tmp_path / "elsewhere" / "b")
    assert near.curriculum is not None and far.curriculum is not None
    assert near.curriculum.source["skillbank_path"] == "skillbank.json"
    assert near.curriculum.state_id == far.curriculum.state_id
    assert (tmp_path / "elsewhere" / "b" / "skillbank.json").is_file()


@pytest.mark.e2e
def test_a_damaged_checkpoint_or_record_is_refused_naming_the_file(run_root: Path, small_store_root: Path) -> None:
    import shutil

    from intraskill.training.checkpoint import CheckpointError

    params = ci_params(run_root, {"max_tokens_per_turn": 16}, **{**SMALL_ROUND, "rollout_steps": 1})
    trained = run_round(params, 0, out_dir=run_root / "intact", store_root=small_store_root, progress=False)
    assert run_round(params, 0, out_dir=trained.root, store_root=small_store_root, progress=False).metrics
    weights = next((trained.checkpoint / "model").glob("*.safetensors")).relative_to(trained.root)
    damages = {"checkpoint/state.json": lambda path: path.unlink(), str(weights): _flip_last_byte,
               "checkpoint/optimizer.pt": _flip_last_byte}
    for name, damage in damages.items():
        root = run_root / f"damaged-{Path(name).stem}"
        shutil.copytree(trained.root, root)
        damage(root / name)
        with pytest.raises(CheckpointError, match=re.escape(str(root / name))):
            run_round(params, 0, out_dir=root, store_root=small_store_root, progress=False)
    root = run_root / "no-checkpoint"
    shutil.copytree(trained.root, root)
    shutil.rmtree(root / "checkpoint")
    with pytest.raises(CheckpointError, match="state.json is missing"):
        run_round(params, 0, out_dir=root, store_root=small_store_root, progress=False)
    edits = {"metrics.jsonl": ('"step": 1', '"step": 2'),
             "steps/step-0001/traces.jsonl": ('"episode_id": "', '"episode_id": "x')}
    for name, (old, new) in edits.items():  # a record edited by hand is refused on resume, naming file and line
        root = run_root / f"edited-{Path(name).stem}"
        shutil.copytree(trained.root, root)
        text = (root / name).read_text(encoding="utf-8")
        assert old in text.splitlines()[0]
        (root / name).write_text(text.replace(old, new, 1), encoding="utf-8")
        with pytest.raises(JsonlError, match=re.escape(f"{root / name}:1: record does not match")):
            run_round(params, 0, out_dir=root, store_root=small_store_root, progress=False)


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def test_an_explicit_checkpoint_with_the_s0_bank_uses_its_warm_start_or_is_refused(tmp_path: Path) -> None:
    from intraskill.params import with_overrides
    from intraskill.pipeline.prepare import prepare_round

    params = load_params(project_root() / "params" / "organism.yaml")
    default = prepare_round(params, 0, tmp_path / "default")
    assert default.curriculum is not None and default.warmstart_dir is not None
    explicit = with_overrides(params, [f"model.checkpoint={default.checkpoint}"])
    chosen = prepare_round(explicit, 0, tmp_path / "explicit")
    assert chosen.checkpoint == default.checkpoint and chosen.curriculum is not None
    assert chosen.curriculum.state_id == default.curriculum.state_id
    bare = tmp_path / "bare-weights"
    bare.mkdir()
    with pytest.raises(ValueError, match=rf"model.checkpoint {bare} is not a warm start's checkpoint.*persona-query"):
        prepare_round(with_overrides(params, [f"model.checkpoint={bare}"]), 0, tmp_path / "refused")
