"""The control experiment's result: cells, four-condition tables, learning curves, compute and comparisons.

Each comparison ``a-b`` is the difference a − b on the test split in one condition — ``deployed`` (what each
arm ships: its final checkpoint with its final bank, bare for a skill-free arm, with its final library for a
Skill1 arm) or ``bare`` (the final checkpoint alone) — for test success and strict reward. Per seed index
(cells with the same index share their training draws) it is the release's task-paired bootstrap; across seeds
:func:`~intraskill.experiment.inference.contrast_interval` (the crossed seeds × tasks t interval; one seed: the
task-paired bootstrap). What the matrix claims is declared in ``matrix.family``: the primary contrast gets a
verdict when its 95 % interval excludes 0, each secondary one when its Holm-adjusted p-value (over the whole
declared family, a member not run counting as p = 1) is below 0.05 and its interval excludes 0. A primary
contrast declared with an ``equivalence_margin`` whose 95 % interval holds 0 gets the verdict ``equivalent`` (no
difference of the margin or more) when its 90 % interval lies inside ±margin (two one-sided tests at 0.05); every
other contrast is reported without a verdict. Bootstraps are seeded from ``evaluation.bootstrap_seed``. An arm that
started from its own checkpoint (``start_checkpoint``) or trained from its own S₀ (``start_skillbank``) is named as
such in the summary and in every statement about it.

The deployment baselines (:mod:`~intraskill.experiment.baselines`: ``grpo``'s final checkpoint with S₀ and with
``coevolve``'s final bank of the same seed) join the comparisons as ``coevolve-grpo+s0`` and
``coevolve-grpo+coevolve_bank`` (deployed only; outside the declared family, so without a verdict), and :meth:`MatrixResult.compute_by_arm` is the compute table
per arm (generated, retry, trained, gate, val and test episodes and tokens per seed).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.evaluate.bootstrap import (
    BootstrapResult,
    paired_bootstrap_ci,
    success_transitions,
)
from intraskill.evaluate.task_records import run_task_values
from intraskill.experiment.baselines import (
    BASELINE_DESCRIPTIONS,
    BASELINES,
    baseline_cells,
    read_baselines,
)
from intraskill.experiment.inference import ContrastInterval, contrast_interval, holm
from intraskill.experiment.records import FINAL_BARE, METRICS, SUCCESS, CellResult, TestRun
from intraskill.layout import MatrixDir
from intraskill.params import (
    BUILTIN_ARMS,
    DEFAULT_CONFIDENCE,
    METHOD_ARM,
    REFERENCE_ARM,
    FamilyParams,
    comparison_pairs,
)

if TYPE_CHECKING:
    import pandas as pd

RESULT_SCHEMA = "intraskill-control-matrix-result-v2"
CONDITIONS: tuple[str, ...] = ("deployed", "bare")
METRIC_LABELS = {SUCCESS: "success", "reward": "reward"}
COMPUTE_FIELDS: tuple[str, ...] = ("rollout_episodes", "retry_episodes", "generated_tokens", "retry_tokens",
                                   "trained_episodes", "trained_tokens", "gate_episodes", "gate_tokens",
                                   "val_episodes", "val_tokens", "train_seconds")
"""The per-round compute a cell's rounds record (:class:`~intraskill.experiment.records.RoundRecord`), summed
per cell in the compute table; ``generated_tokens`` counts rollouts and retries, ``retry_tokens`` the
retries alone."""
ALPHA = 1.0 - DEFAULT_CONFIDENCE
EQUIVALENCE_CONFIDENCE = 1.0 - 2.0 * ALPHA
"""The interval of two one-sided tests at :data:`ALPHA`: 90 %."""
PRIMARY, SECONDARY, EXPLORATORY = "primary", "secondary", "exploratory"
"""A contrast's role in the declared family."""
EQUIVALENT = "equivalent"
"""The verdict of a primary contrast whose declared equivalence holds."""

__all__ = ["Contrast", "MatrixResult", "PairedRuns", "comparison_pairs", "contrast", "deployment_effect",
           "load_matrix"]


