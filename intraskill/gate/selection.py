"""Rewrite resolution and strictly-positive top-K selection (docs/method.md §5.5).

Online gate (``rewrite_winners_then_strictly_positive_top_k``,
``mutually_exclusive_family_argmax_old_on_tie``):

1. Each logical slot's versions (the old chunk, then its REWRITE candidates sorted by candidate id) form one
   family; the first version with the largest β wins, so ties go to the old version, then to the earlier
   rewrite. Every other version is a ``rewrite_loser`` with no rank.
2. Survivors (unchanged current chunks, ADD candidates, family winners) are ranked by ``(−β, id)``.
3. The first K survivors with β > 0 are ``selected``; nothing pads the list.
4. Otherwise a current chunk is ``retired``; a candidate with β ≤ 0 is ``non_positive``; a positive
   candidate beyond K is ``budget_excluded``.

Gate A applies the same rules without families (ties broken by chunk id); statuses are ``selected``,
``non_positive`` or ``budget_excluded``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, Mapping, Sequence

from intraskill.gate.ols import ZERO_TOLERANCE
from intraskill.params import ACTIVE_SKILL_BUDGET

KINDS = ("current", "candidate")
OPERATIONS = ("ADD", "REWRITE")


class ContributionStatus(str, Enum):
    """Outcome of one intervention at the gate."""

    SELECTED = "selected"
    REWRITE_LOSER = "rewrite_loser"
    NON_POSITIVE = "non_positive"
    BUDGET_EXCLUDED = "budget_excluded"
    RETIRED = "retired"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Intervention:
    """One design column of the gate.

    Attributes
    ----------
    intervention_id : str
        Column id: a current chunk's id equals its slot id; a candidate has its own ``online-…`` id.
    kind : str
        ``"current"`` (in the bank entering the gate) or ``"candidate"`` (proposed this round).
    logical_chunk_id : str
        Slot id: the REWRITE target, or the intervention's own id for current chunks and ADDs.
    operation : str or None
        ``None`` for current chunks, ``"ADD"`` or ``"REWRITE"`` for candidates.
    order : int
        Slot position (a REWRITE shares its target's order).
    """

    intervention_id: str
    kind: str
    logical_chunk_id: str
    operation: str | None
    order: int

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.intervention_id}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "current" and self.operation is not None:
            raise ValueError(
                f"{self.intervention_id}: a current chunk has operation None, got {self.operation!r}"
            )
        if self.kind == "candidate" and self.operation not in OPERATIONS:
            raise ValueError(
                f"{self.intervention_id}: operation must be one of {OPERATIONS}, got {self.operation!r}"
            )
        is_rewrite = self.operation == "REWRITE"
        if is_rewrite == (self.logical_chunk_id == self.intervention_id):
            raise ValueError(
                f"{self.intervention_id}: logical_chunk_id must equal the id except for REWRITE candidates "
                f"(got logical_chunk_id={self.logical_chunk_id!r})"
            )

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "Intervention":
        """Build from a release ``contributions`` entry (extra keys are ignored)."""
        return cls(
            intervention_id=str(record["intervention_id"]),
            kind=str(record["kind"]),
            logical_chunk_id=str(record["logical_chunk_id"]),
            operation=record.get("operation"),
            order=int(record["order"]),
        )


@dataclass(frozen=True)
class ContributionRecord:
    """One ``contributions`` entry of the gate output (the release schema, without auxiliary β)."""

    intervention_id: str
    kind: str
    logical_chunk_id: str
    operation: str | None
    order: int
    coefficient: float
    rank: int | None
    status: ContributionStatus

    def to_dict(self) -> dict[str, Any]:
        """Release-shaped dict with ``status`` as its string value."""
        record = asdict(self)
        record["status"] = self.status.value
        return record

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "ContributionRecord":
        """Parse a release ``contributions`` entry (``auxiliary_coefficients`` is ignored)."""
        rank = record["rank"]
        return cls(intervention_id=str(record["intervention_id"]), kind=str(record["kind"]),
                   logical_chunk_id=str(record["logical_chunk_id"]), operation=record.get("operation"),
                   order=int(record["order"]), coefficient=float(record["coefficient"]),
                   rank=None if rank is None else int(rank), status=ContributionStatus(record["status"]))


@dataclass(frozen=True)
class SelectionResult:
    """Gate selection: per-column records, slot winners and the selected ids (design-column order)."""

    contributions: list[ContributionRecord]
    replacement_winners: dict[str, str]
    selected_intervention_ids: list[str]

    @property
    def selected_count(self) -> int:
        """Number of selected interventions (≤ K)."""
        return len(self.selected_intervention_ids)

    def to_dict(self) -> dict[str, Any]:
        """``{selected_intervention_ids, selected_count, replacement_winners, contributions}``."""
        return {
            "selected_intervention_ids": list(self.selected_intervention_ids),
            "selected_count": self.selected_count,
            "replacement_winners": dict(self.replacement_winners),
            "contributions": [record.to_dict() for record in self.contributions],
        }


def _clean_coefficients(ids: Sequence[str], coefficients: Mapping[str, float]) -> dict[str, float]:
    if len(set(ids)) != len(ids):
        raise ValueError("intervention ids must be unique")
    missing = [i for i in ids if i not in coefficients]
    if missing:
        raise ValueError(f"coefficients lack intervention ids {missing}")
    beta = {i: float(coefficients[i]) for i in ids}
    return {i: (0.0 if abs(b) <= ZERO_TOLERANCE else b) for i, b in beta.items()}


def _check_budget(budget: int) -> None:
    if budget < 1:
        raise ValueError(f"budget (active_skill_budget) must be positive, got {budget}")


def _families(interventions: Sequence[Intervention]) -> dict[str, list[Intervention]]:
    """Slot id → [head version, rewrites sorted by candidate id], slots in order of appearance."""
    heads: dict[str, Intervention] = {}
    rewrites: dict[str, list[Intervention]] = {}
    for item in interventions:
        if item.operation == "REWRITE":
            rewrites.setdefault(item.logical_chunk_id, []).append(item)
        elif item.logical_chunk_id in heads:
            raise ValueError(f"slot {item.logical_chunk_id} has two non-REWRITE versions")
        else:
            heads[item.logical_chunk_id] = item
    orphans = sorted(set(rewrites) - set(heads))
    if orphans:
        raise ValueError(f"REWRITE candidates target slots that are not in the pool: {orphans}")
    return {
        slot: [head] + sorted(rewrites.get(slot, []), key=lambda r: r.intervention_id)
        for slot, head in sorted(heads.items(), key=lambda kv: kv[1].order)
    }


def _rank_and_status(
    survivors: Sequence[Intervention], beta: Mapping[str, float], budget: int, retire_current: bool
) -> tuple[dict[str, int], dict[str, ContributionStatus]]:
    ranked = sorted(survivors, key=lambda s: (-beta[s.intervention_id], s.intervention_id))
    ranks: dict[str, int] = {}
    statuses: dict[str, ContributionStatus] = {}
    selected = 0
    for position, item in enumerate(ranked, start=1):
        ident = item.intervention_id
        ranks[ident] = position
        if beta[ident] > 0.0 and selected < budget:
            statuses[ident] = ContributionStatus.SELECTED
            selected += 1
        elif retire_current and item.kind == "current":
            statuses[ident] = ContributionStatus.RETIRED
        elif beta[ident] <= 0.0:
            statuses[ident] = ContributionStatus.NON_POSITIVE
        else:
            statuses[ident] = ContributionStatus.BUDGET_EXCLUDED
    return ranks, statuses


def _result(
    interventions: Sequence[Intervention],
    beta: Mapping[str, float],
    ranks: Mapping[str, int],
    statuses: Mapping[str, ContributionStatus],
    winners: dict[str, str],
) -> SelectionResult:
    records = [
        ContributionRecord(
            intervention_id=item.intervention_id,
            kind=item.kind,
            logical_chunk_id=item.logical_chunk_id,
            operation=item.operation,
            order=item.order,
            coefficient=beta[item.intervention_id],
            rank=ranks.get(item.intervention_id),
            status=statuses.get(item.intervention_id, ContributionStatus.REWRITE_LOSER),
        )
        for item in interventions
    ]
    selected = [r.intervention_id for r in records if r.status is ContributionStatus.SELECTED]
    return SelectionResult(
        contributions=records, replacement_winners=winners, selected_intervention_ids=selected
    )


def select_online(
    interventions: Sequence[Intervention],
    coefficients: Mapping[str, float],
    *,
    budget: int = ACTIVE_SKILL_BUDGET,
) -> SelectionResult:
    """Resolve rewrite families, then keep the strictly positive top-``budget`` survivors.

    Parameters
    ----------
    interventions : sequence of Intervention
        The design columns, in column order (the output keeps this order).
    coefficients : mapping
        Intervention id → primary (``reward``) β; ``|β| <= 1e-12`` counts as 0.
    budget : int
        Active skill budget K (default 10).

    Examples
    --------
    >>> old = Intervention("chunk-a", "current", "chunk-a", None, 1)
    >>> new = Intervention("online-b", "candidate", "chunk-a", "REWRITE", 1)
    >>> select_online([old, new], {"chunk-a": 0.2, "online-b": 0.6}).replacement_winners
    {'chunk-a': 'online-b'}
    """
    _check_budget(budget)
    beta = _clean_coefficients([i.intervention_id for i in interventions], coefficients)
    winners: dict[str, str] = {}
    survivors: list[Intervention] = []
    for slot, versions in _families(interventions).items():
        winner = max(versions, key=lambda v: beta[v.intervention_id])
        winners[slot] = winner.intervention_id
        survivors.append(winner)
    ranks, statuses = _rank_and_status(survivors, beta, budget, retire_current=True)
    return _result(interventions, beta, ranks, statuses, winners)


def select_gate_a(
    chunk_ids: Sequence[str], coefficients: Mapping[str, float], *, budget: int = ACTIVE_SKILL_BUDGET
) -> SelectionResult:
    """Gate A (cold start): no families; rank by ``(−β, chunk_id)``, select the positive top-``budget``.

    Every chunk is reported as a ``current`` intervention in its own slot; statuses are ``selected``,
    ``non_positive`` or ``budget_excluded``.
    """
    _check_budget(budget)
    items = [Intervention(c, "current", c, None, position) for position, c in enumerate(chunk_ids, start=1)]
    beta = _clean_coefficients(list(chunk_ids), coefficients)
    ranks, statuses = _rank_and_status(items, beta, budget, retire_current=False)
    return _result(items, beta, ranks, statuses, {c: c for c in chunk_ids})


def select_from_contributions(contributions: Mapping[str, Any]) -> SelectionResult:
    """Re-run :func:`select_online` on a release-schema ``contributions.json`` (columns and primary β)."""
    try:
        records = contributions["contributions"]
        beta = contributions["estimates"]["reward"]["coefficients"]
    except KeyError as error:
        raise ValueError(f"contributions lacks the field {error}") from error
    budget = int(contributions.get("active_skill_budget", ACTIVE_SKILL_BUDGET))
    return select_online([Intervention.from_dict(r) for r in records], beta, budget=budget)
