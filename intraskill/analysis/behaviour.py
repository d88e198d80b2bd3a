"""Behaviour tables of our own episode traces, and paired behaviour deltas between two runs.

Reference: docs/release.md §1.2 (``behavior.excerpt.json``: ``paired`` blocks
``{paired_tasks, metrics{m: {n, a_mean, b_mean, difference, ci95}}}`` and ``phases`` records
``{phase, n, mean, median, p90}``) and §3.5 (the behaviour CI: each task's rows are averaged, then
``delta = b − a`` over the common tasks, 5,000 ``numpy.default_rng`` resamples seeded with the first
4 bytes of SHA-256(``"20260909:<metric>"``), ``np.quantile``; success conditioning is descriptive).

The release publishes the metric names, not their extraction rules; ours, on ``intraskill-episode-v1``
traces (:mod:`intraskill.agent.traces`), are:

* **page and phase** — a turn's page is the page the model answered: ``search_home`` for turn 0, then
  the page the last environment step returned (a protocol error leaves it unchanged). Its phase is that
  page, or ``protocol_repair`` when the previous turn was a protocol error (the model answers the
  error feedback).
* **counts** — ``model_steps`` (turns, repairs included), ``actions`` (turns that reached the
  environment), ``valid_actions`` / ``invalid_actions`` (executed / refused by the environment),
  ``protocol_errors``. Navigation counts only count executed actions: ``searches``, ``unique_queries``
  (distinct case-folded :func:`~intraskill.shop.text.normalize_query`), ``product_opens`` (a click on a
  results page that lands on a product page), ``unique_products``, ``product_revisits`` (opens − unique),
  ``pagination`` (``next >`` / ``< prev`` on a results page), ``backtracks`` (``< prev`` on a product
  page, ``back to search`` anywhere), ``option_selections`` (``axis=value`` on a product page) and
  ``option_changes`` (a selection on an axis already selected since the product was opened).
* **tokens** — a turn's ``completion_tokens`` count only when positive (every real generation has at
  least one token; the scripted expert records none). As in the release, ``tokens_per_turn`` (Σ tokens /
  ``model_steps``) and ``generated_tokens`` are defined only when every turn has a count,
  ``first_turn_tokens`` when turn 0 has one; otherwise NaN.
* **reasoning** — characters of the ``<think>…</think>`` reasoning in a turn's raw output (a reasoning
  prefix closed by ``</think>`` alone counts, an unclosed ``<think>`` counts to the end; 0 when none);
  ``reasoning_chars_per_turn`` = Σ / ``model_steps``.
* **first_product_rank** — the rank, as printed on the results page it was opened from (either view,
  read by :func:`intraskill.agent.pages.result_ranks`), of the episode's first opened product (NaN
  without an open).

:func:`compare_behaviour` returns a :class:`BehaviourComparison`: ``summary()`` (text), ``to_frame(part)``
and ``to_dict()``, with one typed :class:`PairedBlock` of :class:`BehaviourDelta` per paired subset.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.agent.pages import result_ranks
from intraskill.agent.traces import EpisodeTrace, read_traces
from intraskill.analysis.records import plain
from intraskill.chat.chatml import THINK_CLOSE, THINK_OPEN
from intraskill.evaluate.bootstrap import BEHAVIOR_SEED_BASE, numpy_paired_bootstrap
from intraskill.evaluate.summary import final_records
from intraskill.layout import EvalDir
from intraskill.shop.actions import parse_action
from intraskill.shop.observation import BACK_TO_SEARCH, BUY_NOW, NEXT_PAGE, PREV_PAGE
from intraskill.shop.text import normalize_query

if TYPE_CHECKING:
    import pandas as pd

BEHAVIOUR_SCHEMA_VERSION = "intraskill-behaviour-v1"
BEHAVIOUR_METRICS = (
    "model_steps", "tokens_per_turn", "generated_tokens", "first_turn_tokens", "searches", "unique_queries",
    "product_opens", "unique_products", "product_revisits", "backtracks", "pagination", "option_selections",
    "option_changes", "protocol_errors", "invalid_actions", "reasoning_chars_per_turn", "first_product_rank",
    "actions", "valid_actions",
)
"""The release's 17 + 2 behaviour metrics (``paired.fixed_val_both_success`` order, docs/release.md §1.2)."""
OUTCOME_COLUMNS = ("success", "reward")
PHASES = ("search_home", "search_results", "product_detail", "protocol_repair")
"""Page phases of the release ``phases`` records, in workflow order."""
PROTOCOL_REPAIR = "protocol_repair"
BEHAVIOUR_SAMPLES = 5000
"""Bootstrap resamples of the behaviour CIs (docs/release.md §3.5)."""
RELEASE_BEHAVIOUR_FILE = Path("analysis") / "behavior" / "behavior.excerpt.json"


