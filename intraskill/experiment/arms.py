"""Cells of the control experiment: an arm's overlay and a training seed applied to the base parameters.

A cell's parameters are the base parameters with (1) the arm's ``round`` overlay
(:meth:`~intraskill.params.ArmParams.round_overlay`) and (2) seed index k added to ``experiment.seed`` and
``round.curriculum_seed`` (and (3) for a matrix evaluated on dev, ``round.exclude_dev``) — and nothing else,
validated again as a whole. The ``matrix`` section is the
experiment's, not the cell's: a cell carries the default one, so extending a matrix with arms or seeds
leaves the finished cells' plans as they were. :func:`overlay_fields` names what differs between two
cells, which the suite checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from intraskill.gate.design import DEFAULT_MASK_SEED
from intraskill.layout import seed_id
from intraskill.params import ArmParams, MatrixParams, Params, params_from_dict


@dataclass(frozen=True, order=True)
class Cell:
    """One (arm, seed index) cell of the matrix."""

    arm: str
    seed_index: int

    @property
    def name(self) -> str:
        """``<arm>/seed-<k>``: the cell's folder under the matrix's ``cells/``."""
        return f"{self.arm}/{seed_id(self.seed_index)}"


@dataclass(frozen=True)
class CellSeeds:
    """The seeds a cell trains with (index 0 is the base run's)."""

    experiment: int
    curriculum: int
    mask: int

    @classmethod
    def derive(cls, params: Params, index: int) -> CellSeeds:
        """Seed index ``index``: the base seeds plus ``index``."""
        if index < 0:
            raise ValueError(f"seed index: must be >= 0, got {index}")
        return cls(params.experiment.seed + index, params.round.curriculum_seed + index, DEFAULT_MASK_SEED + index)


def cell_params(base: Params, arm: ArmParams, seed_index: int) -> Params:
    """The parameters cell (``arm``, ``seed_index``) trains with (see the module docstring)."""
    seeds = CellSeeds.derive(base, seed_index)
    data = base.model_dump(mode="json")
    data["experiment"]["seed"] = seeds.experiment
    data["round"].update(arm.round_overlay(), curriculum_seed=seeds.curriculum)
    if base.matrix.split == "dev":
        data["round"]["exclude_dev"] = True
    data["matrix"] = MatrixParams().model_dump(mode="json")
    return params_from_dict(data, source=f"arm overlay (seed index {seed_index})")


def start_checkpoint(params: Params, arm: ArmParams) -> str | None:
    """The checkpoint ``arm`` starts from when not the shared warm start: its own ``checkpoint``, else for a
    Skill1 arm or one with ``skill1_start`` ``skill1.start_checkpoint`` (``None``: the shared warm start)."""
    if arm.checkpoint is not None:
        return arm.checkpoint
    return params.skill1.start_checkpoint if arm.starts_from_skill1 else None


def overlay_fields(a: Params, b: Params) -> list[str]:
    """The dotted parameter fields whose values differ between ``a`` and ``b``."""
    return sorted(_differences(a.model_dump(mode="json"), b.model_dump(mode="json"), ""))


def _differences(a: Any, b: Any, prefix: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [field for key in a.keys() | b.keys()
                for field in _differences(a.get(key), b.get(key), f"{prefix}{key}.")]
    return [] if a == b else [prefix.rstrip(".")]