@dataclass(frozen=True)
class Contrast:
    """Arm ``a`` − arm ``b`` on one metric in one condition, per seed and across seeds, with its role in the
    declared family (``p_holm``: its Holm-adjusted p-value, secondary contrasts only)."""

    a: str
    b: str
    condition: str
    metric: str
    across_seeds: ContrastInterval
    per_seed: tuple[BootstrapResult, ...]
    transitions: dict[str, int] | None
    starts: dict[str, str] = field(default_factory=dict)
    """Arm → how it started apart from the others (its own checkpoint, its own S₀), for such an arm."""
    role: str = EXPLORATORY
    p_holm: float | None = None
    equivalence: ContrastInterval | None = None
    """The interval at :data:`EQUIVALENCE_CONFIDENCE`, computed for a primary contrast declared with a margin."""
    margin: float | None = None
    """The declared equivalence margin (primary contrast only)."""

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"

    @property
    def key(self) -> tuple[str, str, str]:
        return self.name, self.condition, METRIC_LABELS[self.metric]

    @property
    def supported(self) -> bool:
        """The declared test rejects 0: the primary's interval excludes it, a secondary one's Holm p < α too."""
        if self.role == EXPLORATORY or not self.across_seeds.excludes_zero():
            return False
        return self.role == PRIMARY or (self.p_holm is not None and self.p_holm < ALPHA)

    @property
    def equivalent(self) -> bool:
        """The declared equivalence holds: a primary contrast not :attr:`supported` whose 90 % interval lies
        inside ±margin."""
        return self.role == PRIMARY and not self.supported and self._inside_margin()

    def _inside_margin(self) -> bool:
        e, m = self.equivalence, self.margin
        return e is not None and m is not None and -m <= e.low and e.high <= m

    @property
    def verdict(self) -> str:
        """``a > b`` or ``a < b`` where :attr:`supported`; ``equivalent`` (no difference of the margin or more)
        where :attr:`equivalent`; ``unresolved`` for another declared contrast; ``exploratory`` (no verdict) outside
        the declared family."""
        if self.role == EXPLORATORY:
            return EXPLORATORY
        if self.equivalent:
            return EQUIVALENT
        if not self.supported:
            return "unresolved"
        return f"{self.a} > {self.b}" if self.across_seeds.mean > 0 else f"{self.a} < {self.b}"

    def statement(self) -> str:
        """One sentence: the difference in points, its interval, the test and what the data supports."""
        r = self.across_seeds
        size = (f"{100 * r.mean:+.1f} points [{100 * r.low:+.1f}, {100 * r.high:+.1f}] over {r.n_seeds} seed(s) × "
                f"{r.n_tasks} tasks, p {r.p_value:.3g}")
        if self.p_holm is not None:
            size += f", Holm p {self.p_holm:.3g}"
        caveat = "; one seed: the interval holds no training-seed variance" if r.n_seeds < 2 else ""
        caveat += "".join(f"; {arm} {start}" for arm, start in self.starts.items())
        head = f"{self.name} ({self.condition}, {METRIC_LABELS[self.metric]}, {self.role})"
        if self.role == EXPLORATORY:
            return f"{head}: {size}; outside the declared family, no verdict{caveat}"
        if self.equivalence is not None and self.margin is not None:
            e = self.equivalence
            size += (f"; {100 * e.confidence:.0f} % interval [{100 * e.low:+.1f}, {100 * e.high:+.1f}] "
                     f"{'inside' if self._inside_margin() else 'not inside'} ±{100 * self.margin:g} points")
        if self.equivalent:
            return f"{head}: {size}; supported: no difference of {100 * (self.margin or 0.0):g} points or more{caveat}"
        if not self.supported:
            return f"{head}: {size}; no difference resolved{caveat}"
        return f"{head}: {size}; supported: {self.verdict}{caveat}"

    def to_dict(self) -> dict[str, Any]:
        """``mean``, ``ci_low``, ``ci_high``, ``method``, ``p_value``, ``p_holm``, ``role``, ``verdict`` and the
        rest, JSON-ready."""
        r = self.across_seeds
        return {**r.to_dict(), "role": self.role, "p_holm": self.p_holm,
                "per_seed": [{"mean": s.mean_difference, "ci_low": s.ci95[0], "ci_high": s.ci95[1]}
                             for s in self.per_seed],
                "per_seed_method": self.per_seed[0].method, "transitions": self.transitions,
                "equivalence": None if self.equivalence is None else
                {"margin": self.margin, "confidence": self.equivalence.confidence, "ci_low": self.equivalence.low,
                 "ci_high": self.equivalence.high},
                "verdict": self.verdict, "statement": self.statement()}


