"""slime plugin hooks for the scale tier (``docs/method.md`` §6; ``docs/slime.md``).

The hooks are plain functions that slime loads by dotted path (``slime.utils.misc.load_function``:
``module, _, name = path.rpartition("."); getattr(importlib.import_module(module), name)``):

=======================================  ==========================================================
slime flag                               hook (under ``intraskill.integrations.slime``)
=======================================  ==========================================================
``--custom-generate-function-path``      :func:`.generate.generate`
``--dynamic-sampling-filter-path``       :func:`.filters.fully_scored_group_filter`
``--custom-reward-post-process-path``    :func:`.rewards.normalize_grpo_by_prompt_and_rollout`
``--custom-rollout-log-function-path``   :func:`.metrics.enrich_rollout_metrics`
``--rollout-all-samples-process-path``   :func:`.metrics.record_generated_rollout_groups`
=======================================  ==========================================================

Run settings come from ``--custom-config-path`` (``intraskill_*`` keys, :mod:`.config`); the task
file is written by :func:`intraskill.integrations.slime.data.write_slime_tasks`. slime itself is
imported only inside functions (``Sample`` is never imported: the hooks use ``type(sample).Status``),
so every module here imports, and is tested, without slime installed. See ``docs/slime.md``.
"""
