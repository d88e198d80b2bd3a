"""Tidy tables for the plots, built from the analysis layer's records and the release files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    import pandas as pd

COMPARISON_METRICS = (("success", "r_success"), ("reward", "reward"))
"""(column prefix in the tidy table, metric key in ``release_compare`` records)."""


def condition_table(test: Mapping[str, Mapping[str, Any]]) -> "pd.DataFrame":
    """``reanalyse_release(...)["test"]`` (arm → row) as one row per arm with an ``arm`` column."""
    import pandas as pd

    return pd.DataFrame([{"arm": arm, **row} for arm, row in test.items()])


def comparison_table(comparisons: Mapping[str, Mapping[str, Any]]) -> "pd.DataFrame":
    """``reanalyse_release(...)["comparisons"]`` flattened: ``name, a, b, success_diff/_lo/_hi,
    reward_diff/_lo/_hi`` and the four success-transition counts."""
    import pandas as pd

    rows = []
    for name, record in comparisons.items():
        row: dict[str, Any] = {"name": name, "a": record["a"], "b": record["b"]}
        for prefix, metric in COMPARISON_METRICS:
            stats = record["metrics"][metric]
            row[f"{prefix}_diff"] = stats["mean_difference"]
            row[f"{prefix}_lo"], row[f"{prefix}_hi"] = stats["ci95"]
        row.update(record.get("transitions", {}))
        rows.append(row)
    return pd.DataFrame(rows)


def read_step_metrics(path: str | Path) -> "pd.DataFrame":
    """Per-step metrics from a CSV (release ``training_steps.csv``; empty cells → NaN) or a JSONL file
    (our per-step metrics, same column names), sorted by ``step``."""
    import pandas as pd

    source = Path(path)
    if source.suffix == ".jsonl":
        table = pd.DataFrame([json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line])
    else:
        table = pd.read_csv(source)
    if "step" not in table.columns:
        raise ValueError(f"{source}: no 'step' column")
    return table.sort_values("step").reset_index(drop=True)


def behaviour_tables(behaviour: Mapping[str, Any], cohort: str = "fixed_val_all") -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """(paired, phases) tables from a release-style ``behavior.json`` (or its excerpt).

    ``paired`` has ``metric, n, a_mean, b_mean, difference, ci_lo, ci_hi`` for ``paired[cohort]``;
    ``phases`` has ``round, phase, n, mean, median, p90``.
    """
    import pandas as pd

    try:
        metrics = behaviour["paired"][cohort]["metrics"]
    except KeyError:
        raise KeyError(f"behaviour data has no paired[{cohort!r}].metrics") from None
    paired = pd.DataFrame(
        [
            {
                "metric": name,
                "n": stats["n"],
                "a_mean": stats["a_mean"],
                "b_mean": stats["b_mean"],
                "difference": stats["difference"],
                "ci_lo": stats["ci95"][0],
                "ci_hi": stats["ci95"][1],
            }
            for name, stats in metrics.items()
        ]
    )
    return paired, pd.DataFrame(behaviour.get("phases", []))
