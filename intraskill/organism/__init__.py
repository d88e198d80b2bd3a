"""The organism testbed: teacher competence laws, expert demonstrations, copy drills, behaviour cloning,
exact plan targets, the warm start and its ground truth, shipping it, the gate's validation against that truth,
and the title-sensitivity probe.

A testbed with planted chunk effects, not a claim about LLMs, and no stage imports it (the stages read a warm
start through :mod:`intraskill.policy.warmstarts`). Torch is imported inside functions only."""