class ActionKind(str, Enum):
    """What one environment action did (``None`` for a protocol-error turn)."""

    SEARCH = "search"
    PRODUCT_OPEN = "product_open"
    PAGINATION = "pagination"
    BACKTRACK = "backtrack"
    OPTION = "option"
    BUY = "buy"
    OTHER = "other"
    INVALID = "invalid"


@dataclass(frozen=True)
class TurnBehaviour:
    """One model turn, classified (see the module docstring for the rules).

    ``tokens`` is ``None`` when the turn has no token count; ``query`` is set for searches,
    ``opened_asin`` / ``opened_rank`` for product opens, ``option_change`` for option selections.
    """

    turn: int
    phase: str
    page: str
    action: str | None
    kind: str | None
    valid: bool | None
    protocol_error: str | None
    tokens: int | None
    output_chars: int
    reasoning_chars: int
    query: str | None = None
    opened_asin: str | None = None
    opened_rank: int | None = None
    option_change: bool = False


def reasoning_text(text: str) -> str:
    """The ``<think>`` reasoning of a raw completion, stripped (empty when there is none).

    >>> reasoning_text("<think> compare prices </think><tool_call>{}</tool_call>")
    'compare prices'
    """
    if THINK_CLOSE in text:
        body = text[: text.rindex(THINK_CLOSE)]
        body = body.split(THINK_OPEN, 1)[1] if THINK_OPEN in body else body
    elif THINK_OPEN in text:
        body = text.split(THINK_OPEN, 1)[1]
    else:
        return ""
    return body.strip()


def reasoning_chars(text: str) -> int:
    """Characters of the ``<think>`` reasoning in a raw completion (0 when there is none).

    >>> reasoning_chars("<think>compare prices</think><tool_call>{}</tool_call>")
    14
    >>> reasoning_chars("<tool_call>{}</tool_call>")
    0
    """
    return len(reasoning_text(text))


def _kind(action: str, valid: bool | None, page: str, next_page: str | None) -> ActionKind:
    if not valid:
        return ActionKind.INVALID
    parsed = parse_action(action)
    if parsed.name == "search":
        return ActionKind.SEARCH
    value = parsed.argument
    if value == BUY_NOW:
        return ActionKind.BUY
    if value == BACK_TO_SEARCH:
        return ActionKind.BACKTRACK
    if page == "search_results":
        if value in (NEXT_PAGE, PREV_PAGE):
            return ActionKind.PAGINATION
        if next_page == "product_detail":
            return ActionKind.PRODUCT_OPEN
    if page == "product_detail":
        if value == PREV_PAGE:
            return ActionKind.BACKTRACK
        if "=" in value:
            return ActionKind.OPTION
    return ActionKind.OTHER


def turn_behaviours(trace: EpisodeTrace) -> list[TurnBehaviour]:
    """Classify every turn of one episode trace (page, phase, action kind, tokens, reasoning, rank)."""
    page, page_text, repairing = "search_home", None, False
    selected_axes: set[str] = set()
    turns = []
    for record in trace.turns:
        kind = _kind(record.action, record.action_valid, page, record.page_type) if record.action else None
        argument = parse_action(record.action).argument if kind not in (None, ActionKind.INVALID) else None
        extra: dict[str, Any] = {}
        if kind is ActionKind.SEARCH:
            extra["query"] = normalize_query(argument).casefold()
        elif kind is ActionKind.PRODUCT_OPEN:
            extra = {"opened_asin": argument, "opened_rank": result_ranks(page_text).get(argument)}
            selected_axes = set()
        elif kind is ActionKind.OPTION:
            axis = argument.split("=", 1)[0]
            extra["option_change"] = axis in selected_axes
            selected_axes.add(axis)
        turns.append(TurnBehaviour(
            turn=record.turn, phase=PROTOCOL_REPAIR if repairing else page, page=page, action=record.action,
            kind=kind.value if kind else None, valid=record.action_valid,
            protocol_error=record.protocol_error,
            tokens=record.completion_tokens if record.completion_tokens > 0 else None,
            output_chars=len(record.raw_output), reasoning_chars=reasoning_chars(record.raw_output), **extra,
        ))
        repairing = record.protocol_error is not None
        if record.page_type is not None:
            page, page_text = record.page_type, record.observation
    return turns


