"""Public path of ``symfonic_graph.models``; the implementation lives in ``symfonic_graph.shape.models``."""

from symfonic_graph.shape.models import (
    STATE_OPS,
    Fact,
    Skill,
    SkillReading,
    Trigger,
    read_skill,
    read_skills,
)

__all__ = [
    "STATE_OPS",
    "Fact",
    "Skill",
    "SkillReading",
    "Trigger",
    "read_skill",
    "read_skills",
]
