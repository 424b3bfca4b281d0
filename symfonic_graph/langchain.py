"""The public import path; the implementation lives in ``symfonic_graph/integrations/langchain.py``."""

from symfonic_graph.integrations.langchain import (
    REMINDERS_MARKER_KEY,
    REMINDERS_MARKER_VALUE,
    MemoryMiddleware,
    scope_in_context,
    with_preflight,
)

__all__ = [
    "REMINDERS_MARKER_KEY",
    "REMINDERS_MARKER_VALUE",
    "MemoryMiddleware",
    "scope_in_context",
    "with_preflight",
]
