"""Analysis: re-analysis of the public IntraSkill release and behaviour tables."""
