"""The public import path; the implementation lives in ``symfonic_graph/memory/turn_scope.py``."""

from symfonic_graph.memory.turn_scope import (
    SCOPE_KEY,
    ScopeFrom,
    scope_from_state,
    scope_from_turn,
    scope_of,
)

__all__ = [
    "SCOPE_KEY",
    "ScopeFrom",
    "scope_from_state",
    "scope_from_turn",
    "scope_of",
]
