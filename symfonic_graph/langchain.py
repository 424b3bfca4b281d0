"""The public import path; the implementation lives in ``symfonic_graph/integrations/langchain.py``."""

from symfonic_graph.integrations.langchain import (
    OFFERED_KEY,
    REMINDERS_MARKER_KEY,
    REMINDERS_MARKER_VALUE,
    MemoryMiddleware,
    MemoryState,
    reminder_tools,
    scope_in_context,
    with_preflight,
)

__all__ = [
    "OFFERED_KEY",
    "REMINDERS_MARKER_KEY",
    "REMINDERS_MARKER_VALUE",
    "MemoryMiddleware",
    "MemoryState",
    "reminder_tools",
    "scope_in_context",
    "with_preflight",
]