def episode_behaviour(trace: EpisodeTrace) -> dict[str, float]:
    """The :data:`BEHAVIOUR_METRICS` of one episode (NaN where undefined), plus success and reward."""
    turns = turn_behaviours(trace)
    steps = len(turns)
    kinds = [t.kind for t in turns]
    opens = [t for t in turns if t.kind == ActionKind.PRODUCT_OPEN.value]
    first_rank = opens[0].opened_rank if opens else None
    tokens = [t.tokens for t in turns]
    counted = steps > 0 and all(count is not None for count in tokens)
    nan = math.nan
    return {
        "model_steps": float(steps),
        "tokens_per_turn": sum(tokens) / steps if counted else nan,
        "generated_tokens": float(sum(tokens)) if counted else nan,
        "first_turn_tokens": float(tokens[0]) if steps and tokens[0] is not None else nan,
        "searches": float(kinds.count(ActionKind.SEARCH.value)),
        "unique_queries": float(len({t.query for t in turns if t.query is not None})),
        "product_opens": float(len(opens)),
        "unique_products": float(len({t.opened_asin for t in opens})),
        "product_revisits": float(len(opens) - len({t.opened_asin for t in opens})),
        "backtracks": float(kinds.count(ActionKind.BACKTRACK.value)),
        "pagination": float(kinds.count(ActionKind.PAGINATION.value)),
        "option_selections": float(kinds.count(ActionKind.OPTION.value)),
        "option_changes": float(sum(t.option_change for t in turns)),
        "protocol_errors": float(sum(t.protocol_error is not None for t in turns)),
        "invalid_actions": float(kinds.count(ActionKind.INVALID.value)),
        "reasoning_chars_per_turn": sum(t.reasoning_chars for t in turns) / steps if steps else nan,
        "first_product_rank": float(first_rank) if first_rank is not None else nan,
        "actions": float(sum(t.action is not None for t in turns)),
        "valid_actions": float(sum(t.action is not None and t.valid is True for t in turns)),
        "success": trace.reward.r_success if trace.reward is not None else nan,
        "reward": trace.reward.reward if trace.reward is not None else nan,
    }


def scored_traces(source: str | Path | Iterable[EpisodeTrace]) -> list[EpisodeTrace]:
    """The scored episodes of a run: per episode its completed record with a reward.

    ``source`` is a run directory (with ``traces.jsonl``), a traces JSONL file, or trace records.
    Failed attempts are not samples (docs/release.md §3.1 extraction rule); two completed records of one
    episode raise :class:`~intraskill.evaluate.summary.DuplicateEpisodeError`.
    """
    if isinstance(source, (str, Path)):
        path = Path(source)
        path = EvalDir(path).traces if path.is_dir() else path
        if not path.is_file():
            raise FileNotFoundError(f"no traces at {path} (expected a run directory or a traces.jsonl)")
        source = read_traces(path)
    completed, _ = final_records(source)
    return [trace for trace in completed.values() if trace.reward is not None]


def turn_table(traces: str | Path | Iterable[EpisodeTrace]) -> "pd.DataFrame":
    """One row per model turn of the scored episodes: ``episode_id, task_id, sample_id`` and the
    :class:`TurnBehaviour` fields (``tokens`` NaN where not counted)."""
    # deferred: pandas is heavy to import
    import pandas as pd

    columns = ["episode_id", "task_id", "sample_id", *TurnBehaviour.__dataclass_fields__]
    rows = [
        {"episode_id": t.episode_id, "task_id": t.task_id, "sample_id": t.sample_id, **asdict(turn)}
        for t in scored_traces(traces) for turn in turn_behaviours(t)
    ]
    table = pd.DataFrame(rows, columns=columns)
    table["tokens"] = pd.to_numeric(table["tokens"], errors="coerce").astype(float)
    return table


