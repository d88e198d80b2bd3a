"""Trace2Skill: failure cards, the gold firewall, the online compiler's submission checks and the proposal
ledger (the candidate pool they fill is :mod:`intraskill.skills.pool`).

Reference: docs/method.md §4 (roles, programmatic downgrades, gold firewall, candidate pool,
proposal ledger). The LLM analyst and compiler roles produce the raw payloads; the modules here are
the deterministic contracts those payloads must pass.
"""
