"""The control experiment: every (arm, seed) cell trained, evaluated on the test split, resumable cell by cell.

``matrix.split: dev`` evaluates a probe matrix on the store's dev tasks instead (every cell then trains without
them); the run directories keep their ``test-*`` names, and the plan records the split.

A matrix directory (``<run_root>/<experiment.name>/controls`` by default) holds:

* ``matrix.json`` — the plan: base parameters (without the ``matrix`` section's arm and seed lists, so a
  matrix can be extended), rounds, test tasks and torch threads per cell, fingerprinted; a directory
  refuses a different plan (:class:`MatrixPlanMismatchError`);
* ``shared/`` — S₀ with its contributions α (``skillbank.json``) and the shared warm start's two test runs
  (``test-warmstart-bare``, ``test-warmstart-s0``), run once for all arms, and per seed index k its first round's
  bare val check (``val-before-seed-<k>``: the warm start under seed k, the same for every arm that starts from
  it), run by the first cell that needs it and copied into the others;
* ``cells/<arm>/seed-<k>/`` — the cell's chained rounds (:func:`~intraskill.pipeline.coevolve.co_evolve`
  with the arm's overlay, :mod:`intraskill.experiment.arms`), its test runs ``test-final-bare`` and
  ``test-final-bank``, ``final_skillbank.json``, ``timings.jsonl`` (wall time per finished stage,
  append-only) and ``cell.json`` (the finished cell's :class:`~intraskill.experiment.records.CellResult`);
  a Skill1 arm's cell also holds ``final_library.json`` (its last round's committed library) and
  ``test-final-library`` (:mod:`~intraskill.evaluate.skill1_deploy`: the library frozen, no distillation). An
  arm with its own ``checkpoint`` (a Skill1 arm: else ``skill1.start_checkpoint``) starts its first round there
  instead of the shared warm start, and an arm with its own ``skillbank`` trains from that S₀ (with its α,
  in ``start/skillbank.json``) instead of the shared one; its ``cell.json`` and every statement about it name
  that checkpoint or bank;
* ``baselines/seed-<k>/`` — the deployment baselines of seed index k once its ``grpo`` and ``coevolve`` cells
  finished (:mod:`intraskill.experiment.baselines`: ``grpo``'s final checkpoint with S₀ and with ``coevolve``'s
  final bank; ``baseline.json`` and the run ``test-grpo-coevolve-bank``, resumed like every test run);
* ``matrix_summary.json`` — :meth:`~intraskill.experiment.results.MatrixResult.to_dict`.

Every stage below a cell resumes from its own records (rollout steps, evaluation traces), and a cell with a
``cell.json`` is skipped, so a killed matrix resumes cell by cell with no episode lost or repeated. Cells run in
this process, in local worker processes (``jobs``) or as Ray tasks on a cluster (``ray_address``: each cell's
directory is written on the matrix directory, which every node must see as shared storage at the same path). Every
evaluation uses the base parameters' seeds: all test runs are paired by task and episode seed.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import multiprocessing
import shutil
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from filelock import FileLock
from tqdm.auto import tqdm

from intraskill.evaluate.records import EvalSummary
from intraskill.evaluate.runner import run_eval
from intraskill.evaluate.skill1_deploy import LibraryDeployment
from intraskill.evaluate.summary import utc_now
from intraskill.experiment.arms import Cell, CellSeeds, cell_params, start_checkpoint
from intraskill.experiment.baselines import (
    GRPO_METHOD_BANK,
    GRPO_S0,
    METHOD_BANK_RUN,
    read_baselines,
)
from intraskill.experiment.records import (
    FINAL_BANK,
    FINAL_BARE,
    FINAL_LIBRARY,
    WARMSTART_BARE,
    WARMSTART_S0,
    CellResult,
    RoundRecord,
    TestRun,
)
from intraskill.experiment.results import (
    MatrixResult,
    load_matrix,
)
from intraskill.experiment.shipped import copy_finished, ship_baseline, ship_cell, ship_start
from intraskill.jsonl import JsonlWriter, iter_jsonl, write_json
from intraskill.layout import CellDir, EvalDir, MatrixDir, ModelDir, RunDir
from intraskill.params import METHOD_ARM, REFERENCE_ARM, Params, params_from_dict, plan_dump
from intraskill.paths import resolve_project_path, runs_root
from intraskill.phases import phase
from intraskill.pipeline.coevolve import CoEvolveConfig, CoEvolveSummary, co_evolve, curriculum_bank
from intraskill.pipeline.methods import training_method
from intraskill.pipeline.prepare import RoundInputs, prepare_round
from intraskill.pipeline.round import bare_val, round_curriculum
from intraskill.policy.factory import build_policy
from intraskill.provenance import write_plan
from intraskill.skills.bank import SkillBank, load_skillbank, save_skillbank

LOGGER = logging.getLogger(__name__)

MATRIX_SCHEMA = "intraskill-control-matrix-v1"


class MatrixPlanMismatchError(RuntimeError):
    """The matrix directory already holds a different plan."""


class MatrixRayError(RuntimeError):
    """The Ray cluster named for the matrix's cells cannot be reached."""


