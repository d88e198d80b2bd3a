"""TRL's ``GRPOTrainer`` on the store, configured from a parameter set (e.g. ``params/organism.yaml``).

:func:`grpo_config` maps the ``grpo``, ``round`` and ``sampling`` sections onto TRL's ``GRPOConfig`` the way the
package's own trainer reads them: a rollout step of ``rollout_batch_size`` groups of ``n_samples_per_prompt``
episodes, one group per micro-batch, an optimizer update per ``global_batch_size`` episodes (``null``: one per
step), AdamW at a constant learning rate, the asymmetric clip, a token mean over the update (TRL's ``dapo``
loss), group-normalized advantages, log-probs at the sampling temperature, no activation checkpointing.
:func:`round_tasks` lists the tasks the package's round draws first at each step (wave 0), so both trainers see
the same tasks; :func:`build_trainer` puts it together with a :class:`~.rollout.StoreRollout`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from transformers.utils.notebook import NotebookProgressCallback
from trl import GRPOConfig, GRPOTrainer

from intraskill.agent.env import Environment, InProcessEnvironment
from intraskill.agent.runtime import RuntimeConfig
from intraskill.integrations.trl.rollout import StoreRollout, store_reward, task_prompt
from intraskill.params import Params
from intraskill.pipeline.rollout import wave_tasks
from intraskill.policy.factory import resolve_device
from intraskill.shop.build import store_config
from intraskill.skills.curriculum import CurriculumState

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def grpo_config(params: Params, output_dir: str | Path, steps: int, **overrides: Any) -> GRPOConfig:
    """TRL's config for ``steps`` rollout steps of ``params`` (``overrides``: any other ``GRPOConfig`` field).

    A rollout step generates ``rollout_batch_size`` groups; ``grpo.global_batch_size`` episodes (``null``: all of
    them) make one optimizer update, so TRL's ``max_steps`` counts ``steps`` × the updates of a step.
    """
    grpo, rounds = params.grpo, params.round
    if steps < 1:
        raise ValueError(f"steps: must be >= 1, got {steps}")
    if grpo.lora is not None:
        raise ValueError("grpo.lora: the recipe trains the whole model; pass peft_config to GRPOTrainer for LoRA")
    group, groups = rounds.n_samples_per_prompt, rounds.rollout_batch_size
    update = grpo.global_batch_size or group * groups  # whole groups dividing a step (the parameters check it)
    settings: dict[str, Any] = {
        "output_dir": str(output_dir),
        "max_steps": steps * (group * groups // update),
        "seed": params.experiment.seed,
        "num_generations": group,
        "per_device_train_batch_size": group,
        "gradient_accumulation_steps": update // group,
        "steps_per_generation": groups,
        "shuffle_dataset": False,
        "temperature": params.sampling.temperature,
        "learning_rate": grpo.lr,
        "lr_scheduler_type": "constant",
        "weight_decay": grpo.weight_decay,
        "adam_beta1": grpo.betas[0],
        "adam_beta2": grpo.betas[1],
        "max_grad_norm": grpo.max_grad_norm or 0.0,
        "epsilon": grpo.eps_low,
        "epsilon_high": grpo.eps_high,
        "beta": grpo.kl_coef,
        "loss_type": "dapo",
        "scale_rewards": "group",
        "model_init_kwargs": {"dtype": params.model.dtype},
        # TRL turns it on by default; the package's trainer keeps activations (pass True for a large model)
        "gradient_checkpointing": False,
        "use_cpu": resolve_device(params.model.device) == "cpu",
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
    }
    return GRPOConfig(**{**settings, **overrides})


def task_dataset(task_ids: Sequence[int]) -> Dataset:
    """The prompt dataset of ``task_ids``, in order (one :func:`~.rollout.task_prompt` each)."""
    if not task_ids:
        raise ValueError("task_ids: no tasks to train on")
    return Dataset.from_dict({"prompt": [task_prompt(task_id) for task_id in task_ids]})


def round_tasks(params: Params, task_ids: Sequence[int], steps: int, round_index: int = 0) -> list[int]:
    """The first ``rollout_batch_size`` tasks of wave 0 at each step of the package's round, step after step."""
    shape = params.round
    return [task for step in range(1, steps + 1)
            for task in wave_tasks(task_ids, params.experiment.seed, round_index, step, 0,
                                   shape.over_sampling_batch_size)[:shape.rollout_batch_size]]


def store_rollout(params: Params, engine: Any = None, curriculum: CurriculumState | None = None,
                  progress: bool = False, env_url: str | None = None) -> StoreRollout:
    """A :class:`~.rollout.StoreRollout` with the runtime of ``params`` over the in-process ``engine``, or over
    the store served as an OpenEnv environment at ``env_url`` (``intraskill env serve --protocol openenv``; the
    ``openenv`` extra), one OpenEnv session per episode, after checking that it serves the parameter set's store
    settings (``intraskill env serve --protocol openenv --params P`` does)."""
    if (engine is None) == (env_url is None):
        raise ValueError("store_rollout: give the in-process engine or an env_url, exactly one")
    if env_url is not None:
        # deferred: the openenv extra is optional and only this path needs it
        from intraskill.integrations.openenv.agent_env import openenv_environments

        served_as = asdict(store_config(params.store))
        del served_as["search_engine"]  # either engine ranks the same
        environments: Callable[[], Environment] = openenv_environments(env_url, served_as)
    else:
        environments = functools.partial(InProcessEnvironment, engine)
    return StoreRollout(environments, RuntimeConfig.from_params(params.sampling, params.store, params.model),
                        seed=params.experiment.seed, curriculum=curriculum, progress=progress)


def build_trainer(
    params: Params,
    model: str | Path | PreTrainedModel,
    rollout: StoreRollout,
    task_ids: Sequence[int],
    output_dir: str | Path,
    steps: int,
    tokenizer: PreTrainedTokenizerBase | None = None,
    print_logs: bool = True,
    **overrides: Any,
) -> GRPOTrainer:
    """TRL's trainer over ``task_ids`` (in order) with the store's rollout and reward.

    ``model`` is a Hugging Face directory (TRL loads it and its tokenizer) or a loaded model with ``tokenizer``.
    ``print_logs=False`` drops the progress bar (a notebook's: an HTML table of the logs) and the printing of each
    log as a Python dict (a notebook shows ``trainer.state.log_history`` as a formatted table instead).
    """
    trainer = GRPOTrainer(model=str(model) if isinstance(model, Path) else model, reward_funcs=[store_reward],
                          args=grpo_config(params, output_dir, steps, **overrides),
                          train_dataset=task_dataset(task_ids), processing_class=tokenizer, rollout_func=rollout)
    if not print_logs:
        for callback in (ProgressCallback, NotebookProgressCallback, PrinterCallback):
            trainer.remove_callback(callback)
    return trainer
