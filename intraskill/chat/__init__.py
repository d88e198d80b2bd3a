"""The leaf that agent and policy share: the ``Policy`` protocol, chat requests, generations and the
ChatML rendering with the Hermes/Qwen tool-call parser. It imports nothing else from ``intraskill``."""
