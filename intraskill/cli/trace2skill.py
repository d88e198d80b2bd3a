"""``intraskill trace2skill …``: failure analysis of a training round."""

from __future__ import annotations

from pathlib import Path

import typer

from intraskill.cli.common import JSON_OPTION, emit, fail
from intraskill.trace2skill.pool import DEFAULT_MAX_CANDIDATES

app = typer.Typer(help="Trace2Skill: failure cards, candidates, pool and ledger.", no_args_is_help=True)

ANALYSTS = ("rule", "llm")


@app.command()
def analyze(
    round_dir: Path = typer.Option(..., "--round-dir", exists=True, file_okay=False,
                                   help="Round directory holding analysis_queue.jsonl."),
    store: Path = typer.Option(..., "--store", exists=True, file_okay=False, help="Built store directory."),
    bank: Path = typer.Option(..., "--bank", exists=True, dir_okay=False, help="The current SkillBank JSON."),
    analyst: str = typer.Option("rule", "--analyst", help="rule (offline, default) or llm."),
    round_id: str = typer.Option(None, "--round-id", help="Round ID; default: the round directory's name."),
    checkpoint_id: str = typer.Option(None, "--checkpoint-id",
                                      help="Proposal checkpoint; default: the round ID."),
    ledger_history: Path = typer.Option(None, "--ledger-history", exists=True, dir_okay=False,
                                        help="The previous gate's proposal_ledger.jsonl."),
    max_candidates: int = typer.Option(DEFAULT_MAX_CANDIDATES, "--max-candidates",
                                       help="ADD/REWRITE candidates per round (1-16)."),
    base_url: str = typer.Option("http://127.0.0.1:30000/v1", "--base-url", help="llm: OpenAI-compatible root."),
    model: str = typer.Option("intraskill-policy", "--model", help="llm: served model name."),
    max_turns: int = typer.Option(20, "--max-turns", help="llm: analyst turns per card (last = submit)."),
    max_tokens: int = typer.Option(4096, "--max-tokens", help="llm: completion tokens per analyst turn."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Analyze the round's failed full-skill retries and write the candidate pool and ledger."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.shop.build import open_store
    from intraskill.shop.engine import ShopEngine
    from intraskill.skills.bank import load_skillbank
    from intraskill.trace2skill.analysis import AnalysisConfig, run_analysis
    from intraskill.trace2skill.ledger import read_ledger
    from intraskill.trace2skill.pool import check_max_candidates
    from intraskill.trace2skill.rule_analyst import RuleAnalyst

    if analyst not in ANALYSTS:
        fail(f"--analyst: expected one of {', '.join(ANALYSTS)}, got {analyst!r}")
    check_max_candidates(max_candidates)
    current = load_skillbank(bank)
    catalog, index, _ = open_store(store)
    engine = ShopEngine(catalog.products, catalog.goals, index)
    round_id = round_id or round_dir.name
    config = AnalysisConfig(round_id, checkpoint_id or round_id, max_candidates)
    history = read_ledger(ledger_history) if ledger_history else []
    policy = None
    try:
        if analyst == "rule":
            summary = run_analysis(round_dir, engine, current, RuleAnalyst(engine), config, history)
        else:
            # deferred: a verb loads its stage only when it runs
            from intraskill.policy.openai_backend import OpenAIPolicy
            from intraskill.trace2skill.llm_analyst import LLMAnalyst, LLMCompiler
            from intraskill.trace2skill.roles import RoleConfig

            policy = OpenAIPolicy(base_url, model)
            llm = LLMAnalyst(policy, engine, RoleConfig(max_tokens=max_tokens), max_turns=max_turns)
            summary = run_analysis(round_dir, engine, current, llm, config, history, compiler=LLMCompiler(policy))
    finally:
        index.close()
        if policy is not None:
            policy.close()
    keys = ("triage_groups", "analyzed_cards", "eligible_cards", "candidates", "fallback_reason")
    emit(summary, as_json, "\n".join([*(f"{key}: {summary[key]}" for key in keys),
                                      f"pool: {summary['candidate_pool_path']}"]))
