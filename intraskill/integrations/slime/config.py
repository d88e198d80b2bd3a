"""Run settings of the slime hooks: the ``intraskill_*`` custom-config keys and a round's slime flags.

Reference: ``docs/method.md`` §6.1 (the release's ``shopsim_*`` keys of ``--custom-config-path``;
slime merges the YAML into ``args``), §6.3 (hyperparameters), §1.7 (preflight: the curriculum's
source bank hash equals the configured bank's, and the chunks' (id, version, content) match it).
Every ``shopsim_<name>`` key has the analogue ``intraskill_<name>``; the system prompt is the
package's own (``intraskill.agent.prompts``), chosen by ``intraskill_language`` instead of a file.
"""

from __future__ import annotations

import functools
import math
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from intraskill.experiment.arms import cell_params
from intraskill.layout import RoundDir, round_id
from intraskill.params import Params
from intraskill.shop.actions import LANGUAGES
from intraskill.skills.bank import SkillBank, load_skillbank
from intraskill.skills.curriculum import (
    CurriculumError,
    CurriculumState,
    build_curriculum,
    load_curriculum,
    save_curriculum,
)

CONFIG_PREFIX = "intraskill_"
DEFAULT_STORE_URL = "http://127.0.0.1:5700"
ARGS_ARRAY = "INTRASKILL_ARGS"
"""The bash array :func:`write_launch_args` defines."""
TOOL_PARSERS = ("hermes",)
"""Tool-call formats the turn loop parses: ``hermes`` = ``<tool_call>{json}</tool_call>`` (our ChatML)."""
REASONING_PARSERS = ("none", "qwen3")
"""``qwen3`` drops a ``<think>…</think>`` block before the tool call is parsed; ``none`` keeps all text."""

HOOK_PATHS = {
    "--custom-generate-function-path": "intraskill.integrations.slime.generate.generate",
    "--dynamic-sampling-filter-path": "intraskill.integrations.slime.filters.fully_scored_group_filter",
    "--custom-reward-post-process-path":
        "intraskill.integrations.slime.rewards.normalize_grpo_by_prompt_and_rollout",
    "--custom-rollout-log-function-path": "intraskill.integrations.slime.metrics.enrich_rollout_metrics",
    "--rollout-all-samples-process-path":
        "intraskill.integrations.slime.metrics.record_generated_rollout_groups",
}
"""slime flag → dotted hook path (``docs/method.md`` §6.1)."""

FIXED_FLAGS = {
    "--advantage-estimator": "grpo",
    "--rollout-top-p": "1.0",
    "--rollout-top-k": "-1",
    "--rollout-max-context-len": "24576",
    "--optimizer": "adam",
    "--lr-decay-style": "constant",
    "--reward-key": "reward",
    "--input-key": "prompt",
    "--metadata-key": "metadata",
}
"""Flags every intraskill slime round passes (§6.3): GRPO, full-distribution sampling (the hook refuses
anything else), the release's 24,576-token context, constant-lr Adam, the task file's keys and the reward
dict's ``reward``."""
RELEASE_CONTEXT_LIMIT = int(FIXED_FLAGS["--rollout-max-context-len"])
SWITCHES = ("--apply-chat-template", "--rollout-shuffle", "--use-dynamic-batch-size",
            "--override-opt-param-scheduler")
"""Flags without a value: the task file's loader settings, token-budget micro-batches, and the scheduler
reset that lets a round resume a checkpoint under its own (constant) lr."""


class SlimeConfigError(ValueError):
    """A run setting or slime argument the hooks cannot work with; the message names the key."""


