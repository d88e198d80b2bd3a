"""``intraskill release …``: recompute the public release's headline numbers from its files."""

from __future__ import annotations

from typing import Any, Optional

import typer

from intraskill.cli.common import JSON_OPTION, default, emit, fail
from intraskill.params import EvaluationParams

app = typer.Typer(
    help="Re-analyse the public IntraSkill release (test CIs, gates, W&B reconciliation).",
    no_args_is_help=True,
)

SAMPLES_OPTION = typer.Option(default(EvaluationParams, "bootstrap_samples"), "--samples", min=1,
                              help="Bootstrap resamples.")
ARTIFACTS_HELP = (
    "Release artifacts folder (default: $INTRASKILL_RELEASE_DIR or the shipped data/intraskill-release)."
)


COMPARISON_HEADER = (
    f"{'comparison (b - a)':<28} {'success pp [95% CI]':<26} {'reward [95% CI]':<30} 0->1/1->0/1->1/0->0"
)
ROUND_HEADER = (
    f"{'round':>5} {'step':>4} {'in':>3} {'out':>3} {'cand':>4} {'bare succ':>9} {'masked':>7}"
    "  gate delta [95% CI]"
)


def _resolve(artifacts: Optional[str]) -> Any:
    from intraskill.analysis.release import locate_release_dir

    try:
        return locate_release_dir(artifacts)
    except FileNotFoundError as error:
        fail(f"--artifacts: {error}")


def _pct(value: float) -> str:
    return f"{100 * value:+.2f}"


def _format_comparison(name: str, record: dict[str, Any]) -> str:
    success, reward = record["metrics"]["r_success"], record["metrics"]["reward"]
    lo, hi = success["ci95"]
    rlo, rhi = reward["ci95"]
    moves = record["transitions"]
    return (
        f"{name:<28} {_pct(success['mean_difference']):>7} [{_pct(lo)}, {_pct(hi)}]  "
        f"{reward['mean_difference']:+.5f} [{rlo:+.5f}, {rhi:+.5f}]  "
        f"{moves['0->1']}/{moves['1->0']}/{moves['1->1']}/{moves['0->0']}"
    )


@app.command()
def compare(
    a: str = typer.Argument(..., metavar="A", help="Reference arm A: base_free, base_s0, iter80_free or iter80_st."),
    b: str = typer.Argument(..., metavar="B", help="Treatment arm B; differences are B − A."),
    artifacts: Optional[str] = typer.Option(None, "--artifacts", help=ARTIFACTS_HELP),
    samples: int = SAMPLES_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Paired bootstrap comparison of two test arms (reward, r_success, success transitions)."""
    from intraskill.analysis.release import ARMS, release_compare

    for name, arm in (("A", a), ("B", b)):
        if arm not in ARMS:
            fail(f"{name}: unknown arm {arm!r}; choose one of {', '.join(ARMS)}")
    result = release_compare(_resolve(artifacts), a, b, samples=samples)
    emit(result, as_json, f"{COMPARISON_HEADER}\n{_format_comparison(f'{b} - {a}', result)}")


@app.command()
def reanalyse(
    artifacts: Optional[str] = typer.Option(None, "--artifacts", help=ARTIFACTS_HELP),
    samples: int = SAMPLES_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Recompute the test table, all six comparisons, gate rounds, W&B reconciliation and OLS refits."""
    from intraskill.analysis.release import reanalyse_release

    result = reanalyse_release(_resolve(artifacts), samples=samples)
    if as_json:
        emit(result, as_json)
        return
    typer.echo(f"Release: {result['artifacts_dir']}\n")
    typer.echo(f"{'arm':<12} {'reward':>9} {'success':>8} {'n':>4} {'|err| vs summary':>17}")
    for arm, row in result["test"].items():
        typer.echo(
            f"{arm:<12} {row['reward_mean']:>9.6f} {100 * row['success_rate']:>7.2f}% {row['n']:>4} "
            f"{row['max_abs_error']:>17.1e}"
        )
    typer.echo(f"\n{COMPARISON_HEADER}")
    for name, record in result["comparisons"].items():
        typer.echo(_format_comparison(name, record))
    typer.echo(f"\n{ROUND_HEADER}")
    for row in result["rounds"]:
        delta = row["gate_delta"]
        typer.echo(
            f"{row['round']:>5} {row['step']:>4} {row['input_chunks']:>3} {row['selected_chunks']:>3} "
            f"{row['candidates']:>4} {100 * row['bare_success']:>8.2f}% "
            f"{100 * row['masked_success']:>6.2f}%  "
            f"{delta['mean_difference']:+.4f} [{delta['ci95'][0]:+.4f}, {delta['ci95'][1]:+.4f}]"
        )
    typer.echo(f"\nchunks per bank: {' -> '.join(str(c) for c in result['chunk_sequence'])}")
    recon = result["wandb_reconciliation"]
    typer.echo(
        f"W&B reconciliation: {recon['compared_numeric_values']} values, max |error| {recon['max_abs_error']}"
    )
    for refit in result["gate_refits"]:
        typer.echo(
            f"refit {refit['round']}: k={refit['columns']} n={refit['observations']} "
            f"max |dbeta|={refit['max_abs_diff']:.2e}"
        )
