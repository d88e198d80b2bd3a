"""Gate B: a frozen S₀ against bare on the test split, reported and never selected on (method §4.4 step 6).

A Gate B directory holds the two evaluation runs of one checkpoint — ``bare/`` (no skill) and ``s0/`` (every
enabled chunk of S₀) on the same test jobs and episode seeds — and their task-paired comparison
(``comparison.json`` / ``comparison.md``, :func:`~intraskill.evaluate.compare.compare_runs`, S₀ − bare). Both runs
resume like any evaluation, so a killed Gate B loses no episode and repeats none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from intraskill.chat.base import Policy
from intraskill.evaluate.compare import compare_runs, write_comparison
from intraskill.evaluate.records import EvalSummary, PairedComparison
from intraskill.evaluate.records import PairedMetric as ComparedMetric
from intraskill.evaluate.runner import run_eval
from intraskill.layout import CompareDir
from intraskill.params import Params
from intraskill.shop.reward import PRIMARY_REWARD
from intraskill.skills.bank import SkillBank

TEST_SPLIT = "test"
RUNS = ("bare", "s0")


@dataclass(frozen=True)
class PairedMetric:
    """One metric of Gate B: its bare and S₀ means, their difference (S₀ − bare) and its 95 % interval."""

    bare: float
    s0: float
    difference: float
    ci: tuple[float, float]

    @classmethod
    def of(cls, row: ComparedMetric) -> PairedMetric:
        return cls(row.a_mean, row.b_mean, row.mean_difference, row.confidence_interval)


@dataclass(frozen=True)
class GateBResult:
    """A finished Gate B: the paired success and reward, success transitions and its cost."""

    out_dir: Path
    tasks: int
    success: PairedMetric
    reward: PairedMetric
    transitions: dict[str, int]
    episodes: int
    tokens: int

    def statement(self) -> str:
        """One sentence: S₀ − bare on test, success in points and reward, with their intervals."""
        s, r = self.success, self.reward
        return (f"Gate B on {self.tasks} test tasks: success {100 * s.bare:.1f} % bare, {100 * s.s0:.1f} % with S₀ "
                f"({100 * s.difference:+.1f} points [{100 * s.ci[0]:+.1f}, {100 * s.ci[1]:+.1f}]); reward "
                f"{r.difference:+.3f} [{r.ci[0]:+.3f}, {r.ci[1]:+.3f}]")


def run_gate_b(params: Params, s0: SkillBank, out_dir: str | Path, *, checkpoint: str | None = None,
               policy: Policy | None = None, task_limit: int | None = None, store_root: str | Path | None = None,
               progress: bool = True) -> GateBResult:
    """Evaluate ``checkpoint`` (or ``policy``) on the first ``task_limit`` test tasks (``None``:
    ``evaluation.task_limit``, then all) bare and with ``s0``, and compare them task by task."""
    if not s0.enabled_skills():
        raise ValueError(f"Gate B needs an S₀ with an enabled chunk; {s0.bank_version} has none")
    out = CompareDir(out_dir)
    for name, bank in zip(RUNS, (None, s0)):
        run_eval(params, TEST_SPLIT, checkpoint, bank, out.run(name).root, policy=policy, limit=task_limit,
                 store_root=store_root, progress=progress)
    bare, equipped = (out.run(name).root for name in RUNS)
    write_comparison(compare_runs(bare, equipped, seed=params.evaluation.bootstrap_seed), out.root)
    return read_gate_b(out.root)


def read_gate_b(out_dir: str | Path) -> GateBResult:
    """A finished Gate B directory's result (its ``comparison.json`` and the two runs' summaries)."""
    out = CompareDir(out_dir)
    comparison = PairedComparison.read(out.comparison)
    summaries = [EvalSummary.read(out.run(name).summary) for name in RUNS]
    return GateBResult(out.root, comparison.paired.pairs, PairedMetric.of(comparison.metric("r_success")),
                       PairedMetric.of(comparison.metric(PRIMARY_REWARD)), dict(comparison.paired.success_transitions),
                       sum(summary.counts.trace_files for summary in summaries),
                       sum(summary.cost.tokens.total_tokens for summary in summaries))
