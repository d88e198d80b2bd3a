"""What one cell of the control experiment produced: per-round learning and compute, and its test runs.

Compute parity is shown, not assumed: per round the episodes generated (rollouts and full-skill retries),
their completion tokens (the retries' also apart), the episodes and tokens the trainer received, the gate's
episodes and tokens, the round's bare val checks and the training time, all read from the round directory
once, when the cell finishes, and kept in ``cell.json`` (a record written before a field existed reads it as
``None``: not recorded). A
Skill1 round's rollouts are its ``skill1_episodes.jsonl`` records; their generated tokens add the query, rank
and distillation replies to the episode's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from intraskill.evaluate.records import EvalSummary
from intraskill.jsonl import iter_jsonl
from intraskill.layout import EvalDir, RoundDir
from intraskill.pipeline.coevolve import RoundSummary
from intraskill.shop.reward import PRIMARY_REWARD
from intraskill.training.metrics import ROLLOUT_PREFIX, read_step_metrics

TRAINED_EPISODES = ROLLOUT_PREFIX + "train_trajectory_count"
"""The rollout metric counting a step's trajectories the trainer received (both methods log it)."""
SUCCESS = "r_success"
METRICS: tuple[str, ...] = (SUCCESS, PRIMARY_REWARD)
"""The outcomes the experiment compares: test success and strict reward (``reward`` = ``r_strict``)."""