class TaskValues:
    """Per-task test outcomes (``metric → task → value``) by run directory, each run's traces read once."""

    def __init__(self) -> None:
        self._runs: dict[Path, dict[str, dict[int, float]]] = {}

    def __call__(self, run_dir: Path) -> dict[str, dict[int, float]]:
        if run_dir not in self._runs:
            self._runs[run_dir] = run_task_values(run_dir, METRICS)
        return self._runs[run_dir]


@dataclass(frozen=True)
class MatrixResult:
    """A control matrix as far as it has finished: cells by arm and seed, the shared warm start's test runs
    and the comparisons."""

    out_dir: Path
    plan: dict[str, Any]
    warmstart: dict[str, TestRun]
    cells: tuple[CellResult, ...]
    contrasts: tuple[Contrast, ...]
    baselines: tuple[CellResult, ...] = ()
    """The deployment baselines (:mod:`intraskill.experiment.baselines`) as pseudo-cells, by name then seed."""
    family: FamilyParams = field(default_factory=FamilyParams)
    family_arms: tuple[str, ...] = ()
    """The arms the family was declared over (the matrix's arms; empty: the finished ones)."""
    task_values: TaskValues = field(default_factory=TaskValues, repr=False, compare=False)

    @property
    def arms(self) -> list[str]:
        return list(dict.fromkeys(cell.arm for cell in self.cells))

    def cell(self, arm: str, seed_index: int) -> CellResult:
        return next(c for c in self.cells if c.arm == arm and c.seed_index == seed_index)

    def to_dict(self) -> dict[str, Any]:
        """``arms`` → per-seed results, ``comparisons`` → ``{"<a>-<b>": {condition: {"success"|"reward":
        {"mean", "ci_low", "ci_high", "method", "p_value", "p_holm", "role", "verdict", ...}}}}``, ``family`` (the
        declared claims), ``statements``."""
        comparisons: dict[str, Any] = {}
        for contrast in self.contrasts:
            block = comparisons.setdefault(contrast.name, {}).setdefault(contrast.condition, {})
            block[METRIC_LABELS[contrast.metric]] = contrast.to_dict()
        return {
            "schema_version": RESULT_SCHEMA, "out_dir": str(self.out_dir), "fingerprint": self.plan["fingerprint"],
            "rounds": self.plan["rounds"], "test_tasks": self.plan["test_tasks"], "threads": self.plan["threads"],
            "split": self.plan.get("split", "test"),
            "warmstart": {name: run.to_dict() for name, run in self.warmstart.items()},
            "arms": {arm: {str(c.seed_index): c.to_dict() for c in self.cells if c.arm == arm} for arm in self.arms},
            "baselines": {name: {"description": BASELINE_DESCRIPTIONS[name],
                                 "seeds": {str(c.seed_index): c.tests[c.deployed].to_dict()
                                           for c in self.baselines if c.arm == name}}
                          for name in BASELINES if any(c.arm == name for c in self.baselines)},
            "compute": _compute_dict(self.compute_by_arm()),
            "comparisons": comparisons,
            "family": {**self.family.model_dump(mode="json"), "alpha": ALPHA,
                       "secondary_size": len(self.family.members(self._family_arms())[1])},
            "statements": [c.statement() for c in self.contrasts],
        }

    def summary(self) -> str:
        """Final test success and reward per arm (mean over seeds) and every comparison's statement."""
        lines = [f"control matrix {self.out_dir}: {len(self.cells)} cells, {self.plan['rounds']} round(s)"]
        for name, run in self.warmstart.items():
            lines.append(f"  {name:<16} success {100 * run.success:5.1f} %  reward {run.reward:.3f}")
        finals = self.finals()
        if not finals.empty:
            table = finals[finals.condition == "deployed"].groupby("arm", sort=False)[["success", "reward"]]
            for arm, row in table.mean().iterrows():
                seeds = sum(c.arm == arm for c in self.cells)
                lines.append(f"  {arm:<16} success {100 * row.success:5.1f} %  reward {row.reward:.3f}  "
                             f"(deployed, {seeds} seed(s))")
        for name in BASELINES:
            runs = [c.tests[c.deployed] for c in self.baselines if c.arm == name]
            if runs:
                lines.append(f"  {name:<16} success {100 * statistics.fmean(r.success for r in runs):5.1f} %  "
                             f"reward {statistics.fmean(r.reward for r in runs):.3f}  ({BASELINE_DESCRIPTIONS[name]}, "
                             f"{len(runs)} seed(s))")
        lines += [f"  {arm} {start}" for arm, start in _starts(self.cells).items()]
        compute = self.compute_by_arm()
        for arm, row in compute.iterrows():
            lines.append(f"  compute {arm:<9} per seed: {row.generated_episodes:.0f} episodes generated "
                         f"({row.retry_episodes:.0f} retries), {row.trained_episodes:.0f} trained, "
                         f"{row.gate_episodes:.0f} gate, {row.test_episodes:.0f} test; "
                         f"{row.generated_tokens:.0f} tokens generated, {row.trained_tokens:.0f} trained")
        lines += [f"  {c.statement()}" for c in self.contrasts]
        return "\n".join(lines)

    def learning_curves(self) -> pd.DataFrame:
        """One row per (arm, seed, point): bare val success before round 0 (point 0) and after each round."""
        # deferred: pandas is heavy to import and only the frames need it
        import pandas as pd

        rows = []
        for cell in self.cells:
            for record in cell.rounds:
                if record.round_index == 0 and record.val_before is not None:
                    rows.append({"arm": cell.arm, "seed": cell.seed_index, "point": 0, "val_success": record.val_before})
                if record.val_after is not None:
                    rows.append({"arm": cell.arm, "seed": cell.seed_index, "point": record.round_index + 1,
                                 "val_success": record.val_after})
        return pd.DataFrame(rows, columns=["arm", "seed", "point", "val_success"])

    def finals(self) -> pd.DataFrame:
        """One row per (arm, seed, condition ``deployed`` / ``bare``) with test success and reward."""
        # deferred: pandas is heavy to import and only the frames need it
        import pandas as pd

        rows = []
        for cell in self.cells:
            for condition, run in (("deployed", cell.tests[cell.deployed]), ("bare", cell.tests[FINAL_BARE])):
                rows.append({"arm": cell.arm, "seed": cell.seed_index, "condition": condition,
                             "success": run.success, "reward": run.reward, "skills": len(run.skills)})
        return pd.DataFrame(rows, columns=["arm", "seed", "condition", "success", "reward", "skills"])

    def four_conditions(self) -> pd.DataFrame:
        """The release's four-condition table per arm: warm start bare and with S₀ (shared), final checkpoint
        bare and with the arm's final bank; means over seeds (± standard deviation across seeds)."""
        # deferred: pandas is heavy to import and only the frames need it
        import pandas as pd

        rows = []
        for arm in self.arms:
            cells = [c for c in self.cells if c.arm == arm]
            for name, run in self.warmstart.items():
                rows.append(_condition_row(arm, name, [run]))
            for name in dict.fromkeys(n for c in cells for n in c.tests):
                rows.append(_condition_row(arm, name, [c.tests[name] for c in cells if name in c.tests]))
        return pd.DataFrame(rows)

    def compute(self) -> pd.DataFrame:
        """Per (arm, seed, round): episodes and tokens generated and trained, gate episodes, training time."""
        # deferred: pandas is heavy to import and only the frames need it
        import pandas as pd

        rows = [{"arm": c.arm, "seed": c.seed_index, **r.to_dict(), "cell_wall_seconds": c.wall_seconds}
                for c in self.cells for r in c.rounds]
        return pd.DataFrame(rows)

    def compute_by_arm(self) -> pd.DataFrame:
        """The compute table: per arm, the mean over its seeds of each cell's totals over its rounds
        (:data:`COMPUTE_FIELDS`; ``generated_episodes`` = rollouts + retries) and of its test runs' episodes and
        generated tokens (``NaN`` where a record predates the field), with the seed count. Indexed by arm."""
        # deferred: pandas is heavy to import and only the frames need it
        import pandas as pd

        rows = [{"arm": c.arm, "seed": c.seed_index, **_cell_compute(c)} for c in self.cells]
        columns = ["generated_episodes", *COMPUTE_FIELDS, "test_episodes", "test_tokens", "wall_seconds"]
        frame = pd.DataFrame(rows, columns=["arm", "seed", *columns])
        table = frame.groupby("arm", sort=False)[columns].mean()
        table.insert(0, "seeds", frame.groupby("arm", sort=False)["seed"].count())
        return table

    def _family_arms(self) -> list[str]:
        return list(self.family_arms) or self.arms

    def arm_intervals(self, samples: int = 2000) -> pd.DataFrame:
        """Per arm, condition and metric: the mean over seeds and tasks with its 95 % interval (the same crossed
        seeds × tasks t interval as the comparisons; one seed: the task bootstrap of ``samples`` resamples), for
        plotting each arm's level beside the paired comparisons."""
        # deferred: pandas is heavy to import and only the frames need it
        import pandas as pd

        seed_base = self.plan["params"]["evaluation"]["bootstrap_seed"]
        rows = []
        for arm in self.arms:
            cells = [c for c in self.cells if c.arm == arm]
            for condition in CONDITIONS:
                values = [self.task_values(_run_dir(self.out_dir, c, condition)) for c in cells]
                for metric in METRICS:
                    table = [[v[metric][t] for t in sorted(v[metric])] for v in values]
                    level = contrast_interval(table, metric=f"{arm}:{condition}:{metric}", samples=samples,
                                              seed_base=seed_base)
                    rows.append({"arm": arm, "condition": condition, "metric": METRIC_LABELS[metric],
                                 "mean": level.mean, "ci_low": level.low, "ci_high": level.high,
                                 "per_seed": list(level.per_seed), "method": level.method})
        return pd.DataFrame(rows)

    def comparisons(self) -> pd.DataFrame:
        """One row per comparison, condition and metric; ``0->1`` / ``1->0`` the tasks arm a fixed / broke
        relative to arm b, pooled over seeds (success only)."""
        # deferred: pandas is heavy to import and only the frames need it
        import pandas as pd

        rows = []
        for c in self.contrasts:
            record = c.to_dict()
            rows.append({"comparison": c.name, "condition": c.condition, "metric": METRIC_LABELS[c.metric],
                         "mean": record["mean"], "ci_low": record["ci_low"], "ci_high": record["ci_high"],
                         "seeds": record["seeds"], "tasks": record["tasks"], "method": record["method"],
                         "p_value": record["p_value"], "role": c.role, "p_holm": c.p_holm,
                         "0->1": (c.transitions or {}).get("0->1"), "1->0": (c.transitions or {}).get("1->0"),
                         "verdict": c.verdict, "margin": c.margin})
        return pd.DataFrame(rows)


