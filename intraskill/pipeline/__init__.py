"""Stage orchestration: the training methods behind one interface, the rollout step, a training round, gate runs,
the co-evolve loop and the inputs a round is prepared from. Each stage resumes in its run directory."""