def default_matrix_dir(params: Params) -> Path:
    """``<run_root>/<experiment.name>/controls``."""
    return runs_root(params.experiment.run_root) / params.experiment.name / "controls"


def matrix_plan(params: Params) -> dict[str, Any]:
    """What every cell's numbers depend on, beside its arm and seed: the base parameters, rounds, test tasks
    and threads."""
    base = plan_dump(params)
    matrix = base.pop("matrix")
    split = {"split": matrix["split"]} if "split" in matrix else {}  # a test matrix's plan is as before
    return {"schema_version": MATRIX_SCHEMA, "params": base, "rounds": matrix["rounds"],
            "test_tasks": matrix["test_tasks"], "threads": matrix["threads"], **split}


def write_matrix_plan(out: Path, plan: dict[str, Any]) -> str:
    """Write ``matrix.json`` (provenance beside the fingerprint) or check the stored plan; every cell's own
    plans record theirs too."""
    return write_plan(MatrixDir(out).plan, plan, what="control-matrix", error=MatrixPlanMismatchError,
                      hint="Use another --out directory for a different plan (arms and seeds may be added).")


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``count`` for the block (results depend on it)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextmanager
def _timed(out: Path, stage: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    with JsonlWriter(CellDir(out).timings) as writer:
        writer.append({"stage": stage, "seconds": time.perf_counter() - start, "finished_at": utc_now()})


def _test(params: Params, condition: str, checkpoint: str | None, bank: SkillBank | None, out: Path,
          run_dir: Path, store_root: Path | None, progress: bool, library: Path | None = None) -> TestRun:
    """The test run ``run_dir`` (resumed, or skipped when complete); its record names it relative to ``out``.
    ``library``: a Skill1 library snapshot deployed instead of a bank."""
    limit = params.matrix.test_tasks
    deployment = LibraryDeployment.from_snapshot(library, params.skill1) if library is not None else None
    if not EvalDir(run_dir).summary.is_file() or not _complete(run_dir):
        with _timed(run_dir.parent, condition), phase("test"):
            run_eval(params, params.matrix.split, checkpoint, bank, run_dir, progress=progress, limit=limit,
                     store_root=store_root, library=deployment)
    if deployment is not None:
        skills = deployment.skill_ids
    else:
        skills = [s.skill_id for s in bank.enabled_skills()] if bank is not None else []
    return TestRun.read(condition, run_dir, out, checkpoint or str(params.model.checkpoint), skills)


def _complete(run_dir: Path) -> bool:
    counts = EvalSummary.read(EvalDir(run_dir).summary).counts
    return counts.completed + counts.failed >= counts.requested


def shared_start(params: Params, out: Path, store_root: Path | None = None,
                 progress: bool = True) -> tuple[RoundInputs, dict[str, TestRun]]:
    """The warm start and S₀ (with α) every arm starts from, and their two test runs."""
    shared = MatrixDir(out).shared
    with phase("prepare"):
        start = prepare_round(params, 0, shared.root)
    s0 = load_skillbank(start.skillbank) if start.skillbank is not None else None
    tests = {WARMSTART_BARE: _test(params, WARMSTART_BARE, start.checkpoint, None, out,
                                   shared.test(WARMSTART_BARE).root, store_root, progress)}
    if s0 is not None:
        tests[WARMSTART_S0] = _test(params, WARMSTART_S0, start.checkpoint, s0, out,
                                    shared.test(WARMSTART_S0).root, store_root, progress)
    write_json(MatrixDir(out).warmstart, {name: run.to_dict() for name, run in tests.items()}, indent=1)
    return start, tests


def run_cell(params: Params, out: Path, cell: Cell, start: RoundInputs, store_root: Path | None = None,
             progress: bool = True) -> CellResult:
    """Train, evaluate and record one cell (resuming whatever it already holds)."""
    arm = params.matrix.arm(cell.arm)
    trained = cell_params(params, arm, cell.seed_index)
    seeds = CellSeeds.derive(params, cell.seed_index)
    cell_dir = MatrixDir(out).cell(cell.name)
    root = cell_dir.root
    bank = start.skillbank if arm.skillbank is None else prepare_round(trained, 0, root / "start").skillbank
    if arm.skills == "s0" and bank is None:
        raise ValueError(f"arm {cell.arm}: trains with S₀ ({arm.skillbank or 'the shared one'}), but none of its "
                         "chunks has a positive contribution α")
    with torch_threads(params.matrix.threads):
        if arm.skills == "s0":
            curriculum = round_curriculum(trained.round, 0, bank, recorded_path=bank.name)
            cell_start = replace(start, skillbank=bank, curriculum=curriculum)
        else:
            cell_start = replace(start, skillbank=None, curriculum=None)
        own_start = start_checkpoint(params, arm)
        if own_start is not None:
            cell_start = replace(cell_start, checkpoint=arm_checkpoint(cell.arm, own_start))
        with _timed(root, "rounds"):
            val_before = (shared_val_before(trained, out, cell.seed_index, start.checkpoint, store_root, progress)
                          if own_start is None else None)
            chain = co_evolve(trained, params.matrix.rounds, start=cell_start, out_dir=root, store_root=store_root,
                              progress=progress, config=CoEvolveConfig.from_params(trained, mask_seed=seeds.mask, evolve=arm.evolve),
                              val_before=val_before)
        s0 = load_skillbank(bank) if bank is not None else None
        final_bank = _final_bank(chain.rounds[-1].curriculum(), s0) if arm.evolve else s0
        if final_bank is not None:
            save_skillbank(final_bank, cell_dir.final_skillbank)
        checkpoint = str(chain.rounds[-1].checkpoint)
        tests = {FINAL_BARE: _test(params, FINAL_BARE, checkpoint, None, out, cell_dir.test(FINAL_BARE).root,
                                   store_root, progress)}
        if final_bank is not None and final_bank.enabled_skills():
            tests[FINAL_BANK] = _test(params, FINAL_BANK, checkpoint, final_bank, out, cell_dir.test(FINAL_BANK).root,
                                      store_root, progress)
        snapshot = training_method(trained).library(chain.rounds[-1].root)
        if snapshot is not None:
            library = _final_library(snapshot, cell_dir.final_library)
            tests[FINAL_LIBRARY] = _test(params, FINAL_LIBRARY, checkpoint, None, out,
                                         cell_dir.test(FINAL_LIBRARY).root, store_root, progress, library)
    summary = CoEvolveSummary.read(RunDir(root).summary)
    if FINAL_LIBRARY in tests:
        deployed = FINAL_LIBRARY
    else:
        deployed = FINAL_BANK if arm.skills == "s0" and FINAL_BANK in tests else FINAL_BARE
    result = CellResult(
        arm=cell.arm, seed_index=cell.seed_index,
        seeds={"experiment": seeds.experiment, "curriculum": seeds.curriculum, "mask": seeds.mask},
        rounds=tuple(RoundRecord.read(r) for r in summary.rounds), tests=tests, deployed=deployed,
        final_bank=tuple(s.skill_id for s in final_bank.enabled_skills()) if final_bank is not None else (),
        wall_seconds=_wall_seconds(root), start_checkpoint=own_start, start_skillbank=arm.skillbank)
    write_json(cell_dir.result, result.to_dict(), indent=1)
    return result


def shared_val_before(params: Params, out: Path, seed_index: int, checkpoint: str | None,
                      store_root: Path | None = None, progress: bool = True) -> Path | None:
    """The shared warm start's bare val check under a cell's parameters (``None`` when rounds check no val):
    ``shared/val-before-seed-<k>``, run once (one cell at a time, under a lock) for every arm of seed index k.

    Its plan is the one round 0's ``val-before`` holds (checkpoint, seed, val tasks), which the round checks
    when it finds the copy."""
    if params.round.val_tasks == 0:
        return None
    run_dir = MatrixDir(out).val_before(seed_index).root
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(run_dir.with_name(run_dir.name + ".lock")):
        if not EvalDir(run_dir).summary.is_file() or not _complete(run_dir):
            with phase("val"):
                policy = build_policy(params.model, checkpoint, store=params.store, experiment=params.experiment)[0]
                bare_val(params, policy, run_dir, store_root, progress)
    return run_dir


def arm_checkpoint(arm: str, checkpoint: str) -> str:
    """An arm's own starting checkpoint resolved against the project root; refused when it holds no model."""
    path = resolve_project_path(checkpoint)
    if not ModelDir(path).is_saved():
        raise FileNotFoundError(f"matrix arm {arm}: checkpoint {checkpoint!r} holds no model ({ModelDir(path).config} "
                                "is missing)")
    return str(path)


def check_arm_inputs(params: Params) -> None:
    """Refuse, before any work, an arm whose own checkpoint holds no model or whose own S₀ is not a bank."""
    for name in params.matrix.arms:
        arm = params.matrix.arm(name)
        own_start = start_checkpoint(params, arm)
        if own_start is not None:
            arm_checkpoint(name, own_start)
        if arm.skillbank is not None:
            path = resolve_project_path(arm.skillbank)
            if not path.is_file():
                raise FileNotFoundError(f"matrix arm {name}: skillbank {arm.skillbank!r} is not a file ({path})")
            load_skillbank(path)


def _final_library(snapshot: Path, target: Path) -> Path:
    """A library cell's final library: its last round's committed ``snapshot``, copied (atomically) beside the
    cell's tests."""
    if not target.is_file():
        staging = target.with_name(target.name + ".copying")
        shutil.copyfile(snapshot, staging)
        staging.replace(target)
    return target


def _final_bank(curriculum: Any, s0: SkillBank | None) -> SkillBank | None:
    """An evolving arm's final bank: its last gate's selection (an empty bank when the gate kept nothing)."""
    if curriculum is None:
        return SkillBank("final-empty", ()) if s0 is not None else None
    return curriculum_bank(curriculum, "final")


def _wall_seconds(root: Path) -> float:
    """The cell's wall time: its finished stages as ``timings.jsonl`` recorded them (a stage killed midway
    counts from where it resumed)."""
    return math.fsum(record["seconds"] for record in iter_jsonl(CellDir(root).timings))


def _run_cell_in_worker(params_data: dict[str, Any], out: str, arm: str, seed_index: int,
                        start: RoundInputs, store_root: Path | None) -> dict[str, Any]:
    """:func:`run_cell` in a worker process (spawned: a fresh interpreter and torch)."""
    params = params_from_dict(params_data, source="control matrix")
    return run_cell(params, Path(out), Cell(arm, seed_index), start, store_root, progress=False).to_dict()


def run_matrix(params: Params, out_dir: str | Path | None = None, *, jobs: int = 1,
               store_root: str | Path | None = None, progress: bool = True,
               ray_address: str | None = None, records_dir: str | Path | None = None) -> MatrixResult:
    """Run (or resume, or extend) the control experiment of ``params.matrix``.

    Parameters
    ----------
    params : the base parameters; ``matrix`` names the arms, seeds, rounds, test tasks and threads.
    out_dir : the matrix directory (default :func:`default_matrix_dir`).
    jobs : cells run at once, each in its own process with ``matrix.threads`` torch threads (results do
        not depend on it).
    store_root : the store directory (default the cached store of ``params.store``).
    progress : progress bars (per cell with ``jobs`` 1, per matrix otherwise).
    ray_address : run each pending cell as a Ray task with ``matrix.threads`` CPUs on the cluster at this address
        (``local``: a fresh local instance; ``auto``: the one this machine belongs to); ``jobs`` is then unused.
        The matrix and store directories must be shared storage every node sees at the same path.
    records_dir : keep the matrix's records here as it goes (:mod:`intraskill.experiment.shipped`): the finished
        cells and baselines it holds are restored first and not re-run, and every part is written there once final
        (a ``grpo`` or ``coevolve`` cell with its seed's deployment baselines, which need its checkpoint), so the
        experiment resumes on a fresh machine from the records alone.
    """
    if jobs < 1:
        raise ValueError(f"jobs: must be >= 1, got {jobs}")
    if ray_address is not None:
        _check_reachable(ray_address)
    out = Path(out_dir) if out_dir is not None else default_matrix_dir(params)
    store = Path(store_root) if store_root is not None else None
    records = Path(records_dir) if records_dir is not None else None
    check_arm_inputs(params)
    plan = matrix_plan(params)
    if records is not None:
        write_matrix_plan(records, plan)  # the records hold this experiment or none yet
        restored = copy_finished(records, out)
        LOGGER.info("control matrix %s: %d finished cells restored from %s", out, len(restored), records)
    write_matrix_plan(out, plan)
    with torch_threads(params.matrix.threads):
        start, _ = shared_start(params, out, store, progress)
    if records is not None:
        ship_start(out, records)
    # seed by seed, so that an interrupted matrix holds whole seeds and each seed's baselines run early
    cells = [Cell(arm, k) for k in range(params.matrix.seeds) for arm in params.matrix.arms]
    pending = [cell for cell in cells if not MatrixDir(out).cell(cell.name).result.is_file()]
    LOGGER.info("control matrix %s: %d cells, %d to run", out, len(cells), len(pending))

    def finished(cell: Cell) -> None:
        with torch_threads(params.matrix.threads):
            _after_cell(params, out, cell, records, store, progress)

    if ray_address is not None:
        _run_on_ray(params, out, pending, start, store, ray_address, progress, finished)
    elif jobs == 1:
        for cell in tqdm(pending, desc="cells", disable=not progress or len(pending) < 2):
            run_cell(params, out, cell, start, store, progress)
            finished(cell)
    else:
        _run_parallel(params, out, pending, start, store, jobs, progress, finished)
    with torch_threads(params.matrix.threads):
        for seed_index in range(params.matrix.seeds):
            run_baselines(params, out, seed_index, store, progress)
    result = load_matrix(out, params.matrix.arms, params.matrix.seeds, family=params.matrix.family)
    write_json(MatrixDir(out).summary, result.to_dict(), indent=1)
    return result


def run_baselines(params: Params, out: Path, seed_index: int, store_root: Path | None = None,
                  progress: bool = True) -> dict[str, TestRun] | None:
    """Seed index ``seed_index``'s deployment baselines (:mod:`intraskill.experiment.baselines`), run or resumed
    and recorded in ``baseline.json`` (read back once recorded); ``None`` while the matrix lacks a finished
    ``grpo`` or ``coevolve`` cell of that seed."""
    cells = {arm: MatrixDir(out).cell(Cell(arm, seed_index).name) for arm in (REFERENCE_ARM, METHOD_ARM)}
    if not all(arm in params.matrix.arms and cell.result.is_file() for arm, cell in cells.items()):
        return None
    baseline = MatrixDir(out).baseline(seed_index)
    if baseline.record.is_file():
        return read_baselines(out)[seed_index]
    grpo = CellResult.from_dict(json.loads(cells[REFERENCE_ARM].result.read_text(encoding="utf-8")))
    bank = load_skillbank(cells[METHOD_ARM].final_skillbank)
    tests = {GRPO_S0: replace(grpo.tests[FINAL_BANK], condition=GRPO_S0)} if FINAL_BANK in grpo.tests else {}
    if bank.enabled_skills():
        tests[GRPO_METHOD_BANK] = _test(params, GRPO_METHOD_BANK, grpo.tests[FINAL_BARE].checkpoint, bank, out,
                                        baseline / METHOD_BANK_RUN, store_root, progress)
    else:
        tests[GRPO_METHOD_BANK] = replace(grpo.tests[FINAL_BARE], condition=GRPO_METHOD_BANK)
    write_json(baseline.record, {"seed_index": seed_index, "tests": {n: r.to_dict() for n, r in tests.items()}},
               indent=1)
    return tests


def _after_cell(params: Params, out: Path, cell: Cell, records: Path | None, store_root: Path | None,
                progress: bool) -> None:
    """Once ``cell`` finished: its seed's deployment baselines when both their cells are done (while the
    checkpoints are here), then into ``records`` whatever is now final."""
    tests = run_baselines(params, out, cell.seed_index, store_root, progress)
    if records is None:
        return
    pair = (REFERENCE_ARM, METHOD_ARM)
    if cell.arm in pair and set(pair) <= set(params.matrix.arms):
        if tests is None:
            return  # the seed's baselines still need this cell's checkpoint: it is kept with them
        for arm in pair:
            ship_cell(out, records, Cell(arm, cell.seed_index).name)
        ship_baseline(out, records, cell.seed_index)
    else:
        ship_cell(out, records, cell.name)


def _run_parallel(params: Params, out: Path, cells: Sequence[Cell], start: RoundInputs, store_root: Path | None,
                  jobs: int, progress: bool, finished: Callable[[Cell], None]) -> None:
    context = multiprocessing.get_context("spawn")
    data = params.model_dump(mode="json")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(_run_cell_in_worker, data, str(out), c.arm, c.seed_index, start,
                               store_root): c for c in cells}
        _finish_each(((futures[future], future.result) for future in
                      tqdm(as_completed(futures), total=len(futures), desc="cells", disable=not progress)), finished)