@dataclass(frozen=True)
class SlimeRunConfig:
    """The ``intraskill_*`` keys of the slime custom config (defaults = the release values).

    Parameters
    ----------
    curriculum_path : the round's curriculum (``shopsimrl-skill-curriculum-v1``).
    skillbank_path : the bank the curriculum was built from (its SHA-256 must match).
    training_output_dir : round directory for traces, ``triage.jsonl``, ``analysis_queue.jsonl``.
    environment_base_url : the store service (``intraskill env serve``).
    environment_timeout : seconds per store request (reset waits for a slot without a read timeout).
    environment_persona : reset tasks in persona mode.
    environment_trust_env : let httpx read proxy variables (off for a local service).
    episode_concurrency : episodes (retries included) running at once in this rollout process.
    max_steps : model turns per episode, protocol-error turns included.
    full_skill_retry : run the full-skill diagnostic retry of all-wrong groups.
    max_consecutive_failed_groups : consecutive unscored groups before the filter raises.
    tool_parser : tool-call format of the completions (:data:`TOOL_PARSERS`).
    reasoning_parser : reasoning block handling (:data:`REASONING_PARSERS`).
    language : prompt language, ``"en"`` or ``"zh"``.
    """

    curriculum_path: str
    skillbank_path: str
    training_output_dir: str
    environment_base_url: str = DEFAULT_STORE_URL
    environment_timeout: float = 30.0
    environment_persona: bool = True
    environment_trust_env: bool = False
    episode_concurrency: int = 32
    max_steps: int = 30
    full_skill_retry: bool = True
    max_consecutive_failed_groups: int = 8
    tool_parser: str = "hermes"
    reasoning_parser: str = "qwen3"
    language: str = "en"

    def __post_init__(self) -> None:
        for name in ("curriculum_path", "skillbank_path", "training_output_dir", "environment_base_url"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise SlimeConfigError(f"{CONFIG_PREFIX}{name}: required (a non-empty string)")
        if not math.isfinite(self.environment_timeout) or self.environment_timeout <= 0:
            raise SlimeConfigError(
                f"{CONFIG_PREFIX}environment_timeout: must be > 0, got {self.environment_timeout}")
        for name in ("episode_concurrency", "max_steps", "max_consecutive_failed_groups"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SlimeConfigError(f"{CONFIG_PREFIX}{name}: must be an integer >= 1, got {value!r}")
        choices = {"tool_parser": TOOL_PARSERS, "reasoning_parser": REASONING_PARSERS, "language": LANGUAGES}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise SlimeConfigError(
                    f"{CONFIG_PREFIX}{name}: expected one of {allowed}, got {getattr(self, name)!r}")

    @classmethod
    def from_args(cls, args: Any) -> SlimeRunConfig:
        """Read the ``intraskill_*`` attributes slime merged into ``args`` (missing optional keys default)."""
        values = {}
        for spec in fields(cls):
            key = CONFIG_PREFIX + spec.name
            if hasattr(args, key) and getattr(args, key) is not None:
                values[spec.name] = getattr(args, key)
        missing = [CONFIG_PREFIX + n for n in ("curriculum_path", "skillbank_path", "training_output_dir")
                   if n not in values]
        if missing:
            raise SlimeConfigError(f"{', '.join(missing)}: missing from the slime custom config "
                                   "(--custom-config-path)")
        return cls(**values)

    def to_custom_config(self) -> dict[str, Any]:
        """The YAML mapping for ``--custom-config-path`` (``intraskill_<field>: value``)."""
        return {CONFIG_PREFIX + key: value for key, value in asdict(self).items()}

    @property
    def output_dir(self) -> Path:
        return Path(self.training_output_dir)


def write_custom_config(config: SlimeRunConfig, path: str | Path) -> Path:
    """Write ``config`` as the YAML file slime reads with ``--custom-config-path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config.to_custom_config(), sort_keys=False), encoding="utf-8")
    return path


def _number(value: float | int) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


def batch_flags(params: Params, round_index: int) -> dict[str, str]:
    """The flags a round's parameters set: batch sizes, rollout ids, sampling, clip, optimizer, seeds.

    ``round.*`` gives the group sizes and the round's rollout ids (``--start-rollout-id`` = round × steps,
    ``--num-rollout`` = (round + 1) × steps, so checkpoints chain across rounds); ``grpo.*`` the update
    (``global_batch_size`` ``null`` = one update per step; ``kl_coef`` > 0 adds slime's k3 KL loss, which
    needs ``--ref-load``); ``sampling.*`` temperature and per-turn tokens; ``experiment.seed`` slime's
    ``--seed`` and ``--rollout-seed``. Raises :class:`SlimeConfigError` naming the field slime or the hooks
    cannot run.
    """
    round_, grpo, sampling = params.round, params.grpo, params.sampling
    if round_.method != "intraskill":
        raise SlimeConfigError(f"round.method: the slime hooks run the intraskill method, "
                               f"got {round_.method!r}")
    if grpo.lora is not None:
        raise SlimeConfigError("grpo.lora: the slime recipe trains full parameters (Megatron); "
                               "set grpo.lora: null")
    if sampling.top_p != 1.0:
        raise SlimeConfigError(f"sampling.top_p: must be 1.0 (the trained log-probs are the full "
                               f"distribution's), got {sampling.top_p}")
    if sampling.temperature <= 0:
        raise SlimeConfigError(f"sampling.temperature: slime needs > 0, got {sampling.temperature}")
    if round_index < 0:
        raise SlimeConfigError(f"round: must be >= 0, got {round_index}")
    global_batch = grpo.global_batch_size or round_.rollout_batch_size * round_.n_samples_per_prompt
    flags = {
        "--rollout-batch-size": _number(round_.rollout_batch_size),
        "--n-samples-per-prompt": _number(round_.n_samples_per_prompt),
        "--over-sampling-batch-size": _number(round_.over_sampling_batch_size),
        "--global-batch-size": _number(global_batch),
        "--start-rollout-id": _number(round_index * round_.rollout_steps),
        "--num-rollout": _number((round_index + 1) * round_.rollout_steps),
        "--rollout-temperature": _number(sampling.temperature),
        "--rollout-max-response-len": _number(sampling.max_tokens_per_turn),
        "--eps-clip": _number(grpo.eps_low),
        "--eps-clip-high": _number(grpo.eps_high),
        "--lr": _number(grpo.lr),
        "--weight-decay": _number(grpo.weight_decay),
        "--adam-beta1": _number(grpo.betas[0]),
        "--adam-beta2": _number(grpo.betas[1]),
        "--clip-grad": _number(grpo.max_grad_norm if grpo.max_grad_norm is not None else 0.0),
        "--max-tokens-per-gpu": _number(grpo.micro_batch_tokens),
        "--seed": _number(params.experiment.seed),
        "--rollout-seed": _number(params.experiment.seed),
    }
    if grpo.kl_coef > 0:
        flags.update({"--use-kl-loss": "", "--kl-loss-coef": _number(grpo.kl_coef), "--kl-loss-type": "k3"})
    return flags


def launch_flags(params: Params, round_index: int, custom_config_path: str | Path,
                 prompt_data: str | Path) -> list[str]:
    """The slime ``train.py`` arguments of one round: data, custom config, every hook, and the round's
    settings (:data:`FIXED_FLAGS`, :func:`batch_flags`, :data:`SWITCHES`).

    Model, checkpoint, parallelism and SGLang engine flags are the launcher's (``docs/slime.md``).
    """
    flags = ["--prompt-data", str(prompt_data), "--custom-config-path", str(custom_config_path)]
    for mapping in (HOOK_PATHS, FIXED_FLAGS, batch_flags(params, round_index)):
        for flag, value in mapping.items():
            flags += [flag, value] if value else [flag]
    return flags + list(SWITCHES)


def write_launch_args(flags: Sequence[str], path: str | Path, comment: str) -> Path:
    """Write ``flags`` as the bash array :data:`ARGS_ARRAY`, one flag and its value a line; returns the path.

    ``source`` the file, then ``python3 train.py "${INTRASKILL_ARGS[@]}" …`` (``docs/slime.md``).
    """
    lines: list[list[str]] = []
    for token in flags:
        if token.startswith("--") or not lines:
            lines.append([])
        lines[-1].append(token)
    body = "".join("  " + " ".join(shlex.quote(token) for token in line) + "\n" for line in lines)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {comment}\n{ARGS_ARRAY}=(\n{body})\n", encoding="utf-8")
    return path


def check_train_only(args: Any, sampling_params: Mapping[str, Any], evaluation: bool) -> None:
    """Refuse what the training hook does not support (§6.1): evaluation, partial rollout, group RM,
    and sampling that is not full-distribution (``top_p`` ≠ 1.0 or ``top_k`` ≠ −1)."""
    if evaluation:
        raise SlimeConfigError("evaluation: the intraskill generate hook is train-only; "
                               "evaluate with `intraskill eval` against the served checkpoint")
    for name in ("partial_rollout", "group_rm"):
        if getattr(args, name, False):
            flag = "--" + name.replace("_", "-")
            raise SlimeConfigError(f"{flag}: not supported by the intraskill generate hook")
    top_p = float(sampling_params.get("top_p", 1.0))
    top_k = int(sampling_params.get("top_k", -1))
    if top_p != 1.0:
        raise SlimeConfigError(f"sampling_params.top_p: must be 1.0 (trained log-probs), got {top_p}")
    if top_k != -1:
        raise SlimeConfigError(f"sampling_params.top_k: must be -1 (trained log-probs), got {top_k}")


def _check_against_bank(curriculum: CurriculumState, bank: SkillBank, bank_path: str) -> None:
    recorded = curriculum.source.get("skillbank_sha256")
    if recorded != bank.sha256:
        raise CurriculumError(f"source.skillbank_sha256: the curriculum was built from {recorded}, "
                              f"but {CONFIG_PREFIX}skillbank_path {bank_path} hashes to {bank.sha256}")
    bank_skills = {skill.skill_id: skill for skill in bank.enabled_skills()}
    for chunk in curriculum.chunks:
        skill = bank_skills.get(chunk.skill_id)
        if skill is None or (skill.version, skill.content) != (chunk.version, chunk.content):
            raise CurriculumError(f"chunks[{chunk.skill_id!r}]: (id, version, content) differs from "
                                  f"the bank at {bank_path}")


@functools.lru_cache(maxsize=8)
def load_checked_curriculum(curriculum_path: str, skillbank_path: str) -> CurriculumState:
    """Load the curriculum (its ``state_id`` re-verified) and check it against the bank (cached)."""
    curriculum = load_curriculum(curriculum_path)
    _check_against_bank(curriculum, load_skillbank(skillbank_path), skillbank_path)
    return curriculum


def cell_round_params(params: Params, arm_name: str | None = None, seed_index: int = 0) -> Params:
    """The parameters a slime round trains with: ``params`` itself, or a control-experiment cell's
    (:func:`~intraskill.experiment.arms.cell_params`: the arm's overlay, seeds + ``seed_index``), where a
    skill-free arm (``grpo``) gets q = 1 so every group draws the skill-free context and the same hooks train
    plain GRPO."""
    if arm_name is None:
        if seed_index:
            raise SlimeConfigError(f"seed index {seed_index}: seed indices belong to a control arm (--arm)")
        return params
    try:
        arm = params.matrix.arm(arm_name)
    except KeyError:
        raise SlimeConfigError(f"arm {arm_name!r}: not a built-in arm nor one of matrix.define "
                               f"(matrix.arms: {', '.join(params.matrix.arms)})") from None
    cell = cell_params(params, arm, seed_index)
    if arm.skills == "none":
        cell = cell.model_copy(update={"round": cell.round.model_copy(update={"q": 1.0})})
    return cell


def round_run_config(params: Params, round_index: int, skillbank_path: str | Path,
                     training_output_dir: str | Path, **settings: Any) -> SlimeRunConfig:
    """Write ``<training_output_dir>/curriculum.json`` for the bank at ``skillbank_path`` under
    ``params.round`` (q, ρ, seed) and return the round's config: ``full_skill_retry`` and
    ``max_consecutive_failed_groups`` from ``round``, ``max_steps`` from ``sampling.max_turns``, ``language``
    from ``store.language``; ``settings`` are further (or overriding) :class:`SlimeRunConfig` fields (store
    URL, concurrency, …)."""
    cell = params.round
    out = Path(training_output_dir)
    curriculum = build_curriculum(load_skillbank(skillbank_path), round_id=round_id(round_index),
                                  skill_free_probability=cell.q, rho_min=cell.rho_min, rho_max=cell.rho_max,
                                  seed=cell.curriculum_seed,
                                  skillbank_path=os.path.relpath(skillbank_path, out))
    path = save_curriculum(curriculum, RoundDir(out).curriculum)
    derived = {"full_skill_retry": cell.full_skill_retry,
               "max_consecutive_failed_groups": cell.max_consecutive_failed_groups,
               "max_steps": params.sampling.max_turns, "language": params.store.language}
    return SlimeRunConfig(curriculum_path=str(path), skillbank_path=str(skillbank_path),
                          training_output_dir=str(out), **{**derived, **settings})


def arm_round_config(params: Params, arm_name: str, seed_index: int, round_index: int,
                     skillbank_path: str | Path, training_output_dir: str | Path,
                     **settings: Any) -> SlimeRunConfig:
    """The slime run of one control-experiment cell's round (:mod:`intraskill.experiment`).

    The bank is S₀ in round 0, the gate's selection later for evolving arms and S₀ again for the others;
    see :func:`cell_round_params` and :func:`round_run_config`.
    """
    return round_run_config(cell_round_params(params, arm_name, seed_index), round_index, skillbank_path,
                            training_output_dir, **settings)
