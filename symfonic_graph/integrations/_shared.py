"""What both integrations do alike: the cue a turn's reminders are chosen by, and the reminders message's mark.

``MemoryMiddleware`` (LangChain) and ``build_agent_graph`` (LangGraph) both
pick a turn's reminders by the text of the user's latest message; both read
it here, from a conversation in any message shape, passing over the
reminders message the middleware itself adds.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> last_human_text([HumanMessage("refund order 7"), AIMessage("on it"),
    ...                  HumanMessage("(reminders)", response_metadata={REMINDERS_MARKER_KEY: "reminders"})])
    'refund order 7'
    >>> last_human_text([{"role": "user", "content": "hi"}]), last_human_text([])
    ('hi', '')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from symfonic_graph.rules._messages import field, user_text

__all__ = ["REMINDERS_MARKER_KEY", "REMINDERS_MARKER_VALUE", "Cue", "is_reminders", "last_human_text"]

REMINDERS_MARKER_KEY: Final = "symfonic_graph_memory"
"""``response_metadata`` key marking the trailing reminders message (never sent to a provider)."""
REMINDERS_MARKER_VALUE: Final = "reminders"


class Cue:
    """The request shape ``ProspectiveTriggerCapability`` reads its cue from."""

    __slots__ = ("prompt",)

    def __init__(self, prompt: str) -> None:
        self.prompt = prompt


def is_reminders(message: object) -> bool:
    """Whether ``message`` is the reminders message the middleware added (marked in its ``response_metadata``)."""
    meta = field(message, "response_metadata")
    return isinstance(meta, Mapping) and meta.get(REMINDERS_MARKER_KEY) == REMINDERS_MARKER_VALUE


def last_human_text(messages: Sequence[Any]) -> str:
    """The text of the latest user message that is not a reminders message ("" when there is none)."""
    for message in reversed(messages):
        text = user_text(message)
        if text is not None and not is_reminders(message):
            return text
    return ""