def _finish_each(outcomes: Iterable[tuple[Cell, Callable[[], object]]], finished: Callable[[Cell], None]) -> None:
    """``finished`` for each cell whose result (the callable) returns, in the order they come; a cell that raised is
    logged and the others go on, so no finished cell loses its records or baselines; the first failure is raised
    once every cell has come."""
    failures: list[Exception] = []
    for cell, result in outcomes:
        try:
            result()
        except Exception as error:  # noqa: BLE001 -- the other cells' records first, then this error
            LOGGER.error("control matrix: cell %s failed: %s", cell.name, error)
            failures.append(error)
            continue
        finished(cell)
    if failures:
        raise failures[0]


def _run_on_ray(params: Params, out: Path, cells: Sequence[Cell], start: RoundInputs, store_root: Path | None,
                address: str, progress: bool, finished: Callable[[Cell], None]) -> None:
    """Each of ``cells`` as a Ray task with ``matrix.threads`` CPUs on the cluster at ``address`` (the driver
    disconnects, or a local instance it started stops, when they finish or one fails)."""
    # deferred: ray is heavy to import and only this path needs it
    import ray

    try:
        if address == "local":
            ray.init(address="local", include_dashboard=False, log_to_driver=False, configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError) as error:
        raise MatrixRayError(f"--ray {address}: cannot reach a Ray cluster ({error})") from error
    try:
        task = ray.remote(num_cpus=params.matrix.threads, max_retries=0)(_run_cell_in_worker)
        data = params.model_dump(mode="json")
        tasks = {task.remote(data, str(out), c.arm, c.seed_index, start, store_root): c for c in cells}
        def outcomes() -> Iterator[tuple[Cell, Callable[[], object]]]:
            pending = list(tasks)
            with tqdm(total=len(pending), desc="cells", disable=not progress) as bar:
                while pending:
                    done, pending = ray.wait(pending, num_returns=1)
                    yield tasks[done[0]], functools.partial(ray.get, done)
                    bar.update(len(done))

        _finish_each(outcomes(), finished)
    finally:
        ray.shutdown()


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Raise :class:`MatrixRayError` unless a cluster address ``[ray://]HOST:PORT`` accepts a TCP connection within
    ``timeout`` seconds (``ray.init`` would retry an unreachable one for minutes); ``local`` and ``auto`` pass."""
    if address in ("local", "auto"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise MatrixRayError(f"--ray {address}: not an address (HOST:PORT, ray://HOST:PORT, local or auto)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        raise MatrixRayError(f"--ray {address}: no Ray cluster answers there ({error})") from error
