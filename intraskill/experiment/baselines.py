"""Deployment baselines: what plain GRPO ships with a skill, per seed, paired with the method's deployment.

For each seed index k where both the ``grpo`` and the ``coevolve`` cells finished, two deployments of
``grpo``'s final checkpoint on the same test tasks and episode seeds as every other test run:

* ``grpo+s0`` — with the shared S₀ (the ``grpo`` cell's own ``final-bank`` run: a skill-free arm's final bank
  is S₀, so nothing runs again; absent when S₀ kept no chunk);
* ``grpo+coevolve_bank`` — with ``coevolve``'s final bank of seed k (``baselines/seed-<k>/test-grpo-coevolve-bank``,
  resumable like every test run; when that bank is empty the deployment is ``grpo`` bare and its record names
  the ``grpo`` cell's ``final-bare`` run).

``baselines/seed-<k>/baseline.json`` records both as :class:`~intraskill.experiment.records.TestRun`\\ s. Each
baseline reads as a pseudo-cell of its own name (:func:`baseline_cells`) whose deployed run is the deployment
and whose bare run is ``grpo``'s, so that the comparisons ``coevolve − grpo+s0`` and ``coevolve −
grpo+coevolve_bank`` (deployed) go through the same contrast as every other pair. A matrix without the ``grpo``
or the ``coevolve`` arm has none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from intraskill.experiment.records import FINAL_BANK, FINAL_BARE, CellResult, TestRun
from intraskill.layout import MatrixDir
from intraskill.params import REFERENCE_ARM

GRPO_S0 = "grpo+s0"
GRPO_METHOD_BANK = "grpo+coevolve_bank"
BASELINES: tuple[str, ...] = (GRPO_S0, GRPO_METHOD_BANK)
BASELINE_DESCRIPTIONS = {GRPO_S0: "grpo's final checkpoint with the shared S₀",
                         GRPO_METHOD_BANK: "grpo's final checkpoint with coevolve's final bank of the same seed"}
METHOD_BANK_RUN = "test-grpo-coevolve-bank"


def read_baselines(out: Path, seeds: int | None = None) -> dict[int, dict[str, TestRun]]:
    """Seed index → baseline name → its test run, for every recorded seed (below ``seeds`` when given)."""
    found = {}
    for path in MatrixDir(out).baseline_records():
        record = json.loads(path.read_text(encoding="utf-8"))
        if seeds is None or record["seed_index"] < seeds:
            found[record["seed_index"]] = {name: TestRun.from_dict(record["tests"][name])
                                           for name in BASELINES if name in record["tests"]}
    return dict(sorted(found.items()))


def baseline_cells(cells: Sequence[CellResult], baselines: dict[int, dict[str, TestRun]]) -> list[CellResult]:
    """Each recorded baseline as a pseudo-cell: ``grpo``'s seeds, bare run and final checkpoint, the baseline's
    run deployed, no rounds of its own (its training is ``grpo``'s)."""
    grpo = {c.seed_index: c for c in cells if c.arm == REFERENCE_ARM}
    out = []
    for name in BASELINES:
        for seed_index, runs in baselines.items():
            if name in runs and seed_index in grpo:
                reference = grpo[seed_index]
                out.append(CellResult(name, seed_index, dict(reference.seeds), (),
                                      {FINAL_BARE: reference.tests[FINAL_BARE], FINAL_BANK: runs[name]}, FINAL_BANK,
                                      runs[name].skills, 0.0))
    return out
