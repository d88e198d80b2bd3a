"""Stage orchestration: the rollout step, a training round, gate runs and their validation, the
co-evolve loop and the inputs a round is prepared from. Each stage resumes in its run directory."""
