"""TRL's GRPOTrainer on the store: the rollout_func's prompts, groups and token streams, and one real
GRPOTrainer step of the organism's warm start through it (skipped without the trl extra)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import RuntimeConfig
from intraskill.chat.base import SessionTokens
from intraskill.integrations.trl.rollout import (
    StoreRollout,
    prompt_task_id,
    split_session,
    store_reward,
    task_prompt,
)
from intraskill.params import Params, load_params, params_from_dict
from intraskill.pipeline.prepare import prepare_round

ROOT = Path(__file__).resolve().parents[1]
WARM_START = ROOT / "params" / "organism_warmstart" / "checkpoint"


def organism_params(**round_fields: Any) -> Params:
    """``params/organism.yaml`` with ``round_fields`` replaced."""
    data = load_params(ROOT / "params" / "organism.yaml").model_dump(mode="json")
    data["round"].update(round_fields)
    return params_from_dict(data)


def rollout(engine: Any, params: Params, **kwargs: Any) -> StoreRollout:
    return StoreRollout(lambda: InProcessEnvironment(engine),
                        RuntimeConfig.from_params(params.sampling, params.store, params.model),
                        seed=params.experiment.seed, **kwargs)


def test_a_prompt_names_one_task() -> None:
    assert prompt_task_id(task_prompt(42)) == 42
    for bad in ("store task", "store task -1", "task 3", [{"role": "user", "content": "store task 3"}]):
        with pytest.raises(ValueError, match="prompt: expected 'store task <id>'"):
            prompt_task_id(bad)


def test_a_session_splits_at_its_first_sampled_token() -> None:
    tokens = SessionTokens([5, 6, 7, 8, 9, 10], [0, 0, 1, 1, 0, 1], [0.0, 0.0, -0.5, -0.25, 0.0, -1.0])
    split = split_session(tokens, pad_token_id=0)
    assert split.prompt_ids == [5, 6]
    assert split.completion_ids == [7, 8, 9, 10]
    assert split.logprobs == [-0.5, -0.25, 0.0, -1.0]
    assert split.env_mask == [1, 1, 0, 1]
    nothing_sampled = split_session(SessionTokens([5, 6], [0, 0], [0.0, 0.0]), pad_token_id=0)
    assert nothing_sampled.prompt_ids == [5, 6]
    assert (nothing_sampled.completion_ids, nothing_sampled.env_mask) == ([0], [0])
    assert split_session(None, pad_token_id=3).completion_ids == [3]


def test_groups_share_a_task_and_a_skill_mask(organism_engine: Any, tmp_path: Path) -> None:
    params = organism_params()
    curriculum = prepare_round(params, out_dir=tmp_path).curriculum  # S0 with the warm start's measured α
    store = rollout(organism_engine, params, curriculum=curriculum)
    tasks = organism_engine.train_ids[:6]
    prompts = [task_prompt(task) for task in tasks for _ in range(3)]
    jobs = store.jobs(prompts, 3)
    assert [job.task_id for job in jobs] == [task for task in tasks for _ in range(3)]
    assert [job.sample_id for job in jobs] == [0, 1, 2] * 6
    assert len({job.seed for job in jobs}) == len(jobs)
    groups = [jobs[index:index + 3] for index in range(0, len(jobs), 3)]
    for group in groups:
        assert len({tuple(skill.skill_id for skill in job.skills) for job in group}) == 1
    assert any(group[0].skills for group in groups), "the S0 curriculum puts chunks in some group's prompt"
    with pytest.raises(ValueError, match="do not form groups of num_generations=4"):
        store.jobs(prompts, 4)
    with pytest.raises(ValueError, match="group 0 mixes prompts"):
        store.jobs([task_prompt(tasks[0]), task_prompt(tasks[1])], 2)


def test_store_reward_hands_back_the_episode_rewards() -> None:
    assert store_reward(["a", "b"], r_strict=[1.0, None]) == [1.0, None]
    with pytest.raises(ValueError, match="r_strict: 1 rewards for 2 completions"):
        store_reward(["a", "b"], r_strict=[1.0])


def test_trl_config_follows_the_parameter_set(tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="the trl extra is not installed (pip install 'intraskill[trl]')")
    from intraskill.integrations.trl.recipe import grpo_config

    params = organism_params()  # 2 groups of 8 per step, one update per step
    config = grpo_config(params, tmp_path, steps=3)
    assert (config.num_generations, config.per_device_train_batch_size) == (8, 8)
    assert (config.steps_per_generation, config.gradient_accumulation_steps, config.max_steps) == (2, 2, 3)
    assert (config.learning_rate, config.epsilon, config.epsilon_high, config.beta) == (2.0e-4, 0.2, 0.28, 0.0)
    assert (config.temperature, config.loss_type, config.shuffle_dataset) == (0.6, "dapo", False)
    data = params.model_dump(mode="json")
    data["grpo"]["global_batch_size"] = 8  # two updates of one group per rollout step
    config = grpo_config(params_from_dict(data), tmp_path, steps=3)
    assert (config.gradient_accumulation_steps, config.steps_per_generation, config.max_steps) == (1, 2, 6)
    with pytest.raises(ValueError, match="steps: must be >= 1"):
        grpo_config(params, tmp_path, steps=0)


@pytest.mark.e2e
def test_grpo_trainer_trains_the_organism_on_store_episodes(organism_engine: Any, tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="the trl extra is not installed (pip install 'intraskill[trl]')")
    import torch

    from intraskill.integrations.trl.recipe import build_trainer

    params = organism_params(n_samples_per_prompt=4, rollout_batch_size=2)
    store = rollout(organism_engine, params)
    # weight_decay 0: the weights move only if the store's rewards gave a gradient
    trainer = build_trainer(params, WARM_START, store, organism_engine.train_ids[:2], tmp_path / "trl", steps=1,
                            weight_decay=0.0)
    assert type(trainer.model).__name__ == "Qwen3ForCausalLM"
    before = {name: value.clone() for name, value in trainer.model.state_dict().items()}
    trainer.train()

    assert [result.task_id for result in store.results] == [organism_engine.train_ids[0]] * 4 + \
        [organism_engine.train_ids[1]] * 4
    assert all(result.scored and result.termination_reason for result in store.results)
    rewards = [result.reward.r_strict for result in store.results]
    logged = trainer.state.log_history[0]
    assert logged["rewards/store_reward/mean"] == pytest.approx(sum(rewards) / len(rewards), abs=1e-6)
    assert logged["frac_reward_zero_std"] < 1.0, "some group's episodes differ in reward"
    assert logged["grad_norm"] > 0.0
    changed = [name for name, value in trainer.model.state_dict().items() if not torch.equal(before[name], value)]
    assert changed, "one GRPOTrainer step on store rewards changes the weights"
    assert store.stats[0].episodes == 8 and store.stats[0].sampled_tokens > 0


@pytest.mark.e2e
def test_the_recipe_trains_through_openenv_with_the_engines_episodes(organism_engine: Any, small_store: Any,
                                                                      tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="the trl extra is not installed (pip install 'intraskill[trl]')")
    pytest.importorskip("openenv.core", reason="the openenv extra is not installed (pip install 'intraskill[openenv]')")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from intraskill.integrations.openenv.server import create_openenv_app, uvicorn_options
    from intraskill.integrations.trl.recipe import build_trainer, store_rollout
    from intraskill.shop.service import serve_in_thread

    params = organism_params(n_samples_per_prompt=4, rollout_batch_size=2)
    tasks = organism_engine.train_ids[:2]
    # trusted mode: the traces keep the private goal, as in process
    with serve_in_thread(create_openenv_app(organism_engine, small_store[2], slots=8, reveal_goal=True),
                         **uvicorn_options()) as server:
        served = store_rollout(params, env_url=server.base_url)
        trainer = build_trainer(params, WARM_START, served, tasks, tmp_path / "trl", steps=1)
        trainer.train()
    assert trainer.state.log_history[0]["grad_norm"] > 0.0, "the served store's rewards gave a gradient"
    assert served.stats[0].store_calls > 16 and all(result.scored for result in served.results)

    # the same episodes, played by the same warm start against the engine in this process
    model, tokenizer = AutoModelForCausalLM.from_pretrained(WARM_START), AutoTokenizer.from_pretrained(WARM_START)
    stand_in = SimpleNamespace(accelerator=SimpleNamespace(unwrap_model=lambda m: m), model=model.train(),
                               num_generations=4, processing_class=tokenizer)
    local = store_rollout(params, organism_engine)
    local([task_prompt(task) for task in tasks for _ in range(4)], stand_in)
    assert [r.session_tokens.input_ids for r in served.results] == [r.session_tokens.input_ids for r in local.results]
    def outcome(result: Any) -> tuple[Any, ...]:
        return result.reward, result.reward_detail, result.termination_reason, result.trace.private_goal

    assert [outcome(r) for r in served.results] == [outcome(r) for r in local.results]
    with pytest.raises(ValueError, match="exactly one"):
        store_rollout(params)


@pytest.mark.e2e
def test_the_trl_verb_trains_and_saves_a_model(small_store_root: Path, tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="the trl extra is not installed (pip install 'intraskill[trl]')")
    import json

    from typer.testing import CliRunner

    from intraskill.cli import app

    (tmp_path / "runs" / "store").mkdir(parents=True)
    (tmp_path / "runs" / "store" / "small-11").symlink_to(small_store_root, target_is_directory=True)
    tiny = ["--set", "store.scale=small", "--set", "store.seed=11", "--set", f"experiment.run_root={tmp_path / 'runs'}",
            "--set", "round.n_samples_per_prompt=2", "--set", "round.rollout_batch_size=1",
            "--set", "round.over_sampling_batch_size=1"]
    runner = CliRunner()
    result = runner.invoke(app, ["trl", "--params", str(ROOT / "params" / "organism.yaml"), "--steps", "1",
                                 "--model", str(WARM_START), "--out", str(tmp_path / "trl"), "--allow-outside-run-root", "--no-progress",
                                 "--json", *tiny])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["steps"] == 1 and summary["store"] == "in process" and len(summary["reward_per_step"]) == 1
    assert summary["per_step"][0]["episodes"] == 2 and (tmp_path / "trl" / "model" / "config.json").is_file()
    bad = runner.invoke(app, ["trl", "--model", str(tmp_path), "--out", str(tmp_path / "x"), "--allow-outside-run-root"])
    assert bad.exit_code == 1 and "--model" in bad.stderr and "config.json" in bad.stderr
    if importlib.util.find_spec("openenv") is not None:
        unserved = runner.invoke(app, ["trl", "--params", str(ROOT / "params" / "organism.yaml"), "--steps", "1",
                                       "--model", str(WARM_START), "--env-url", "http://127.0.0.1:9", "--out", str(tmp_path / "y"), "--allow-outside-run-root", *tiny])
        assert unserved.exit_code == 1 and "env_url: no OpenEnv store answers" in unserved.stderr
        assert "Traceback" not in unserved.output
