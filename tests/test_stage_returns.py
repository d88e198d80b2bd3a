"""No public function of a stage package returns a ``dict``: what a stage hands on is a typed record.

Read from the code (an AST scan of ``intraskill/``): a public function or method (its name, its class's and its
module's without a leading underscore, not nested in a function) of a package in :data:`STAGES` whose return
annotation is ``dict``/``dict[...]`` (``| None`` included) must be a serialiser of a typed model
(:data:`SERIALISERS`) or an entry of :data:`ALLOWED`, each with its reason: the JSON, HTTP or LLM payload
boundaries, fingerprinted plans and identities, and lookups from IDs to typed values.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "intraskill"

STAGES = ("pipeline", "evaluate", "gate", "trace2skill", "skills", "organism", "experiment", "analysis", "training")
"""The stage packages whose public functions must not return a dict."""

SERIALISERS = {
    "to_dict": "the JSON object of a typed record (its file or log form)",
    "to_json": "the JSON object of a typed record (its file or report form)",
    "to_row": "a typed record as one row of its table",
    "state_dict": "the JSON snapshot of a typed object (written as its file)",
}
"""Methods (of a class) that serialise their typed object."""

PLAN = "the semantic plan JSON of plan.json, hashed whole into the run's fingerprint (provenance.write_plan)"
IDENTITY = "identity JSON, hashed whole into a plan, a fingerprint or a record key"
LOOKUP = "a lookup from open keys (IDs, names) to typed values"
METRICS = "metrics under the release's W&B names, an open set (RoundStepMetrics.rollout keeps them as a mapping)"
EPISODE_METRICS = "one episode's metric values by metric name (the metric set is the comparison's parameter)"
LLM = "JSON shown to or parsed from an LLM role (prompt payload, tool-call arguments, chat message)"
TABLE = "one flat row of a pandas table"
TRACE_JSON = "a block of a raw trace or store response, in the JSON shape the store and the trace write"
BANK_METADATA = "a skill bank's free-form metadata, or the release-format block it carries"
REPORT = "a command's JSON report, printed as it is"
RELEASE = "the published release's own JSON, read whole as shipped"
BROWSER = "the episode browser's JSON payload (served over HTTP and written for the static report)"

ALLOWED: dict[str, str] = {
    "intraskill.pipeline.coevolve.coevolve_plan": PLAN,
    "intraskill.pipeline.cold_start.cold_start_plan": PLAN,
    "intraskill.pipeline.round.round_plan": PLAN,
    "intraskill.pipeline.methods.TrainingMethod.plan": PLAN,
    "intraskill.pipeline.methods.CurriculumMethod.plan": PLAN,
    "intraskill.pipeline.skill1.Skill1Method.plan": PLAN,
    "intraskill.experiment.matrix.matrix_plan": PLAN,
    "intraskill.pipeline.gate_run.AssignmentSkills.identity": IDENTITY,
    "intraskill.pipeline.rollout.curriculum_identity": IDENTITY,
    "intraskill.evaluate.runner.EpisodeSkills.identity": IDENTITY,
    "intraskill.evaluate.runner.skills_identity": IDENTITY,
    "intraskill.evaluate.skill1_deploy.LibraryDeployment.identity": IDENTITY,
    "intraskill.trace2skill.analysts.CountingPolicy.identity": IDENTITY,
    "intraskill.skills.bank.SkillBank.provider_identity": IDENTITY,
    "intraskill.skills.retrieval.encoder_identity": IDENTITY,
    "intraskill.skills.retrieval.retrieval_identity": IDENTITY,
    "intraskill.organism.demos.S0Law.identity": IDENTITY,
    "intraskill.organism.demos.AdditiveLaw.identity": IDENTITY,
    "intraskill.organism.demos.RecordingPolicy.identity": IDENTITY,
    "intraskill.organism.skill1_warmstart.warmstart_skill1_settings": IDENTITY,
    "intraskill.organism.skill1_warmstart.bc_identity": IDENTITY,
    "intraskill.organism.warmstart.bc_identity": IDENTITY,
    "intraskill.pipeline.gate_run.pool_versions": LOOKUP,
    "intraskill.pipeline.rollout.RolloutStepResult.tokens_by_rollout": LOOKUP,
    "intraskill.pipeline.skill1.skill1_jobs": LOOKUP,
    "intraskill.evaluate.bootstrap.success_transitions": LOOKUP,
    "intraskill.evaluate.compare.completed_jobs": LOOKUP,
    "intraskill.evaluate.compare.task_means": LOOKUP,
    "intraskill.evaluate.compare.paired_metrics": LOOKUP,
    "intraskill.evaluate.task_records.run_task_values": LOOKUP,
    "intraskill.gate.contributions.GateContributions.replacement_winners": LOOKUP,
    "intraskill.gate.ols.PairedDeltaResult.conf_int": LOOKUP,
    "intraskill.gate.ranking.ranking_arms": LOOKUP,
    "intraskill.trace2skill.analysis.read_cards": LOOKUP,
    "intraskill.organism.demos.AdditiveLaw.distribution": LOOKUP,
    "intraskill.organism.gate_validation.ship_validation": LOOKUP,
    "intraskill.organism.instructions.reader_banks": LOOKUP,
    "intraskill.organism.plan_targets.plan_distribution": LOOKUP,
    "intraskill.experiment.baselines.read_baselines": LOOKUP,
    "intraskill.experiment.inference.holm": LOOKUP,
    "intraskill.experiment.matrix.run_baselines": LOOKUP,
    "intraskill.experiment.shipped.matrix_sources": LOOKUP,
    "intraskill.analysis.release.comparisons": LOOKUP,
    "intraskill.training.advantages.unique_rollout_rewards": LOOKUP,
    "intraskill.training.advantages.group_advantages": LOOKUP,
    "intraskill.training.skill1_advantages.skill1_group_advantages": LOOKUP,
    "intraskill.training.admission.admission_metrics": METRICS,
    "intraskill.training.metrics.treatment_metrics": METRICS,
    "intraskill.training.metrics.behaviour_metrics": METRICS,
    "intraskill.training.metrics.rollout_step_metrics": METRICS,
    "intraskill.training.metrics.skill1_step_metrics": METRICS,
    "intraskill.training.triage.frontier_metrics": METRICS,
    "intraskill.pipeline.trackers.numeric_metrics": "the numbers a tracker logs (W&B, TensorBoard, trackio payload)",
    "intraskill.evaluate.summary.episode_metrics": EPISODE_METRICS,
    "intraskill.analysis.behaviour.episode_behaviour": EPISODE_METRICS,
    "intraskill.trace2skill.cards.FailureCard.deployable_view": LLM,
    "intraskill.trace2skill.llm_analyst.EvidenceCard.deployable_view": LLM,
    "intraskill.trace2skill.success.SuccessCard.deployable_view": LLM,
    "intraskill.trace2skill.compact.public_purchase": LLM,
    "intraskill.trace2skill.compact.compact_trace": LLM,
    "intraskill.trace2skill.compact.privileged_gold_audit": LLM,
    "intraskill.trace2skill.compiler.compiler_input": LLM,
    "intraskill.trace2skill.initial_skill.compiler_input": LLM,
    "intraskill.trace2skill.consolidation.Cluster.summary": LLM,
    "intraskill.trace2skill.consolidation.rule_consolidate": LLM,
    "intraskill.trace2skill.llm_analyst.validate_clusters": LLM,
    "intraskill.trace2skill.llm_analyst.consolidate": LLM,
    "intraskill.trace2skill.roles.rejected": LLM,
    "intraskill.trace2skill.roles.first_json_object": LLM,
    "intraskill.trace2skill.roles.repair_message": LLM,
    "intraskill.evaluate.compare.comparison_record": TABLE,
    "intraskill.evaluate.summary.condition_record": TABLE,
    "intraskill.analysis.export.episode_row": TABLE,
    "intraskill.pipeline.episode_log.EpisodeRecord.assignment": TRACE_JSON,
    "intraskill.trace2skill.audit.LiveAudit.state": TRACE_JSON,
    "intraskill.trace2skill.audit.LiveAudit.step": TRACE_JSON,
    "intraskill.gate.contributions.selection_metadata": BANK_METADATA,
    "intraskill.analysis.behaviour.BehaviourComparison.uncertainty": "the release's uncertainty block of to_dict",
    "intraskill.gate.ols.refit_path": REPORT,
    "intraskill.analysis.behaviour.release_behaviour": RELEASE,
    "intraskill.analysis.episodes.episode_view": BROWSER,
    "intraskill.analysis.episodes.read_episode": BROWSER,
}
"""Public stage functions that return a dict, each with why (module path and qualified name)."""


def returns_dict(annotation: ast.expr | None) -> bool:
    """Whether a return annotation is ``dict``, ``dict[...]`` or ``Dict[...]``, alone or ``| None`` / ``Optional``.

    >>> returns_dict(ast.parse("dict[str, int] | None", mode="eval").body)
    True
    >>> returns_dict(ast.parse("tuple[dict, int]", mode="eval").body)
    False
    """
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return returns_dict(ast.parse(annotation.value, mode="eval").body)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return returns_dict(annotation.left) or returns_dict(annotation.right)
    if isinstance(annotation, ast.Subscript):
        if isinstance(annotation.value, ast.Name) and annotation.value.id == "Optional":
            return returns_dict(annotation.slice)
        annotation = annotation.value
    return isinstance(annotation, ast.Name) and annotation.id in ("dict", "Dict")


def dict_returns(source: str, module: str) -> list[str]:
    """``module.qualname`` of every public function or method of ``source`` returning a dict (no serialiser)."""
    found: list[str] = []

    def visit(node: ast.AST, prefix: str, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef) and not child.name.startswith("_"):
                visit(child, f"{prefix}{child.name}.", True)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and not child.name.startswith("_"):
                if returns_dict(child.returns) and not (in_class and child.name in SERIALISERS):
                    found.append(f"{module}.{prefix}{child.name}")

    visit(ast.parse(source), "", False)
    return found


def stage_dict_returns(root: Path = PACKAGE) -> list[str]:
    """Every public function of the stage packages under ``root`` that returns a dict."""
    found = []
    for stage in STAGES:
        for path in sorted((root / stage).rglob("*.py")):
            parts = path.relative_to(root.parent).with_suffix("").parts
            if any(part.startswith("_") and part != "__init__" for part in parts):
                continue
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found += dict_returns(path.read_text(encoding="utf-8"), module)
    return found


def test_no_public_stage_function_returns_a_dict() -> None:
    unexplained = [name for name in stage_dict_returns() if name not in ALLOWED]
    assert unexplained == [], ("return a typed record (intraskill.record.Record), or allow it in ALLOWED with its "
                               f"reason: {unexplained}")


def test_every_allowed_entry_still_returns_a_dict_and_carries_one_line() -> None:
    stale = sorted(set(ALLOWED) - set(stage_dict_returns()))
    assert stale == [], f"ALLOWED names functions that no longer return a dict (drop them): {stale}"
    assert all(reason and "\n" not in reason and len(reason) <= 120 for reason in (*ALLOWED.values(),
                                                                                    *SERIALISERS.values()))


def test_the_scan_finds_a_planted_dict_return_and_spares_the_rest() -> None:
    source = '''
from typing import Optional
def summary() -> dict[str, float]: ...
def _private() -> dict: ...
def maybe() -> "Optional[dict]": ...
def rows() -> list[dict[str, int]]: ...
class Run:
    def to_dict(self) -> dict: ...
    def outcome(self) -> dict[str, int] | None: ...
    def count(self) -> int: ...
class _Hidden:
    def result(self) -> dict: ...
def to_dict() -> dict: ...
def outer() -> int:
    def inner() -> dict: ...
    return 0
'''
    assert dict_returns(source, "m") == ["m.summary", "m.maybe", "m.Run.outcome", "m.to_dict"]
