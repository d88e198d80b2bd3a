"""``intraskill trace2skill …``: failure analysis of a training round."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from intraskill.cli.common import JSON_OPTION, PROGRESS_OPTION, SET_OPTION, emit, fail, load
from intraskill.cli.common import ALLOW_OUTSIDE_OPTION, confined
from intraskill.params import MAX_CANDIDATES

if TYPE_CHECKING:
    from intraskill.trace2skill.analysts import AnalystSettings

app = typer.Typer(help="Trace2Skill: failure cards, candidates, pool and ledger.", no_args_is_help=True)

ANALYST_OPTION = typer.Option("rule", "--analyst", help="Failure analyst: rule (offline, default) or llm.")
ANALYST_URL_OPTION = typer.Option(None, "--analyst-url",
                                  help="llm: OpenAI-compatible root, e.g. http://127.0.0.1:30000/v1 (required).")
ANALYST_MODEL_OPTION = typer.Option(None, "--analyst-model", help="llm: served model name (intraskill-policy).")
ANALYST_MAX_TURNS_OPTION = typer.Option(None, "--analyst-max-turns",
                                        help="llm: analyst turns per card, the last = submit (20).")
ANALYST_MAX_TOKENS_OPTION = typer.Option(None, "--analyst-max-tokens",
                                         help="llm: completion tokens per analyst turn (4096).")


def analyst_settings(kind: str, url: str | None, model: str | None, max_turns: int | None,
                     max_tokens: int | None) -> AnalystSettings:
    """The ``--analyst*`` flags as settings (the ones not given keep their defaults); one line on a bad flag."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.trace2skill.analysts import AnalystSettings

    given = {"model": model, "max_turns": max_turns, "max_tokens": max_tokens}
    try:
        return AnalystSettings(kind, url, **{k: v for k, v in given.items() if v is not None})
    except ValueError as error:
        fail(str(error))


@app.command()
def analyze(
    round_dir: Path = typer.Option(..., "--round-dir", exists=True, file_okay=False,
                                   help="Round directory holding analysis_queue.jsonl."),
    store: Path = typer.Option(..., "--store", exists=True, file_okay=False, help="Built store directory."),
    bank: Path = typer.Option(..., "--bank", exists=True, dir_okay=False, help="The current SkillBank JSON."),
    analyst: str = ANALYST_OPTION,
    analyst_url: str = ANALYST_URL_OPTION,
    analyst_model: str = ANALYST_MODEL_OPTION,
    analyst_max_turns: int = ANALYST_MAX_TURNS_OPTION,
    analyst_max_tokens: int = ANALYST_MAX_TOKENS_OPTION,
    round_id: str = typer.Option(None, "--round-id", help="Round ID; default: the round directory's name."),
    checkpoint_id: str = typer.Option(None, "--checkpoint-id",
                                      help="Proposal checkpoint; default: the round ID."),
    ledger_history: Path = typer.Option(None, "--ledger-history", exists=True, dir_okay=False,
                                        help="The previous gate's proposal_ledger.jsonl."),
    max_candidates: int = typer.Option(MAX_CANDIDATES, "--max-candidates",
                                       help="ADD/REWRITE candidates per round (1-16)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Analyze the round's failed full-skill retries and write the candidate pool and ledger."""
    settings = analyst_settings(analyst, analyst_url, analyst_model, analyst_max_turns, analyst_max_tokens)
    # deferred: a verb loads its stage only when it runs
    from intraskill.shop.build import open_store
    from intraskill.shop.engine import ShopEngine
    from intraskill.skills.bank import load_skillbank
    from intraskill.trace2skill.analysis import AnalysisConfig, run_analysis
    from intraskill.trace2skill.analysts import open_analyst
    from intraskill.trace2skill.ledger import read_ledger
    from intraskill.trace2skill.submission import check_max_candidates

    check_max_candidates(max_candidates)
    current = load_skillbank(bank)
    catalog, index, _ = open_store(store)
    engine = ShopEngine(catalog.products, catalog.goals, index)
    round_id = round_id or round_dir.name
    config = AnalysisConfig(round_id, checkpoint_id or round_id, max_candidates)
    history = read_ledger(ledger_history) if ledger_history else []
    try:
        with open_analyst(settings, engine) as (chosen, compiler):
            summary = run_analysis(round_dir, engine, current, chosen, config, history, compiler=compiler)
    finally:
        index.close()
    keys = ("triage_groups", "analyzed_cards", "eligible_cards", "candidates", "fallback_reason", "rejections")
    record = summary.to_dict()
    emit(record, as_json,
         "\n".join([*(f"{key}: {record[key]}" for key in keys), f"pool: {summary.candidate_pool_path}"]))


def cold_start_command(
    params: Path = typer.Option(..., "--params", help="Parameter file (cold_start, store, model, evaluation, round)."),
    overrides: list[str] = SET_OPTION,
    out: Path = typer.Option(..., "--out", help="Cold-start directory (resumed when it holds the same plan)."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    analyst: str = ANALYST_OPTION,
    analyst_url: str = ANALYST_URL_OPTION,
    analyst_model: str = ANALYST_MODEL_OPTION,
    analyst_max_turns: int = ANALYST_MAX_TURNS_OPTION,
    analyst_max_tokens: int = ANALYST_MAX_TOKENS_OPTION,
    progress: bool = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Induce S0 from the base policy's train traces: rollouts, Success and Failure Analyst cards, firewall,
    consolidation, compiler, Gate A; writes <out>/selected_skillbank.json (usable as round.skillbank)."""
    settings = analyst_settings(analyst, analyst_url, analyst_model, analyst_max_turns, analyst_max_tokens)
    loaded = load(params, overrides)
    out = confined(out, loaded, allow_outside)
    # deferred: a verb loads its stage only when it runs
    from intraskill.pipeline.cold_start import ColdStartError, ColdStartPlanMismatchError, run_cold_start

    try:
        result = run_cold_start(loaded, out, analyst=settings, progress=progress)
    except (ColdStartError, ColdStartPlanMismatchError) as error:
        fail(str(error))
    emit({"out": str(result.root), "s0": str(result.s0_path), "selected": [s.skill_id for s in result.s0.skills],
          "draft": [s.skill_id for s in result.draft.skills], "cost": result.manifest.cost.to_dict(),
          "stages": {name: {"counts": s.counts, "cost": s.cost} for name, s in result.stages.items()}},
         as_json, result.summary())
