"""Tidy tables for the plots, built from the analysis layer's records and the release files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from intraskill.jsonl import read_jsonl
from intraskill.plots.contributions import short_id
from intraskill.skills.render import chunk_title

if TYPE_CHECKING:
    import pandas as pd

TICK_TITLE_CHARS = 18
"""Longest chunk title shown on a contribution tick (longer ones end in …)."""

def read_step_metrics(path: str | Path) -> "pd.DataFrame":
    """Per-step metrics from a CSV (release ``training_steps.csv``; empty cells → NaN) or a JSONL file
    (our per-step metrics, same column names), sorted by ``step``."""
    # deferred: pandas is heavy to import
    import pandas as pd

    source = Path(path)
    if source.suffix == ".jsonl":
        table = pd.DataFrame(read_jsonl(source))
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


def bank_titles(path: str | Path) -> dict[str, str]:
    """``skill_id`` → title of every skill of a SkillBank JSON file (the release's or ours)."""
    bank = json.loads(Path(path).read_text(encoding="utf-8"))
    return {str(skill["skill_id"]): chunk_title(str(skill.get("content", ""))) for skill in bank.get("skills", [])}


def label_chunks(table: "pd.DataFrame", titles: Mapping[str, str]) -> "pd.DataFrame":
    """``table`` with a ``label`` column for :func:`~intraskill.plots.chunk_contributions`: the short id and,
    where ``titles`` knows the chunk, its (shortened) title instead of the bare hash."""
    def tick(intervention_id: str) -> str:
        title = titles.get(intervention_id)
        if not title:
            return short_id(intervention_id)
        short = title if len(title) <= TICK_TITLE_CHARS else title[: TICK_TITLE_CHARS - 1] + "…"
        return f"{short} ({short_id(intervention_id)[:4]})"

    return table.assign(label=[tick(str(i)) for i in table["intervention_id"]])