def _cell_compute(cell: CellResult) -> dict[str, float | None]:
    """One cell's compute: its rounds' :data:`COMPUTE_FIELDS` summed (``None`` when a round lacks one), its
    generated episodes and its test runs' episodes and tokens."""
    totals = {name: _sum([getattr(r, name) for r in cell.rounds]) for name in COMPUTE_FIELDS}
    totals["generated_episodes"] = _sum([totals["rollout_episodes"], totals["retry_episodes"]])
    totals["test_episodes"] = sum(run.episodes for run in cell.tests.values())
    totals["test_tokens"] = _sum([run.tokens for run in cell.tests.values()])
    return {**totals, "wall_seconds": cell.wall_seconds}


def _sum(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(values)  # type: ignore[arg-type]


def _compute_dict(table: pd.DataFrame) -> dict[str, dict[str, float | int | None]]:
    """The compute table as JSON: arm → field → mean per seed (``None`` for a missing record)."""
    return {str(arm): {name: (None if value != value else int(value) if name == "seeds" else float(value))
                       for name, value in row.items()} for arm, row in table.iterrows()}


def _condition_row(arm: str, condition: str, runs: Sequence[TestRun]) -> dict[str, Any]:
    success = [r.success for r in runs]
    reward = [r.reward for r in runs]
    return {"arm": arm, "condition": condition, "seeds": len(runs), "skills": len(runs[0].skills),
            "success": statistics.fmean(success), "success_sd": statistics.stdev(success) if len(runs) > 1 else None,
            "reward": statistics.fmean(reward), "reward_sd": statistics.stdev(reward) if len(runs) > 1 else None,
            "steps": statistics.fmean(r.steps for r in runs)}


def _starts(cells: Sequence[CellResult]) -> dict[str, str]:
    """Arm → how it started apart from the shared warm start and S₀, for the arms among ``cells`` that did."""
    starts = {}
    for c in cells:
        notes = [f"started from {c.start_checkpoint}, not the shared warm start"] * (c.start_checkpoint is not None)
        notes += [f"trained from S₀ {c.start_skillbank}, not the shared S₀"] * (c.start_skillbank is not None)
        if notes:
            starts[c.arm] = " and ".join(notes)
    return starts


def _run_dir(out: Path, cell: CellResult, condition: str) -> Path:
    return out / cell.tests[cell.deployed if condition == "deployed" else FINAL_BARE].run_dir


def contrast(out: Path, cells_a: Sequence[CellResult], cells_b: Sequence[CellResult], condition: str, metric: str,
             samples: int, seed_base: int, task_values: TaskValues | None = None, *,
             equivalence: bool = False) -> Contrast:
    """Arm a − arm b over the seed indices both finished (paired by seed index, then by task); ``task_values``
    shares the runs' per-task outcomes between contrasts; ``equivalence`` adds the interval at
    :data:`EQUIVALENCE_CONFIDENCE`."""
    by_seed = {c.seed_index: c for c in cells_b}
    pairs = [(a, by_seed[a.seed_index]) for a in sorted(cells_a, key=lambda c: c.seed_index)
             if a.seed_index in by_seed]
    if not pairs:
        raise ValueError("contrast: the two arms share no finished seed")
    paired = _paired_runs([(a.seed_index, f"{a.arm} and {b.arm}", _run_dir(out, a, condition),
                            _run_dir(out, b, condition)) for a, b in pairs], metric, samples, seed_base, task_values)
    return Contrast(cells_a[0].arm, cells_b[0].arm, condition, metric, paired.across_seeds, paired.per_seed,
                    paired.transitions, _starts([*cells_a, *cells_b]),
                    equivalence=contrast_interval(paired.rows, EQUIVALENCE_CONFIDENCE, metric=metric, samples=samples,
                                                  seed_base=seed_base) if equivalence else None)


@dataclass(frozen=True)
class PairedRuns:
    """Test runs a − b paired by seed, then by task: the seed indices, each seed's per-task differences
    (``rows``), its task bootstrap, the crossed seeds × tasks interval and (binary success) the pooled 0→1 / 1→0
    transitions."""

    seeds: tuple[int, ...]
    rows: tuple[tuple[float, ...], ...]
    per_seed: tuple[BootstrapResult, ...]
    across_seeds: ContrastInterval
    transitions: dict[str, int] | None


def _paired_runs(pairs: Sequence[tuple[int, str, Path, Path]], metric: str, samples: int, seed_base: int,
                 task_values: TaskValues | None = None) -> PairedRuns:
    """``pairs`` of (seed index, what the runs are, run a, run b), one per seed: a − b task by task."""
    task_values = task_values if task_values is not None else TaskValues()
    rows, per_seed, successes = [], [], ([], [])
    for seed, label, run_a, run_b in pairs:
        values_a, values_b = task_values(run_a)[metric], task_values(run_b)[metric]
        if values_a.keys() != values_b.keys():
            raise ValueError(f"{label} seed {seed}: the test runs hold different tasks")
        tasks = sorted(values_a)
        treated, reference = [values_a[t] for t in tasks], [values_b[t] for t in tasks]
        rows.append(tuple(x - y for x, y in zip(treated, reference)))
        per_seed.append(paired_bootstrap_ci(reference, treated, metric, samples=samples, seed_base=seed_base))
        successes[0].extend(reference)
        successes[1].extend(treated)
    binary = metric == SUCCESS and all(v in (0.0, 1.0) for v in successes[0] + successes[1])
    return PairedRuns(tuple(p[0] for p in pairs), tuple(rows), tuple(per_seed),
                      contrast_interval(rows, metric=metric, samples=samples, seed_base=seed_base),
                      success_transitions(*successes) if binary else None)


def deployment_effect(result: MatrixResult, arm: str, metric: str = SUCCESS) -> PairedRuns:
    """What ``arm`` deploys adds to its own final checkpoint: deployed − bare on the test tasks, per seed and across
    seeds (for a Skill1 arm, its final library's own effect; zero by construction for an arm deployed bare)."""
    cells = [c for c in result.cells if c.arm == arm]
    if not cells:
        raise ValueError(f"{result.out_dir}: arm {arm!r} has no finished cell")
    evaluation = result.plan["params"]["evaluation"]
    return _paired_runs([(c.seed_index, f"{arm} deployed and bare", _run_dir(result.out_dir, c, "deployed"),
                          _run_dir(result.out_dir, c, "bare")) for c in cells], metric,
                        evaluation["bootstrap_samples"], evaluation["bootstrap_seed"], result.task_values)


def declared(contrasts: Sequence[Contrast], family: FamilyParams, arms: Sequence[str]) -> tuple[Contrast, ...]:
    """``contrasts`` with their roles in ``family`` (declared over a matrix of ``arms``), the primary one's
    equivalence margin and the secondary ones' Holm-adjusted p-values; a declared member not among ``contrasts``
    counts as p = 1."""
    primary, secondary = family.members(arms)
    adjusted = holm({c.key: c.across_seeds.p_value for c in contrasts if c.key in secondary}, ALPHA,
                    family_size=len(secondary))
    margin = family.primary.equivalence_margin
    return tuple(replace(c, role=PRIMARY, margin=margin) if c.key == primary else
                 replace(c, role=SECONDARY, p_holm=adjusted[c.key]) if c.key in adjusted else c for c in contrasts)


def load_matrix(out_dir: str | Path, arms: Sequence[str] | None = None, seeds: int | None = None, *,
                family: FamilyParams | None = None) -> MatrixResult:
    """The finished part of a matrix directory (``arms`` / ``seeds`` restrict it; default every finished
    cell), its contrasts read with ``family`` (default: ``matrix.family``'s defaults) declared over ``arms`` (or
    the finished arms)."""
    out = Path(out_dir)
    plan_path = MatrixDir(out).plan
    if not plan_path.is_file():
        raise FileNotFoundError(f"{plan_path}: not a control-matrix directory (no matrix.json)")
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    shared = MatrixDir(out).warmstart
    warmstart = {name: TestRun.from_dict(run) for name, run in json.loads(shared.read_text(encoding="utf-8")).items()} \
        if shared.is_file() else {}
    cells = []
    for path in MatrixDir(out).cell_results():
        cell = CellResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
        if (arms is None or cell.arm in arms) and (seeds is None or cell.seed_index < seeds):
            cells.append(cell)
    found = {c.arm for c in cells}
    order = list(arms) if arms is not None else [a for a in BUILTIN_ARMS if a in found] + sorted(found - set(BUILTIN_ARMS))
    cells.sort(key=lambda c: (order.index(c.arm), c.seed_index))
    evaluation = plan["params"]["evaluation"]
    finished = list(dict.fromkeys(c.arm for c in cells))
    task_values = TaskValues()
    family = family if family is not None else FamilyParams()
    equivalence = family.primary.key if family.primary.equivalence_margin is not None else None
    contrasts = tuple(
        contrast(out, [c for c in cells if c.arm == a], [c for c in cells if c.arm == b], condition, metric,
                 evaluation["bootstrap_samples"], evaluation["bootstrap_seed"], task_values,
                 equivalence=(f"{a}-{b}", condition, METRIC_LABELS[metric]) == equivalence)
        for a, b in comparison_pairs(finished) for condition in CONDITIONS for metric in METRICS
        if {c.seed_index for c in cells if c.arm == a} & {c.seed_index for c in cells if c.arm == b})
    baselines = tuple(baseline_cells(cells, read_baselines(out, seeds))) \
        if arms is None or {METHOD_ARM, REFERENCE_ARM} <= set(arms) else ()
    method = [c for c in cells if c.arm == METHOD_ARM]
    contrasts += tuple(
        contrast(out, method, [c for c in baselines if c.arm == name], "deployed", metric,
                 evaluation["bootstrap_samples"], evaluation["bootstrap_seed"], task_values)
        for name in BASELINES for metric in METRICS
        if {c.seed_index for c in method} & {c.seed_index for c in baselines if c.arm == name})
    family_arms = tuple(arms) if arms is not None else tuple(finished)
    return MatrixResult(out, plan, warmstart, tuple(cells), declared(contrasts, family, family_arms), baselines,
                        family, family_arms, task_values)
