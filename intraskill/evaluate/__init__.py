"""Evaluation: the eval runner, run summaries, paired bootstrap CIs and paired run comparison."""
