"""Shared fixtures: a small synthetic catalogue, its index and a store, built once per test session."""