@dataclass(frozen=True)
class RoundRecord:
    """One training round of a cell: bare val success before and after, the gate, and its compute."""

    round_index: int
    val_before: float | None
    val_after: float | None
    gate_status: str
    chunks_in: int
    chunks_out: int | None
    rollout_episodes: int
    retry_episodes: int
    generated_tokens: int
    trained_episodes: int
    trained_tokens: int
    gate_episodes: int
    train_seconds: float
    retry_tokens: int | None = None
    gate_tokens: int | None = None
    val_episodes: int | None = None
    val_tokens: int | None = None

    @classmethod
    def read(cls, summary: RoundSummary) -> RoundRecord:
        """The record of one ``co_evolve_summary.json`` round (its directory is read for the compute)."""
        root = RoundDir(summary.root)
        metrics = read_step_metrics(root.metrics)
        steps = root.step_dirs()
        rollouts = list(_traces([step.traces for step in steps]))
        skill1 = list(_traces([step.skill1_episodes for step in steps]))
        retries = list(_traces([root.retries]))
        gate = list(_traces([root.gate.traces]))
        val = list(_traces([root.val_before.traces, root.val_after.traces]))
        curriculum = json.loads(root.curriculum.read_text(encoding="utf-8")) \
            if root.curriculum.is_file() else {"chunks": []}
        next_path = summary.curriculum_path
        chunks_out = summary.gate_outcomes.selected_count if summary.gate_outcomes is not None else None
        if chunks_out is None and next_path is not None:
            chunks_out = len(json.loads(Path(next_path).read_text(encoding="utf-8"))["chunks"])
        success = summary.val_success
        return cls(
            round_index=summary.round_index, val_before=success.before if success else None,
            val_after=success.after if success else None, gate_status=summary.gate_status, chunks_in=len(curriculum["chunks"]), chunks_out=chunks_out,
            rollout_episodes=len(rollouts) + len(skill1), retry_episodes=len(retries),
            generated_tokens=sum(_completion_tokens(t) for t in rollouts + retries) + sum(map(_skill1_tokens, skill1)),
            trained_episodes=sum(int(m.rollout.get(TRAINED_EPISODES) or 0) for m in metrics),
            trained_tokens=sum(m.train.model_tokens or 0 for m in metrics),
            gate_episodes=len(gate),
            train_seconds=math.fsum(m.time.total_s for m in metrics),
            retry_tokens=sum(map(_completion_tokens, retries)), gate_tokens=sum(map(_completion_tokens, gate)),
            val_episodes=len(val), val_tokens=sum(map(_completion_tokens, val)),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _traces(paths: Iterable[Path]) -> Iterable[dict[str, Any]]:
    for path in paths:
        yield from iter_jsonl(path)


def _completion_tokens(trace: Mapping[str, Any]) -> int:
    return int((trace.get("tokens") or {}).get("completion") or 0)


def _skill1_tokens(record: Mapping[str, Any]) -> int:
    """A Skill1 rollout's generated tokens: its episode's and its replies' (the tokens the model sampled)."""
    return _completion_tokens(record["trace"]) + sum(sum(t["loss_mask"]) for t in record["reply_tokens"].values())


@dataclass(frozen=True)
class TestRun:
    """One test-split evaluation: its condition, directory (relative to the matrix directory), checkpoint,
    skills, headline outcomes and generated (completion) tokens (``None`` in a record written before they
    were kept)."""

    condition: str
    run_dir: str
    checkpoint: str
    skills: tuple[str, ...]
    success: float
    reward: float
    steps: float
    episodes: int
    tokens: int | None = None

    @classmethod
    def read(cls, condition: str, run_dir: Path, out: Path, checkpoint: str, skills: Iterable[str]) -> TestRun:
        """The run's ``summary.json`` headline."""
        summary = EvalSummary.read(EvalDir(run_dir).summary)
        return cls(condition, str(run_dir.relative_to(out)), checkpoint, tuple(skills), summary.primary.success_rate,
                   summary.primary.reward_mean, summary.behavior.steps_mean, summary.counts.scored,
                   summary.cost.tokens.completion_tokens)

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["skills"] = list(self.skills)
        return record

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> TestRun:
        return cls(**{**record, "skills": tuple(record["skills"])})


FINAL_BARE = "final-bare"
FINAL_BANK = "final-bank"
FINAL_LIBRARY = "final-library"
"""A Skill1 arm's deployment: its final checkpoint with its final library (query → retrieve → rank → act)."""
WARMSTART_BARE = "warmstart-bare"
WARMSTART_S0 = "warmstart-s0"


@dataclass(frozen=True)
class CellResult:
    """A finished cell: its seeds, rounds, test runs and which of them is the arm's deployed condition.

    ``tests`` holds ``final-bare`` and, unless the arm ended with an empty bank, ``final-bank`` (the final
    checkpoint with the arm's final bank: the gate's selection, S₀ for ``fixed``; S₀ for skill-free arms, so
    that their four-condition table is complete); a Skill1 arm adds ``final-library``. ``deployed`` is what
    the arm ships: ``final-library`` for a Skill1 arm, ``final-bank`` for arms trained with skills and a
    non-empty bank, else ``final-bare``. ``start_checkpoint`` names the checkpoint an arm started from when it
    is not the shared warm start, ``start_skillbank`` the S₀ it trained from when not the shared one (``None``:
    the shared one).
    """

    arm: str
    seed_index: int
    seeds: dict[str, int]
    rounds: tuple[RoundRecord, ...]
    tests: dict[str, TestRun]
    deployed: str
    final_bank: tuple[str, ...]
    wall_seconds: float
    start_checkpoint: str | None = None
    start_skillbank: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "seed_index": self.seed_index, "seeds": dict(self.seeds),
                "rounds": [r.to_dict() for r in self.rounds],
                "tests": {name: run.to_dict() for name, run in self.tests.items()},
                "deployed": self.deployed, "final_bank": list(self.final_bank), "wall_seconds": self.wall_seconds,
                "start_checkpoint": self.start_checkpoint, "start_skillbank": self.start_skillbank}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> CellResult:
        """A ``cell.json`` record (one written before ``start_checkpoint`` or ``start_skillbank`` existed started
        from the shared warm start and S₀)."""
        return cls(record["arm"], record["seed_index"], dict(record["seeds"]),
                   tuple(RoundRecord(**r) for r in record["rounds"]),
                   {name: TestRun.from_dict(run) for name, run in record["tests"].items()},
                   record["deployed"], tuple(record["final_bank"]), record["wall_seconds"],
                   record.get("start_checkpoint"), record.get("start_skillbank"))
