"""IntraSkill: skill-model co-evolution for LLM shopping agents."""

__version__ = "0.1.0"
