"""Reading agent messages in every shape a turn may hold them.

LangChain message objects, plain dicts (``{"role": ..., "content": ...}``,
``{"type": ..., ...}``), ``message_to_dict()`` output and OpenAI's wire
format for tool calls. The gate, the lookups and the LangGraph wiring all
read messages through this module, so they agree on what a tool call is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages

__all__ = [
    "GATE_MARKER_KEY",
    "GATE_MARKER_VALUE",
    "MISSING_PREFIX",
    "ToolCallRef",
    "UNAVAILABLE_PREFIX",
    "called_tools",
    "field",
    "messages_of",
    "terminal_ai_message",
    "terminal_tool_calls",
]

GATE_MARKER_KEY: Final = "symfonic_graph_gate"
"""``response_metadata`` key marking a result the gate injected."""
GATE_MARKER_VALUE: Final = "precondition"
MISSING_PREFIX: Final = "Missing precondition: "
UNAVAILABLE_PREFIX: Final = "Precondition check unavailable: "




def _unwrap(message: object) -> object:
    if isinstance(message, Mapping) and "content" not in message and isinstance(message.get("data"), Mapping):
        return message["data"]  # message_to_dict() form: {"type": ..., "data": {...}}
    return message


def field(message: object, key: str) -> Any:
    """``key`` of a message object or dict (None when absent)."""
    message = _unwrap(message)
    if isinstance(message, Mapping):
        return message.get(key)
    return getattr(message, key, None)


def _kind(message: object) -> str | None:
    kind = field(message, "type") or field(message, "role")
    if kind in ("ai", "assistant", "AIMessageChunk"):
        return "ai"
    if kind == "tool":
        return "tool"
    return None


@dataclass(frozen=True, slots=True)
class ToolCallRef:
    """One tool call requested by an AI message.

    Example:
        >>> ToolCallRef(id="call_1", name="deploy")
        ToolCallRef(id='call_1', name='deploy')
    """

    id: str | None
    name: str


def _call_ref(call: object) -> ToolCallRef | None:
    if not isinstance(call, Mapping):
        return None
    name = call.get("name")
    function = call.get("function")
    if not isinstance(name, str) and isinstance(function, Mapping):
        name = function.get("name")  # OpenAI wire format
    call_id = call.get("id")
    if not isinstance(name, str):
        return None
    return ToolCallRef(call_id if isinstance(call_id, str) else None, name)


def _tool_calls(message: object) -> list[ToolCallRef]:
    if _kind(message) != "ai":
        return []
    raw = field(message, "tool_calls")
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        return []
    return [ref for ref in map(_call_ref, raw) if ref is not None]


def terminal_tool_calls(messages: Sequence[Any] | None) -> list[ToolCallRef]:
    """The tool calls of the terminal message if it is an AI message, else ``[]``.

    Example:
        >>> terminal_tool_calls([{"role": "assistant", "content": "",
        ...     "tool_calls": [{"id": "c1", "name": "deploy", "args": {}}]}])
        [ToolCallRef(id='c1', name='deploy')]
    """
    if not messages:
        return []
    return _tool_calls(messages[-1])


def _is_injected(message: object) -> bool:
    for key in ("response_metadata", "additional_kwargs"):
        meta = field(message, key)
        if isinstance(meta, Mapping) and meta.get(GATE_MARKER_KEY) == GATE_MARKER_VALUE:
            return True
    content = field(message, "content")
    return (
        field(message, "status") == "error"
        and isinstance(content, str)
        and content.startswith((MISSING_PREFIX, UNAVAILABLE_PREFIX))
    )


def called_tools(messages: Iterable[Any]) -> frozenset[str]:
    """Names of the tools whose results appear in ``messages`` (gate results excluded).

    Example:
        >>> called_tools([
        ...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "auth"}]},
        ...     {"role": "tool", "content": "ok", "tool_call_id": "c1"},
        ... ])
        frozenset({'auth'})
    """
    messages = list(messages)
    names_by_id = {ref.id: ref.name for message in messages for ref in _tool_calls(message) if ref.id is not None}
    called: set[str] = set()
    for message in messages:
        if _kind(message) != "tool" or _is_injected(message):
            continue
        name = field(message, "name")
        if not (isinstance(name, str) and name):
            name = names_by_id.get(field(message, "tool_call_id"))
        if name:
            called.add(name)
    return frozenset(called)


def messages_of(state: object, key: str = "messages") -> Sequence[Any]:
    """``state[key]`` (or the attribute) when it is a sequence of messages, else ``[]``."""
    messages = state.get(key) if isinstance(state, Mapping) else getattr(state, key, None)
    if isinstance(messages, Sequence) and not isinstance(messages, str):
        return messages
    return []


def terminal_ai_message(messages: Sequence[Any]) -> AIMessage | None:
    """The terminal message as an ``AIMessage`` when it is one with tool calls, else None.

    Example:
        >>> terminal_ai_message([{"role": "assistant", "content": "",
        ...     "tool_calls": [{"id": "c1", "name": "deploy", "args": {}}]}]).tool_calls[0]["name"]
        'deploy'
    """
    if not messages:
        return None
    last = messages[-1]
    if not isinstance(last, BaseMessage):
        try:
            last = convert_to_messages([_unwrap(last)])[0]  # type: ignore[list-item]
        except Exception:  # not a message we can execute
            return None
    return last if isinstance(last, AIMessage) and last.tool_calls else None
