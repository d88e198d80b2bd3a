"""Integrations with external training frameworks (the scale tier).

Each integration is a set of plain functions loaded by dotted path from the framework's command
line; nothing here imports the framework at import time.
"""
