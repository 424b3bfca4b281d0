"""The public import path; the implementation lives in ``symfonic_graph/memory/skill_source.py``."""

from symfonic_graph.memory.skill_source import (
    ScopeFrom,
    StoreSkillGetter,
    scope_from_state,
)

__all__ = [
    "ScopeFrom",
    "StoreSkillGetter",
    "scope_from_state",
]
