"""A Skill1 round's record as tables: per-step metrics, the library's history and snapshot, every rollout and
every retrieved candidate, and a 2-D map of the library's embeddings.

Reads what :class:`~intraskill.pipeline.skill1.Skill1Round` writes into a round directory: ``metrics.jsonl``
(one record per step, ``skill1/*`` among them), ``library/history.jsonl`` and ``library/snapshot.json``
(:class:`~intraskill.skills.library.LibraryStore`), ``steps/step-<NNNN>/skill1_episodes.jsonl``
(:meth:`~intraskill.agent.skill1_episode.Skill1Episode.to_dict`) and ``plan.json`` (the NDCG cutoff).

History events carry no step: an event belongs to the step of the ``commit`` line that closes it; seed
skills, admitted when the library was created, are step 0. Events a kill left uncommitted (closed by an
``abort`` line, or a running step's tail) are left out, as :meth:`LibraryStore.open` discards them.

Per-rollout values use the candidates' U as recorded at retrieval, i.e. the library at the start of the step,
the U the rewards used: Û = max U over the candidates (0 without any), R_distill = r − Û, and NDCG of the
rank reply against the U ordering (0 for a rank reply that did not parse, missing without candidates).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.agent.skill1_episode import Skill1Episode
from intraskill.agent.skill1_replies import DistillReply, QueryReply
from intraskill.jsonl import iter_jsonl
from intraskill.layout import RoundDir
from intraskill.skills.library import LibrarySkill
from intraskill.skills.retrieval import Encoder
from intraskill.training.metrics import read_step_metrics
from intraskill.training.skill1_rewards import ndcg

if TYPE_CHECKING:
    import pandas as pd

HISTORY_COLUMNS = ("step", "seq", "event", "skill_id", "reward", "utility", "uses", "skill")
SKILL_COLUMNS = ("skill_id", "desc", "strat", "utility", "uses", "origin", "task_id", "round", "step")


def _skill_row(skill: LibrarySkill) -> dict[str, Any]:
    p = skill.provenance
    return {"skill_id": skill.skill_id, "desc": skill.desc, "strat": skill.strat, "utility": skill.utility,
            "uses": skill.uses, "origin": p.origin, "task_id": p.task_id, "round": p.round, "step": p.step}


def committed_history(path: str | Path) -> list[dict[str, Any]]:
    """The committed events of a library history, each with the ``step`` that closed it (seeds: step 0).

    Rows have :data:`HISTORY_COLUMNS`; an ``admit`` row takes U and n from the admitted skill and keeps its
    record in ``skill`` (``None`` on other rows); an ``evict`` row has neither U nor n.
    """
    rows: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for record in iter_jsonl(path):
        event = record.get("event")
        if event in ("admit", "update", "evict"):
            skill = record.get("skill", {})
            row = {"step": None, "seq": record["seq"], "event": event,
                   "skill_id": skill.get("skill_id", record.get("skill_id")), "reward": record.get("reward"),
                   "utility": skill.get("utility", record.get("utility")),
                   "uses": skill.get("uses", record.get("uses")),
                   "skill": record.get("skill")}
            if event == "admit" and skill.get("provenance", {}).get("origin") == "seed":
                rows.append({**row, "step": 0})
            else:
                pending.append(row)
        elif event == "abort":
            pending.clear()
        elif event == "commit":
            rows.extend({**row, "step": int(record["step"])} for row in pending)
            pending.clear()
        else:
            raise ValueError(f"{path}: unknown library event {event!r} at seq {record.get('seq')!r}")
    return rows


def library_by_step(history: "pd.DataFrame") -> "pd.DataFrame":
    """The library after each step of ``history`` (:func:`committed_history` rows): ``step``, ``size``,
    ``admissions``, ``evictions``, ``updates`` and the library's ``mean_utility`` (NaN when empty)."""
    # deferred: pandas is heavy to import
    import pandas as pd

    utility: dict[int, float] = {}
    rows = []
    for step, events in history.sort_values("seq").groupby("step", sort=True):
        for event in events.to_dict("records"):
            if event["event"] == "evict":
                del utility[int(event["skill_id"])]
            else:
                utility[int(event["skill_id"])] = float(event["utility"])
        counts = events["event"].value_counts()
        rows.append({"step": int(step), "size": len(utility), "admissions": int(counts.get("admit", 0)),
                     "evictions": int(counts.get("evict", 0)), "updates": int(counts.get("update", 0)),
                     "mean_utility": math.fsum(utility.values()) / len(utility) if utility else math.nan})
    return pd.DataFrame(rows, columns=["step", "size", "admissions", "evictions", "updates", "mean_utility"])


