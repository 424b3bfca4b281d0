"""Reading agent messages in every shape a turn may hold them.

LangChain message objects, plain dicts (``{"role": ..., "content": ...}``,
``{"type": ..., ...}``), ``message_to_dict()`` output and OpenAI's wire
format for tool calls. The gate, the lookups and the LangGraph wiring all
read messages through this module, so they agree on what a tool call is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages

__all__ = [
    "GATE_CONTENT_MARKER",
    "GATE_MARKER_KEY",
    "GATE_MARKER_VALUE",
    "MISSING_PREFIX",
    "CallResult",
    "History",
    "HistoryReader",
    "ToolCallRef",
    "UNAVAILABLE_PREFIX",
    "called_tools",
    "field",
    "messages_of",
    "parse_turn",
    "read_history",
    "terminal_ai_message",
    "terminal_tool_calls",
]

GATE_MARKER_KEY: Final = "symfonic_graph_gate"
"""``response_metadata`` key marking a result the gate injected."""
GATE_MARKER_VALUE: Final = "precondition"
MISSING_PREFIX: Final = "Missing precondition: "
UNAVAILABLE_PREFIX: Final = "Precondition check unavailable: "
GATE_CONTENT_MARKER: Final = "[symfonic-graph gate]"
"""Ends the content of every result the gate writes: it survives round trips that drop metadata and status."""


def _unwrap(message: object) -> object:
    # ``type(...) is dict`` first: the common case, and an ABC isinstance check costs ~10x more
    if (type(message) is dict or isinstance(message, Mapping)) and "content" not in message \
            and isinstance(message.get("data"), Mapping):
        return message["data"]  # message_to_dict() form: {"type": ..., "data": {...}}
    return message


def _getter(message: object) -> Callable[[str], Any]:
    """``key -> value`` of a message object or dict, unwrapped once (None when absent)."""
    message = _unwrap(message)
    if type(message) is dict or isinstance(message, Mapping):
        return message.get
    return lambda key: getattr(message, key, None)


def field(message: object, key: str) -> Any:
    """``key`` of a message object or dict (None when absent)."""
    return _getter(message)(key)


def _kind_of(get: Callable[[str], Any]) -> str | None:
    kind = get("type") or get("role")
    if kind in ("ai", "assistant", "AIMessageChunk"):
        return "ai"
    if kind == "tool":
        return "tool"
    if kind in ("human", "user", "HumanMessageChunk"):
        return "user"
    return None


def _kind(message: object) -> str | None:
    return _kind_of(_getter(message))


@dataclass(frozen=True, slots=True)
class ToolCallRef:
    """One tool call requested by an AI message.

    Example:
        >>> ToolCallRef(id="call_1", name="deploy")
        ToolCallRef(id='call_1', name='deploy')
    """

    id: str | None
    name: str
    args: Mapping[str, Any] | None = dataclass_field(default=None, repr=False, compare=False)
    """The call's arguments (LangChain ``args``, or OpenAI ``function.arguments`` decoded); None if unreadable."""


def _arguments(call: Mapping[str, Any], function: object) -> Mapping[str, Any] | None:
    args = call.get("args")
    if args is None and isinstance(function, Mapping):
        args = function.get("arguments")  # OpenAI wire format: a JSON object as text
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    return args if isinstance(args, Mapping) else None


def _call_ref(call: object) -> ToolCallRef | None:
    if type(call) is not dict and not isinstance(call, Mapping):
        return None
    name = call.get("name")
    function = call.get("function")
    if not isinstance(name, str) and isinstance(function, Mapping):
        name = function.get("name")  # OpenAI wire format
    call_id = call.get("id")
    if not isinstance(name, str):
        return None
    return ToolCallRef(call_id if isinstance(call_id, str) else None, name, _arguments(call, function))


def _tool_calls(message: object) -> list[ToolCallRef]:
    get = _getter(message)
    return _calls_of(get) if _kind_of(get) == "ai" else []


def _calls_of(get: Callable[[str], Any]) -> list[ToolCallRef]:
    raw = get("tool_calls")
    if type(raw) is not list and (not isinstance(raw, Sequence) or isinstance(raw, str)):
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
    return _injected(_getter(message))


def _injected(get: Callable[[str], Any]) -> bool:
    for key in ("response_metadata", "additional_kwargs"):
        meta = get(key)
        if meta and isinstance(meta, Mapping) and meta.get(GATE_MARKER_KEY) == GATE_MARKER_VALUE:
            return True
    content = get("content")
    if not isinstance(content, str) or not content.startswith((MISSING_PREFIX, UNAVAILABLE_PREFIX)):
        return False
    return content.rstrip().endswith(GATE_CONTENT_MARKER) or bool(get("status") == "error")


