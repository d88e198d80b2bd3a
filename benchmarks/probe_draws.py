"""The next round's treatments of two co-evolution runs, e.g. one and two torch threads (prints one JSON line).

Reads each run's round-r gate curriculum (``round-<r>/gate/curriculum.json``, the curriculum of round r + 1) and
compares the treatment of every group slot round r + 1 can generate (rollout steps × waves × over-sampling slots)
drawn two ways: as the project draws them (:func:`~intraskill.skills.curriculum.assign_group`, keyed on content) and
as the reference keys them (``state_id``). It also reports each run's torch threads, the two round-r checkpoints'
digests and their largest weight difference, and what each gate selected.

    python benchmarks/probe_draws.py runs/threads/t1 runs/threads/t2 [--round 0]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _state_keyed(state, group: int) -> tuple[str, ...] | None:
    """The reference's treatment (§2.1 keyed on ``state_id``): ``None`` for skill-free, else the chunks drawn."""
    from intraskill.skills.curriculum import treatment_draw

    if treatment_draw(state.seed, state.state_id, group, "skill-free") < state.skill_free_probability:
        return None
    return tuple(c.skill_id for c in state.chunks
                 if treatment_draw(state.seed, state.state_id, group, f"chunk:{c.skill_id}") < c.inclusion_probability)


def _max_weight_difference(a: Path, b: Path) -> float:
    from safetensors.torch import load_file

    largest = 0.0
    for file in sorted(a.glob("*.safetensors")):
        left, right = load_file(str(file)), load_file(str(b / file.name))
        for name, tensor in left.items():
            largest = max(largest, float((tensor.double() - right[name].double()).abs().max()))
    return largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs=2, type=Path, help="two co-evolution run directories")
    parser.add_argument("--round", type=int, default=0, help="the round whose gate made the compared curriculum")
    args = parser.parse_args()

    from intraskill.params import params_from_dict
    from intraskill.pipeline.rollout import MAX_WAVES, group_index
    from intraskill.policy.factory import weights_digest
    from intraskill.skills.curriculum import assign_group, load_curriculum

    name = f"round-{args.round:03d}"
    runs, states, models = [], [], []
    for run in args.runs:
        state = load_curriculum(run / name / "gate" / "curriculum.json")
        model = run / name / "checkpoint" / "model"
        threads = json.loads((run / name / "plan.json").read_text(encoding="utf-8"))["provenance"]["torch_threads"]
        runs.append({"run": str(run), "torch_threads": threads, "checkpoint_sha256": weights_digest(model),
                     "state_id": state.state_id, "draw_id": state.draw_id,
                     "chunks": {c.skill_id: c.contribution for c in state.chunks}})
        states.append(state)
        models.append(model)
    params = params_from_dict(json.loads((args.runs[0] / "plan.json").read_text(encoding="utf-8"))["params"])
    steps, size = range(1, params.round.rollout_steps + 1), params.round.over_sampling_batch_size
    slots = [group_index(args.round + 1, step, wave, slot, size)
             for step in steps for wave in range(MAX_WAVES) for slot in range(size)]
    first = [group_index(args.round + 1, step, 0, slot, size) for step in steps for slot in range(size)]

    def same(groups: list[int], draw) -> int:
        return sum(draw(states[0], g) == draw(states[1], g) for g in groups)

    def content(state, group: int) -> tuple[str, tuple[str, ...]]:
        assignment = assign_group(state, group)
        return assignment.mode, assignment.skill_ids

    print(json.dumps({
        "runs": runs, "round": args.round + 1,
        "max_abs_weight_difference": _max_weight_difference(*models),
        "group_slots": len(slots), "first_wave_groups": len(first),
        "identical": {"content_key": {"all": same(slots, content), "first_wave": same(first, content)},
                      "state_id_key": {"all": same(slots, _state_keyed), "first_wave": same(first, _state_keyed)}},
    }))


if __name__ == "__main__":
    main()