def rollout_tables(episodes: Sequence[tuple[int, Skill1Episode]], ndcg_cutoff: int | None = None
                   ) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """``(rollouts, candidates)`` of ``(step, episode)`` pairs.

    ``rollouts``: one row per rollout — ``step``, ``episode_id``, ``task_id``, ``sample_id``, ``instruction``,
    ``query``, ``query_ok``, ``candidates``, ``rank_ok``, ``selected_id``, ``selected_similarity``,
    ``selected_utility``, ``selected_best`` (1 when the selected skill has the highest U of the candidates, 0
    otherwise, NaN without candidates), ``top_similarity``, ``u_hat``, ``scored``, ``success`` (1/0, NaN
    unscored), ``r_distill`` (NaN unscored), ``ndcg``, ``distill_ok``, ``distilled_desc``.
    ``candidates``: one row per retrieved candidate — ``step``, ``episode_id``, ``position`` (retrieval order),
    ``rank`` (place in the rank reply, NaN without one), ``skill_id``, ``similarity``, ``score``, ``utility``,
    ``uses``, ``selected``.
    """
    # deferred: pandas is heavy to import
    import pandas as pd

    rollouts, candidates = [], []
    for step, episode in episodes:
        utilities = [c.skill.utility for c in episode.candidates]
        ranking = episode.ranking
        selected = episode.selected
        chosen = next((c for c in episode.candidates
                       if selected is not None and c.skill.skill_id == selected.skill_id), None)
        success = episode.success
        u_hat = max(utilities, default=0.0)
        if not utilities:
            score = math.nan
        else:
            score = 0.0 if ranking is None else ndcg(ranking, utilities, ndcg_cutoff)
        distill = episode.distill
        rollouts.append({
            "step": step, "episode_id": episode.job.episode_id, "task_id": episode.job.task_id,
            "sample_id": episode.job.sample_id, "instruction": episode.task.instruction,
            "query": episode.query_text,
            "query_ok": isinstance(episode.query, QueryReply), "candidates": len(episode.candidates),
            "rank_ok": ranking is not None, "selected_id": selected.skill_id if selected is not None else None,
            "selected_similarity": chosen.similarity if chosen is not None else math.nan,
            "selected_utility": chosen.skill.utility if chosen is not None else math.nan,
            "selected_best": float(chosen.skill.utility == u_hat) if chosen is not None else math.nan,
            "top_similarity": max((c.similarity for c in episode.candidates), default=math.nan),
            "u_hat": u_hat, "scored": success is not None,
            "success": math.nan if success is None else float(success),
            "r_distill": math.nan if success is None else float(success) - u_hat, "ndcg": score,
            "distill_ok": isinstance(distill, DistillReply),
            "distilled_desc": distill.description_head if isinstance(distill, DistillReply) else None,
        })
        places = {position: place for place, position in enumerate(ranking)} if ranking is not None else {}
        for position, candidate in enumerate(episode.candidates):
            candidates.append({
                "step": step, "episode_id": episode.job.episode_id, "position": position,
                "rank": places.get(position, math.nan), "skill_id": candidate.skill.skill_id,
                "similarity": candidate.similarity, "score": candidate.score, "utility": candidate.skill.utility,
                "uses": candidate.skill.uses, "selected": chosen is candidate,
            })
    rollout_columns = ["step", "episode_id", "task_id", "sample_id", "instruction", "query", "query_ok",
                       "candidates", "rank_ok", "selected_id", "selected_similarity", "selected_utility",
                       "selected_best", "top_similarity", "u_hat",
                       "scored", "success", "r_distill", "ndcg", "distill_ok", "distilled_desc"]
    candidate_columns = ["step", "episode_id", "position", "rank", "skill_id", "similarity", "score", "utility",
                         "uses", "selected"]
    return pd.DataFrame(rollouts, columns=rollout_columns), pd.DataFrame(candidates, columns=candidate_columns)


