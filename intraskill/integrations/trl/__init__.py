"""Training on the store with Hugging Face TRL's ``GRPOTrainer`` (the ``trl`` extra).

:mod:`.rollout` (a ``rollout_func`` that plays whole store episodes and hands TRL their token streams, and the
reward function that reads the store's reward back) and :mod:`.recipe` (TRL's config from a parameter set, the
task dataset, the trainer). :mod:`.rollout` needs only torch and transformers; :mod:`.recipe` imports ``trl``.
See ``docs/trl.md``.
"""