def episode_table(traces: str | Path | Iterable[EpisodeTrace]) -> "pd.DataFrame":
    """One row per scored episode: ``episode_id, task_id, sample_id``, the :data:`BEHAVIOUR_METRICS`,
    ``success``, ``reward`` and ``termination_reason``."""
    # deferred: pandas is heavy to import
    import pandas as pd

    columns = ["episode_id", "task_id", "sample_id", *BEHAVIOUR_METRICS, *OUTCOME_COLUMNS,
               "termination_reason"]
    rows = [
        {"episode_id": t.episode_id, "task_id": t.task_id, "sample_id": t.sample_id, **episode_behaviour(t),
         "termination_reason": t.termination_reason}
        for t in scored_traces(traces)
    ]
    return pd.DataFrame(rows, columns=columns)


def phase_summary(turns: "pd.DataFrame", value: str = "tokens") -> "pd.DataFrame":
    """Per-turn ``value`` by page phase: ``phase, n, n_values, mean, median, p90``.

    ``n`` counts the turns in the phase (as in the release records), ``n_values`` those where ``value``
    is defined; the statistics use the latter (NaN when none). ``p90`` is numpy's linear quantile.
    """
    # deferred: numpy is heavy to import
    import numpy as np

    # deferred: pandas is heavy to import
    import pandas as pd

    if value not in turns.columns:
        raise KeyError(f"value: no turn column {value!r}; expected one of {list(turns.columns)}")
    phases = [*PHASES, *sorted(set(turns["phase"]) - set(PHASES))]
    rows = []
    for phase in phases:
        part = turns.loc[turns["phase"] == phase, value]
        values = part.dropna().to_numpy(dtype=float)
        stats = (values.mean(), np.median(values), np.quantile(values, 0.9)) if values.size else (np.nan,) * 3
        rows.append({"phase": phase, "n": int(part.size), "n_values": int(values.size),
                     **dict(zip(("mean", "median", "p90"), map(float, stats)))})
    return pd.DataFrame(rows)


def task_means(episodes: "pd.DataFrame", metrics: Sequence[str] = BEHAVIOUR_METRICS) -> "pd.DataFrame":
    """Each task's mean of ``metrics`` over its episodes (repeats, siblings), NaN values skipped."""
    missing = [m for m in (*metrics, "task_id") if m not in episodes.columns]
    if missing:
        raise KeyError(f"episodes: missing column(s) {missing}")
    return episodes.groupby("task_id")[list(metrics)].mean().sort_index()


DELTA_HEADER = f"{'metric':<26} {'n':>4} {'a mean':>10} {'b mean':>10} {'b - a':>10}  [95% CI]"
"""Column header of the rows :meth:`BehaviourDelta.line` prints."""
MISSING = "-"
DELTA_COLUMNS = ("metric", "n", "a_mean", "b_mean", "difference", "ci_lo", "ci_hi")
"""Columns of :meth:`PairedBlock.to_frame`."""


@dataclass(frozen=True)
class BehaviourDelta:
    """Paired difference ``b − a`` of one behaviour metric over ``n`` tasks, with its 95 % bootstrap CI.

    The means, the difference and the CI are ``None`` when ``n == 0`` (no common task defines the metric).
    """

    n: int
    a_mean: float | None
    b_mean: float | None
    difference: float | None
    ci95: tuple[float, float] | None

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "BehaviourDelta":
        """A ``paired`` metric record (ours or the release's; keys starting with ``_`` are ignored)."""
        ci95 = record["ci95"]
        return cls(n=record["n"], a_mean=record["a_mean"], b_mean=record["b_mean"],
                   difference=record["difference"], ci95=None if ci95 is None else (ci95[0], ci95[1]))

    def line(self, metric: str) -> str:
        """One row under :data:`DELTA_HEADER`."""
        if self.difference is None or self.ci95 is None:
            return f"{metric:<26} {self.n:>4} {MISSING:>10} {MISSING:>10} {MISSING:>10}"
        low, high = self.ci95
        return (f"{metric:<26} {self.n:>4} {self.a_mean:>10.4g} {self.b_mean:>10.4g} "
                f"{self.difference:>+10.4g}  [{low:+.4g}, {high:+.4g}]")


