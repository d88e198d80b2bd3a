"""Run settings of the slime hooks: the ``intraskill_*`` custom-config keys and the release batch flags.

Reference: ``intraskill-method.md`` §6.1 (the release's ``shopsim_*`` keys of ``--custom-config-path``;
slime merges the YAML into ``args``), §6.3 (hyperparameters), §1.7 (preflight: the curriculum's
source bank hash equals the configured bank's, and the chunks' (id, version, content) match it).
Every ``shopsim_<name>`` key has the analogue ``intraskill_<name>``; the system prompt is the
package's own (``intraskill.agent.prompts``), chosen by ``intraskill_language`` instead of a file.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from intraskill.agent.prompts import LANGUAGES
from intraskill.experiment.arms import cell_params
from intraskill.params import Params
from intraskill.skills.bank import SkillBank, load_skillbank
from intraskill.skills.curriculum import (
    CurriculumError,
    CurriculumState,
    build_curriculum,
    load_curriculum,
    save_curriculum,
)

CONFIG_PREFIX = "intraskill_"
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
"""slime flag → dotted hook path (``intraskill-method.md`` §6.1)."""

RELEASE_FLAGS = {
    "--advantage-estimator": "grpo",
    "--rollout-batch-size": "16",
    "--n-samples-per-prompt": "8",
    "--over-sampling-batch-size": "32",
    "--global-batch-size": "64",
    "--rollout-temperature": "0.6",
    "--rollout-top-p": "1.0",
    "--rollout-top-k": "-1",
    "--rollout-max-response-len": "4096",
    "--rollout-max-context-len": "24576",
    "--eps-clip": "0.2",
    "--eps-clip-high": "0.28",
    "--lr": "1e-6",
    "--lr-decay-style": "constant",
    "--weight-decay": "0.1",
    "--adam-beta1": "0.9",
    "--adam-beta2": "0.98",
    "--reward-key": "reward",
    "--input-key": "prompt",
    "--metadata-key": "metadata",
}
"""The release's rollout and optimizer settings (§6.3): 16 groups × 8 admitted per step out of 32
submitted, 2 updates of 64 rollouts, clip 0.2/0.28, constant lr 1e-6, no KL flags."""
RELEASE_SWITCHES = ("--apply-chat-template", "--rollout-shuffle", "--override-opt-param-scheduler")


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
    environment_base_url: str = "http://127.0.0.1:5700"
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


def launch_flags(custom_config_path: str | Path, prompt_data: str | Path) -> list[str]:
    """The slime ``train.py`` arguments of the release recipe: hooks, batch sizes, sampling, optimizer.

    Model, parallelism and checkpoint flags are the launcher's (``docs/slime.md``).
    """
    flags = ["--prompt-data", str(prompt_data), "--custom-config-path", str(custom_config_path)]
    for mapping in (HOOK_PATHS, RELEASE_FLAGS):
        for flag, value in mapping.items():
            flags += [flag, value]
    return flags + list(RELEASE_SWITCHES)


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


def arm_round_config(params: Params, arm_name: str, seed_index: int, round_index: int, skillbank_path: str | Path,
                     training_output_dir: str | Path, **settings: Any) -> SlimeRunConfig:
    """The slime run of one control-experiment cell's round (:mod:`intraskill.experiment`).

    Writes ``<training_output_dir>/curriculum.json`` for the bank at ``skillbank_path`` (S₀ in round 0; the
    gate's selection later for evolving arms, S₀ again for the others) under the cell's overlay and seeds, and
    returns the config with the arm's ``full_skill_retry``. A skill-free arm (``grpo``) gets q = 1: every group
    draws the skill-free context, so the same hooks train plain GRPO. ``settings`` are further
    :class:`SlimeRunConfig` fields (store URL, concurrency, …).
    """
    arm = params.matrix.arm(arm_name)
    cell = cell_params(params, arm, seed_index).round
    if arm.skills == "none":
        cell = cell.model_copy(update={"q": 1.0})
    out = Path(training_output_dir)
    curriculum = build_curriculum(load_skillbank(skillbank_path), round_id=f"round-{round_index:03d}",
                                  skill_free_probability=cell.q, rho_min=cell.rho_min, rho_max=cell.rho_max,
                                  seed=cell.curriculum_seed,
                                  skillbank_path=os.path.relpath(skillbank_path, out))
    path = save_curriculum(curriculum, out / "curriculum.json")
    return SlimeRunConfig(curriculum_path=str(path), skillbank_path=str(skillbank_path),
                          training_output_dir=str(out), full_skill_retry=cell.full_skill_retry, **settings)
