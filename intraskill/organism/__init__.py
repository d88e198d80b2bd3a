"""The organism testbed: teacher competence laws, expert demonstrations, copy drills, behaviour cloning,
exact plan targets, the warm start and its ground truth, and the title-sensitivity probe.

A testbed with planted chunk effects, not a claim about LLMs. Torch is imported inside functions only."""
