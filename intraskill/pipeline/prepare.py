"""Prerequisites of a training round, built (or reused) through cached calls.

For the organism experiment a round needs the store (:func:`intraskill.shop.build.build_store`,
cached by its manifest), the warm-start checkpoint with its tokenizer and per-chunk ground truth
(built by :mod:`intraskill.organism.warmstart`; a shipped ``params/*_warmstart/`` or ``warmstart.out_dir`` whose
manifest matches the parameters, :func:`~intraskill.policy.warmstarts.resolve_checkpoint`), and the round's curriculum
built from S₀ with each chunk's contribution α_j: its ``metadata.estimated_effect`` when present,
else the warm start's measured effect (chunk alone − bare). Only chunks with α_j > 0 enter the
curriculum (``docs/method.md`` §2.2: the gate admits positive chunks only).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from intraskill.layout import RoundDir, WarmstartDir
from intraskill.params import UNTRAINED, Params
from intraskill.paths import resolve_project_path
from intraskill.pipeline.methods import training_method
from intraskill.pipeline.round import default_round_dir, round_curriculum
from intraskill.policy.warmstarts import read_ground_truth, resolve_checkpoint
from intraskill.skills.bank import SkillBank, load_skillbank, save_skillbank
from intraskill.skills.curriculum import CurriculumState

LOGGER = logging.getLogger(__name__)

@dataclass(frozen=True)
class RoundInputs:
    """What :func:`prepare_round` resolved: the starting checkpoint, the bank with α and the curriculum."""

    checkpoint: str | None
    skillbank: Path | None
    curriculum: CurriculumState | None
    warmstart_dir: Path | None

    def to_json(self) -> dict[str, Any]:
        """A JSON summary for the CLI and the notebook: paths, the curriculum's state ID, each chunk's α and ρ."""
        curriculum = self.curriculum
        return {
            "checkpoint": self.checkpoint,
            "warmstart_dir": str(self.warmstart_dir) if self.warmstart_dir else None,
            "skillbank": str(self.skillbank) if self.skillbank else None,
            "curriculum_state_id": curriculum.state_id if curriculum else None,
            "chunks": {c.skill_id: {"alpha": c.contribution, "rho": c.inclusion_probability}
                       for c in (curriculum.chunks if curriculum else ())},
        }


def _project_path(path: str | Path) -> Path:
    return resolve_project_path(path)


def bank_with_effects(bank: SkillBank, effects: Mapping[str, float]) -> SkillBank:
    """``bank`` restricted to chunks with α > 0, each with ``metadata.estimated_effect`` = α.

    A chunk keeps its own ``estimated_effect`` when it has one; otherwise ``effects[skill_id]``
    (e.g. the warm start's ground truth) is used. Chunks with α ≤ 0 or no α are dropped.
    """
    kept = []
    for skill in bank.enabled_skills():
        alpha = skill.estimated_effect
        source = "metadata"
        if alpha is None and skill.skill_id in effects:
            alpha, source = float(effects[skill.skill_id]), "ground_truth"
        if alpha is None or not math.isfinite(alpha) or alpha <= 0:
            LOGGER.info("chunk %s left out of the curriculum (alpha %s)", skill.skill_id, alpha)
            continue
        metadata = {**skill.metadata, "estimated_effect": alpha, "effect_source": source}
        kept.append(replace(skill, metadata=metadata))
    return SkillBank(f"{bank.bank_version}+effects", tuple(kept),
                     {**bank.metadata, "source_bank_sha256": bank.sha256})


def checkpoint_warmstart(checkpoint: str | None) -> Path | None:
    """The warm-start directory an explicit checkpoint belongs to (``ground_truth.json`` in it or its parent)."""
    if checkpoint is None:
        return None
    directory = _project_path(checkpoint)
    return next((d for d in (directory, directory.parent) if WarmstartDir(d).ground_truth.is_file()), None)


def prepare_round(params: Params, round_index: int = 0, out_dir: str | Path | None = None) -> RoundInputs:
    """Resolve the round's starting checkpoint and curriculum, building what is missing.

    * checkpoint: :func:`~intraskill.policy.warmstarts.resolve_checkpoint` (for the organism with
      ``model.checkpoint: null`` the matching warm start, refused when there is none);
    * skill bank: ``round.skillbank`` (for the organism default ``warmstart.skills``, i.e. S₀), with α
      from metadata or the warm start's ground truth (an explicit ``model.checkpoint`` inside a warm-start
      directory brings that directory's; an explicit one outside any is refused while chunks lack α);
      written to ``<round dir>/skillbank.json``;
    * curriculum: :func:`~intraskill.pipeline.round.round_curriculum` of that bank (``None`` without chunks).

    A round whose method uses no curriculum (``round.method: skill1``) has neither bank nor curriculum: it starts
    from the checkpoint.
    """
    checkpoint, warmstart_dir = resolve_checkpoint(params)
    if not training_method(params).uses_curriculum:
        return RoundInputs(checkpoint, None, None, warmstart_dir)
    source = params.round.skillbank
    if source is None and params.model.spec == "organism":
        source = params.warmstart.skills
    if source is None:
        return RoundInputs(checkpoint, None, None, warmstart_dir)
    explicit = params.model.checkpoint not in (None, UNTRAINED)
    if warmstart_dir is None and explicit:
        warmstart_dir = checkpoint_warmstart(checkpoint)
    effects = read_ground_truth(warmstart_dir).effects if warmstart_dir is not None else {}
    source_bank = load_skillbank(_project_path(source))
    unmeasured = [s.skill_id for s in source_bank.enabled_skills() if s.estimated_effect is None]
    if explicit and warmstart_dir is None and unmeasured:
        raise ValueError(
            f"model.checkpoint {checkpoint} is not a warm start's checkpoint (no ground_truth.json in it or its "
            f"parent), so the chunks {', '.join(unmeasured)} of {source} have no contribution α for the curriculum; "
            "point model.checkpoint at a warm start's checkpoint, or set round.skillbank to a bank whose chunks "
            "carry metadata.estimated_effect")
    bank = bank_with_effects(source_bank, effects)
    if not bank.skills:
        LOGGER.warning("no chunk of %s has a positive contribution: the round runs without skills", source)
        return RoundInputs(checkpoint, None, None, warmstart_dir)
    root = Path(out_dir) if out_dir is not None else default_round_dir(params.experiment, round_index)
    path = save_skillbank(bank, RoundDir(root).skillbank)
    # the bank sits beside curriculum.json
    curriculum = round_curriculum(params.round, round_index, path, recorded_path=path.name)
    return RoundInputs(checkpoint, path, curriculum, warmstart_dir)

