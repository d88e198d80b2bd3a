"""Tidy tables for the plots, built from the analysis layer's records and the release files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    import pandas as pd

def read_step_metrics(path: str | Path) -> "pd.DataFrame":
    """Per-step metrics from a CSV (release ``training_steps.csv``; empty cells → NaN) or a JSONL file
    (our per-step metrics, same column names), sorted by ``step``."""
    # deferred: pandas is heavy to import
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
    # deferred: pandas is heavy to import
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
