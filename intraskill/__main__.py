"""`python -m intraskill` runs the command-line interface."""

from intraskill.cli import app

app(prog_name="intraskill")