@dataclass(frozen=True)
class PairedBlock:
    """The release ``paired`` block of two runs: ``paired_tasks`` common tasks and one
    :class:`BehaviourDelta` per metric (build with :func:`paired_block`)."""

    paired_tasks: int
    metrics: Mapping[str, BehaviourDelta]

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "PairedBlock":
        """A ``paired`` block record, e.g. the release's ``paired["fixed_val_all"]``."""
        metrics = {name: BehaviourDelta.from_dict(stats) for name, stats in record["metrics"].items()}
        return cls(paired_tasks=record["paired_tasks"], metrics=metrics)

    def to_frame(self) -> "pd.DataFrame":
        """One row per metric: ``metric, n, a_mean, b_mean, difference, ci_lo, ci_hi`` (NaN where
        ``n == 0``; the input of :func:`intraskill.plots.behaviour_deltas`)."""
        # deferred: pandas is heavy to import
        import pandas as pd

        rows = []
        for metric, delta in self.metrics.items():
            low, high = delta.ci95 or (None, None)
            rows.append({"metric": metric, "n": delta.n, "a_mean": delta.a_mean, "b_mean": delta.b_mean,
                         "difference": delta.difference, "ci_lo": low, "ci_hi": high})
        table = pd.DataFrame(rows, columns=list(DELTA_COLUMNS))
        numeric = list(DELTA_COLUMNS[2:])
        table[numeric] = table[numeric].astype(float)
        return table


def _metric_delta(
    a: Sequence[float], b: Sequence[float], metric: str, samples: int, seed_base: int
) -> BehaviourDelta:
    if not a:
        return BehaviourDelta(n=0, a_mean=None, b_mean=None, difference=None, ci95=None)
    result = numpy_paired_bootstrap(a, b, metric, samples=samples, seed_base=seed_base)
    return BehaviourDelta(n=result.pairs, a_mean=result.a_mean, b_mean=result.b_mean,
                          difference=result.mean_difference, ci95=result.ci95)


def paired_block(
    a: "pd.DataFrame",
    b: "pd.DataFrame",
    metrics: Sequence[str] = BEHAVIOUR_METRICS,
    *,
    samples: int = BEHAVIOUR_SAMPLES,
    seed_base: int = BEHAVIOR_SEED_BASE,
) -> PairedBlock:
    """The release ``paired`` block of two episode tables (docs/release.md §1.2).

    Each task's episodes are averaged first (:func:`task_means`), then the tasks common to both runs are
    paired; a metric's ``n`` counts the common tasks where both runs define it (its values are ``None``
    when ``n == 0``). CIs: :func:`~intraskill.evaluate.bootstrap.numpy_paired_bootstrap` per metric.
    """
    a_means, b_means = task_means(a, metrics), task_means(b, metrics)
    common = a_means.index.intersection(b_means.index).sort_values()
    deltas = {}
    for metric in metrics:
        x, y = a_means.loc[common, metric], b_means.loc[common, metric]
        keep = x.notna() & y.notna()
        deltas[metric] = _metric_delta(x[keep].tolist(), y[keep].tolist(), metric, samples, seed_base)
    return PairedBlock(paired_tasks=len(common), metrics=deltas)


SUBSETS = ("all", "both_success")
"""The paired subsets of a :class:`BehaviourComparison`; ``both_success`` is descriptive."""


