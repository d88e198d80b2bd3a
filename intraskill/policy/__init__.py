"""Policies: the :class:`~intraskill.chat.base.Policy` protocol and its backends.

``hf`` (in-process lockstep decoding with KV-cache reuse), ``openai`` (any OpenAI-compatible
endpoint), the ``organism`` model, the ChatML format, and ``serve-policy``. Submodules import
torch/transformers lazily; import what you need from them (e.g. ``intraskill.policy.factory``).
"""
