"""The control experiment: co-evolution against plain GRPO, a fixed skill, no masks and uniform masks,
over training seeds (:mod:`~intraskill.experiment.matrix`)."""
