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
from datetime import UTC, datetime
from typing import Any, Final

from symfonic_graph.rules._messages import field, user_text
from symfonic_graph.rules.events import Conversation, ToolCall, ToolCallRef

__all__ = ["REMINDERS_MARKER_KEY", "REMINDERS_MARKER_VALUE", "Cue", "earlier_siblings", "is_reminders",
           "last_human_text", "wall_time"]

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


def wall_time(memory: object) -> datetime | None:
    """The time the rules' expressions read: a ``TurnMemory``'s ``wall_clock()``, else None (the current time)."""
    clock = getattr(memory, "wall_clock", None)
    return datetime.fromtimestamp(clock(), UTC) if callable(clock) else None


def earlier_siblings(conversation: Conversation, call_id: object) -> list[ToolCallRef]:
    """The calls requested just before ``call_id`` with no result between (its batch; a limit counts them as running).

    Example:
        >>> conversation = Conversation()
        >>> for ref in (ToolCallRef("a", "refund"), ToolCallRef("b", "refund")):
        ...     _ = conversation.add_call(ref)
        >>> [ref.id for ref in earlier_siblings(conversation, "b")]
        ['a']
    """
    call = conversation.requested(call_id if isinstance(call_id, str) else None)
    if call is None:
        return []
    events = conversation.events
    index = next((i for i in range(len(events) - 1, -1, -1) if events[i] is call), None)
    out: list[ToolCallRef] = []
    for event in reversed(events[:index] if index is not None else ()):
        if type(event) is not ToolCall or event.made_before != call.made_before:
            break
        out.append(event.ref)
    return out[::-1]