@dataclass(frozen=True, eq=False)
class BehaviourComparison:
    """Behaviour of two runs and their paired deltas ``b − a`` (build with :func:`compare_behaviour`).

    ``summary()`` is a readable text of the runs and both paired blocks, ``to_frame(part)`` one table per
    part of :attr:`FRAMES` and ``to_dict()`` the JSON-ready record.

    Attributes
    ----------
    a_label, b_label : display names of the reference arm ``a`` and the compared arm ``b``.
    a_turns, b_turns : :func:`turn_table` of each run.
    a_episodes, b_episodes : :func:`episode_table` of each run.
    paired : one :class:`PairedBlock` per subset of :data:`SUBSETS`; ``both_success`` keeps each run's
        successful episodes only and is descriptive (post-treatment conditioning).
    samples, seed_base : the bootstrap settings the CIs were computed with.
    sources : where each run's traces came from (``None`` for in-memory traces).
    """

    a_label: str
    b_label: str
    a_turns: "pd.DataFrame"
    b_turns: "pd.DataFrame"
    a_episodes: "pd.DataFrame"
    b_episodes: "pd.DataFrame"
    paired: Mapping[str, PairedBlock]
    samples: int = BEHAVIOUR_SAMPLES
    seed_base: int = BEHAVIOR_SEED_BASE
    sources: Mapping[str, str | None] = field(default_factory=dict)

    FRAMES = (*SUBSETS, "means", "phases")

    @property
    def uncertainty(self) -> dict[str, str]:
        """How the CIs were computed (the release ``uncertainty`` summary, with our settings)."""
        return {
            "method": f"paired task bootstrap, {self.samples} resamples, numpy.default_rng, "
                      f"metric-hashed seed {self.seed_base}",
            "seed": f"int.from_bytes(sha256(f'{self.seed_base}:{{metric}}').digest()[:4], 'big')",
            "pairing": "average repeated episodes within each task, then pair common tasks; a metric's n "
                       "counts the common tasks where both runs define it",
            "success_conditioning": "descriptive/post-treatment: both_success keeps each run's successful "
                                    "episodes, so the compared episode mix differs between runs",
        }

    def _arms(self) -> tuple[tuple[str, str, "pd.DataFrame", "pd.DataFrame"], ...]:
        """``(arm, label, turns, episodes)`` of ``a`` and ``b``."""
        return (("a", self.a_label, self.a_turns, self.a_episodes),
                ("b", self.b_label, self.b_turns, self.b_episodes))

    @property
    def records_tokens(self) -> bool:
        """Whether every turn of both runs has a token count."""
        return all(len(turns) and turns["tokens"].notna().all() for _, _, turns, _ in self._arms())

    def phases(self, value: str | None = None) -> "pd.DataFrame":
        """:func:`phase_summary` of both runs, with ``arm`` (a / b), ``run`` (label) and ``value`` columns.

        ``value=None`` takes ``tokens`` when both runs record token counts, else ``output_chars``.
        """
        # deferred: pandas is heavy to import
        import pandas as pd

        value = value or ("tokens" if self.records_tokens else "output_chars")
        parts = [phase_summary(turns, value).assign(arm=arm, run=label, value=value)
                 for arm, label, turns, _ in self._arms()]
        table = pd.concat(parts, ignore_index=True)
        return table[["arm", "run", "value", "phase", "n", "n_values", "mean", "median", "p90"]]

    def to_frame(self, part: str = "all") -> "pd.DataFrame":
        """One table of :attr:`FRAMES`.

        ``all`` / ``both_success``: that paired subset (:meth:`PairedBlock.to_frame`); ``means``: each run's
        episode mean of every metric and outcome, with how many episodes define it (columns
        ``(label, "mean" | "n")``); ``phases``: :meth:`phases` with its default value.
        """
        if part in self.paired:
            return self.paired[part].to_frame()
        if part == "phases":
            return self.phases()
        if part == "means":
            return self._means()
        raise KeyError(f"part: expected a paired subset {list(self.paired)}, 'means' or 'phases', "
                       f"got {part!r}")

    def _means(self) -> "pd.DataFrame":
        # deferred: pandas is heavy to import
        import pandas as pd

        columns = [*BEHAVIOUR_METRICS, *OUTCOME_COLUMNS]
        parts = {}
        for _, label, _, episodes in self._arms():
            parts[(label, "mean")] = episodes[columns].mean()
            parts[(label, "n")] = episodes[columns].notna().sum()
        return pd.DataFrame(parts)

    def _runs(self) -> dict[str, dict[str, Any]]:
        return {
            arm: {"label": label, "source": self.sources.get(arm), "episodes": len(episodes),
                  "tasks": int(episodes["task_id"].nunique())}
            for arm, label, _, episodes in self._arms()
        }

    def summary(self) -> str:
        """Readable text: both runs, how the CIs were computed and each paired subset, one row per metric."""
        lines = ["Behaviour comparison (b - a)"]
        lines += [f"{arm}: {run['label']}  ({run['episodes']} episodes, {run['tasks']} tasks"
                  f"{', ' + run['source'] if run['source'] else ''})" for arm, run in self._runs().items()]
        lines.append(f"CIs: {self.uncertainty['method']}")
        for name, block in self.paired.items():
            note = "; descriptive, conditioned on success" if name == "both_success" else ""
            lines += ["", f"{name}: {block.paired_tasks} paired tasks{note}", DELTA_HEADER,
                      "-" * len(DELTA_HEADER)]
            lines += [delta.line(metric) for metric, delta in block.metrics.items()]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record: runs, ``uncertainty``, the ``paired`` blocks and per-run ``phases``."""
        paired = {name: {**plain(block), "descriptive": True} if name == "both_success" else plain(block)
                  for name, block in self.paired.items()}
        return plain({
            "schema_version": BEHAVIOUR_SCHEMA_VERSION,
            "runs": self._runs(),
            "difference": "b - a",
            "uncertainty": self.uncertainty,
            "paired": paired,
            "phases": self.phases().drop(columns=["run"]).to_dict("records"),
        })


def compare_behaviour(
    a: str | Path | Iterable[EpisodeTrace],
    b: str | Path | Iterable[EpisodeTrace],
    *,
    a_label: str = "a",
    b_label: str = "b",
    metrics: Sequence[str] = BEHAVIOUR_METRICS,
    samples: int = BEHAVIOUR_SAMPLES,
    seed_base: int = BEHAVIOR_SEED_BASE,
) -> BehaviourComparison:
    """Behaviour tables of two runs and their paired deltas ``b − a``, overall and on both-success.

    Parameters
    ----------
    a, b : run directory, traces JSONL file or trace records of the reference and the compared run.
    a_label, b_label : display names.
    metrics : which episode metrics to pair (default: all :data:`BEHAVIOUR_METRICS`).
    samples, seed_base : bootstrap resamples (5,000) and seed base (20260909), docs/release.md §3.5.

    Returns
    -------
    BehaviourComparison
    """
    if a_label == b_label:
        raise ValueError(f"b_label: must differ from a_label (both are {a_label!r})")
    unknown = sorted(set(metrics) - set(BEHAVIOUR_METRICS))
    if unknown:
        raise ValueError(f"metrics: unknown {unknown}; expected names from {BEHAVIOUR_METRICS}")
    sources = {arm: str(run) if isinstance(run, (str, Path)) else None for arm, run in (("a", a), ("b", b))}
    traces = {arm: scored_traces(run) for arm, run in (("a", a), ("b", b))}
    for arm, records in traces.items():
        if not records:
            raise ValueError(f"{arm}: no scored episodes in {sources[arm] or 'the given traces'}")
    episodes = {arm: episode_table(records) for arm, records in traces.items()}
    won = {arm: table[table["success"] == 1.0] for arm, table in episodes.items()}
    settings = {"samples": samples, "seed_base": seed_base}
    return BehaviourComparison(
        a_label=a_label, b_label=b_label,
        a_turns=turn_table(traces["a"]), b_turns=turn_table(traces["b"]),
        a_episodes=episodes["a"], b_episodes=episodes["b"],
        paired={"all": paired_block(episodes["a"], episodes["b"], metrics, **settings),
                "both_success": paired_block(won["a"], won["b"], metrics, **settings)},
        sources=sources, **settings,
    )


def release_behaviour(release_dir: str | Path) -> dict[str, Any]:
    """The release's published behaviour excerpt (``analysis/behavior/behavior.excerpt.json``)."""
    path = Path(release_dir) / RELEASE_BEHAVIOUR_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no behaviour excerpt at {path}")
    return json.loads(path.read_text(encoding="utf-8"))


def side_by_side(
    comparison: BehaviourComparison,
    release: Mapping[str, Any],
    *,
    subset: str = "all",
    cohort: str = "fixed_val_all",
) -> "pd.DataFrame":
    """Our ``paired[subset]`` next to the release's ``paired[cohort]`` (Base → Iter80), one row per metric.

    Columns are ``(source, field)`` pairs with source ``release`` / ``ours`` and fields ``n, a_mean,
    b_mean, difference, ci_lo, ci_hi``; a metric missing on one side is NaN there.
    """
    # deferred: pandas is heavy to import
    import pandas as pd

    try:
        theirs = PairedBlock.from_dict(release["paired"][cohort]).to_frame().set_index("metric")
    except KeyError:
        raise KeyError(f"release: no paired[{cohort!r}].metrics") from None
    ours = comparison.to_frame(subset).set_index("metric")
    table = pd.concat({"release": theirs, "ours": ours}, axis=1, names=["source", "field"])
    order = [metric for metric in BEHAVIOUR_METRICS if metric in table.index]
    return table.loc[order].rename_axis(index=None).astype(float)
