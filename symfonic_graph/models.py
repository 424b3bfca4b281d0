"""The public import path; the implementation lives in ``symfonic_graph/shape/models.py``."""

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