@dataclass(frozen=True, eq=False)
class Skill1Record:
    """One Skill1 round directory read back (:func:`read_skill1_round`).

    ``steps``: ``metrics.jsonl``, one row per finished step (``round``, ``step``, ``skill1/*``,
    ``rollout/shopsim/*``, ``train/*``, ``time/*``). ``history``: committed library events
    (:data:`HISTORY_COLUMNS`). ``library``: the snapshot's skills (after ``library_step``). ``rollouts`` and
    ``candidates``: :func:`rollout_tables` of every recorded rollout, finished steps or not.
    """

    root: Path
    round_index: int | None
    steps: "pd.DataFrame"
    history: "pd.DataFrame"
    library: tuple[LibrarySkill, ...]
    library_step: int | None
    rollouts: "pd.DataFrame"
    candidates: "pd.DataFrame"

    def library_table(self) -> "pd.DataFrame":
        """The snapshot's skills, one row each (:data:`SKILL_COLUMNS`)."""
        # deferred: pandas is heavy to import
        import pandas as pd

        return pd.DataFrame([_skill_row(skill) for skill in self.library], columns=list(SKILL_COLUMNS))

    def skills(self) -> "pd.DataFrame":
        """Every skill the committed history admitted: the snapshot's with their final U and n
        (``evicted`` False), then the evicted ones with their U and n when evicted (``evicted`` True)."""
        # deferred: pandas is heavy to import
        import pandas as pd

        kept = {skill.skill_id for skill in self.library}
        evicted: dict[int, dict[str, Any]] = {}
        for event in self.history.sort_values("seq").to_dict("records"):
            skill_id = int(event["skill_id"])
            if event["event"] == "admit" and skill_id not in kept:
                evicted[skill_id] = _skill_row(LibrarySkill.from_dict(event["skill"]))
            elif event["event"] == "update" and skill_id in evicted:
                evicted[skill_id].update(utility=event["utility"], uses=event["uses"])
        rows = [{**_skill_row(skill), "evicted": False} for skill in self.library]
        rows += [{**row, "evicted": True} for _, row in sorted(evicted.items())]
        return pd.DataFrame(rows, columns=[*SKILL_COLUMNS, "evicted"])

    def library_by_step(self) -> "pd.DataFrame":
        """The library after each committed step (:func:`library_by_step`)."""
        return library_by_step(self.history)


def _ndcg_cutoff(root: Path) -> int | None:
    path = RoundDir(root).plan
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("skill1", {}).get("ndcg_cutoff")


def read_skill1_round(root: str | Path) -> Skill1Record:
    """Read a Skill1 round directory (finished, or still running: only committed library events count).

    Raises
    ------
    FileNotFoundError
        When ``root`` has no ``library/snapshot.json`` (not a Skill1 round directory).
    """
    # deferred: pandas is heavy to import
    import pandas as pd

    root = Path(root)
    files = RoundDir(root)
    snapshot_path = files.library.snapshot
    if not snapshot_path.is_file():
        raise FileNotFoundError(f"{snapshot_path}: no Skill1 library snapshot "
                                f"(is {root} a Skill1 round directory?)")
    snapshot = json.loads(snapshot_path.read_text(encoding="utf-8"))
    steps = pd.DataFrame([line.to_dict() for line in read_step_metrics(files.metrics)])
    if not steps.empty:
        steps = steps.sort_values("step").reset_index(drop=True)
    episodes = [(step.index, Skill1Episode.from_dict(record))
                for step in files.step_dirs() for record in iter_jsonl(step.skill1_episodes)]
    rollouts, candidates = rollout_tables(episodes, _ndcg_cutoff(root))
    plan = files.plan
    round_index = json.loads(plan.read_text(encoding="utf-8")).get("round_index") if plan.is_file() else None
    return Skill1Record(
        root, round_index, steps,
        pd.DataFrame(committed_history(files.library.history), columns=list(HISTORY_COLUMNS)),
        tuple(LibrarySkill.from_dict(skill) for skill in snapshot["skills"]), snapshot.get("step"),
        rollouts, candidates,
    )


@dataclass(frozen=True, eq=False)
class LibraryMap:
    """Skills placed on the first two principal components of their ``desc`` embeddings.

    ``points`` is the skills table with ``pc1`` and ``pc2``; ``explained`` the share of the variance each
    component carries (0 where there is none).
    """

    points: "pd.DataFrame"
    explained: tuple[float, float]


def library_map(skills: "pd.DataFrame", encoder: Encoder) -> LibraryMap:
    """PCA (numpy SVD of the centred unit embeddings) of ``skills["desc"]`` encoded by ``encoder``.

    Each component's sign is fixed so that its largest loading is positive (SVD leaves it arbitrary), so the
    map is the same on every machine. Fewer than two distinct descriptions give zero coordinates.
    """
    # deferred: numpy is heavy to import
    import numpy as np

    if "desc" not in skills.columns:
        raise ValueError(f"skills: no 'desc' column; got {list(skills.columns)}")
    points = skills.reset_index(drop=True).copy()
    coordinates = np.zeros((len(points), 2))
    explained = (0.0, 0.0)
    if len(points):
        vectors = np.asarray(encoder.encode(list(points["desc"])), dtype=np.float64)
        centred = vectors - vectors.mean(axis=0)
        _, singular, components = np.linalg.svd(centred, full_matrices=False)
        kept = min(2, len(singular))
        for index in range(kept):
            component = components[index]
            sign = 1.0 if component[np.argmax(np.abs(component))] >= 0 else -1.0
            coordinates[:, index] = centred @ (sign * component)
        total = float(np.sum(singular ** 2))
        if total > 0:
            shares = [float(singular[i] ** 2 / total) if i < kept else 0.0 for i in range(2)]
            explained = (shares[0], shares[1])
    points["pc1"], points["pc2"] = coordinates[:, 0], coordinates[:, 1]
    return LibraryMap(points, explained)