@dataclass(frozen=True, slots=True)
class CallResult:
    """A tool call that has its result in the conversation: a call that was made.

    Attributes:
        name: the tool.
        args: the arguments the AI message gave it (None when unknown).
        failed: the result was marked failed (``status="error"``).
        user_turn: how many user messages came before the call's result.
    """

    name: str
    args: Mapping[str, Any] | None
    failed: bool
    user_turn: int


@dataclass(frozen=True, slots=True)
class History:
    """The calls made before the terminal message, read once per turn.

    Example:
        >>> History.of_names(["auth"]).called(count_failed=False)
        frozenset({'auth'})
    """

    results: tuple[CallResult, ...] = ()
    user_turn: int = 0
    """How many user messages came before the terminal message."""

    @classmethod
    def of_names(cls, names: Iterable[str]) -> History:
        """A history where each of ``names`` was called once, successfully, in this user turn."""
        return cls(tuple(CallResult(name, None, False, 0) for name in names), 0)

    def called(self, *, count_failed: bool) -> frozenset[str]:
        """The tools with a result (failed ones only with ``count_failed``)."""
        return frozenset(r.name for r in self.results if count_failed or not r.failed)


class HistoryReader:
    """Read a conversation one message at a time, as :func:`parse_turn` reads it.

    ``parse_turn`` is this reader fed every message but the last, so replaying
    a long conversation turn by turn costs one pass instead of one per turn.

    Example:
        >>> reader = HistoryReader()
        >>> reader.feed({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "auth"}]})
        [ToolCallRef(id='c1', name='auth')]
        >>> reader.feed({"role": "tool", "content": "ok", "tool_call_id": "c1"})
        []
        >>> [r.name for r in reader.history().results]
        ['auth']
    """

    __slots__ = ("_calls_by_id", "_results", "_user_turn")

    def __init__(self) -> None:
        self._calls_by_id: dict[str, ToolCallRef] = {}
        self._results: list[CallResult] = []
        self._user_turn = 0

    def feed(self, message: object) -> list[ToolCallRef]:
        """Take one more message; return its tool calls (``[]`` unless it is an AI message with calls).

        An AI message adds no call made (its calls are made once their results
        appear), so the history is the same just before and just after it.
        """
        get = _getter(message)
        kind = _kind_of(get)
        if kind == "ai":
            calls = _calls_of(get)
            for ref in calls:
                if ref.id is not None:
                    self._calls_by_id[ref.id] = ref
            return calls
        if kind == "user":
            self._user_turn += 1
        elif kind == "tool" and not _injected(get):
            call = self._calls_by_id.get(get("tool_call_id"))
            name = get("name")
            if not (isinstance(name, str) and name):
                name = call.name if call is not None else None
            if name:
                self._results.append(CallResult(name, call.args if call is not None else None,
                                                get("status") == "error", self._user_turn))
        return []

    @property
    def results(self) -> Sequence[CallResult]:
        """The calls made so far, in the order their results appeared (a live view: do not change it)."""
        return self._results

    def history(self) -> History:
        """The calls made in the messages fed so far."""
        return History(tuple(self._results), self._user_turn)


def parse_turn(messages: Sequence[Any]) -> tuple[History, list[ToolCallRef]]:
    """Read a conversation once: the calls made before its terminal message, and that message's calls.

    A call is made once its result appears (results the gate injected never
    count); the terminal message's own calls are not made yet.

    Example:
        >>> history, calls = parse_turn([
        ...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "auth", "args": {}}]},
        ...     {"role": "tool", "content": "denied", "tool_call_id": "c1", "status": "error"},
        ...     {"role": "user", "content": "try again"},
        ...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "name": "deploy", "args": {}}]}])
        >>> history.results[0].failed, history.user_turn, calls[0].name
        (True, 1, 'deploy')
    """
    if not messages:
        return History(), []
    reader = HistoryReader()
    for message in messages[:-1]:
        reader.feed(message)
    return reader.history(), _tool_calls(messages[-1])


def called_tools(messages: Iterable[Any]) -> frozenset[str]:
    """Names of the tools whose results appear in ``messages`` (gate results excluded, failed ones included).

    Example:
        >>> called_tools([
        ...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "auth"}]},
        ...     {"role": "tool", "content": "ok", "tool_call_id": "c1"},
        ... ])
        frozenset({'auth'})
    """
    return read_history(messages).called(count_failed=True)


def read_history(messages: Iterable[Any]) -> History:
    """The calls made in ``messages``, every one of them read as history (no terminal message held back).

    Example:
        >>> read_history([{"role": "user", "content": "hi"}]).user_turn
        1
    """
    reader = HistoryReader()
    for message in messages:
        reader.feed(message)
    return reader.history()


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
