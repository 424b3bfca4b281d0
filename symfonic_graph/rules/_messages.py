"""Reading agent messages in every shape a turn may hold them.

LangChain message objects (chunks and ``ChatMessage`` included), plain dicts
(``{"role": ..., "content": ...}``, ``{"type": ..., ...}``), ``message_to_dict()``
and ``dumpd()`` output, OpenAI chat tool calls (text or block content), OpenAI
Responses API items (``function_call``, ``function_call_output``, ``message``),
bare strings and ``(role, text)`` pairs, read into the events of
:mod:`symfonic_graph.rules.events`. The gate, the lookups, replay, mining and
the integrations all read messages through this module, so they agree on what
a tool call is. Reading never raises: what cannot be read meets nothing.
Pure Python: no framework is imported (a LangChain message is read by its
attributes, as any object is).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeGuard

from symfonic_graph.rules.events import CallResult, Conversation, History, ToolCall, ToolCallRef, UserMessage

__all__ = [
    "GATE_CONTENT_MARKER",
    "GATE_MARKER_KEY",
    "GATE_MARKER_VALUE",
    "MAX_ARGS_DEPTH",
    "MISSING_PREFIX",
    "NOT_ALLOWED_PREFIX",
    "CallResult",
    "Conversation",
    "History",
    "HistoryReader",
    "ToolCallRef",
    "UNAVAILABLE_PREFIX",
    "call_ref",
    "called_tools",
    "field",
    "gate_text",
    "messages_of",
    "parse_turn",
    "read_conversation",
    "read_history",
    "terminal_tool_calls",
    "unwrapped",
    "user_text",
]

GATE_MARKER_KEY: Final = "symfonic_graph_gate"
"""``response_metadata`` key marking a result the gate injected."""
GATE_MARKER_VALUE: Final = "precondition"
MISSING_PREFIX: Final = "Missing precondition: "
UNAVAILABLE_PREFIX: Final = "Precondition check unavailable: "
NOT_ALLOWED_PREFIX: Final = "Not allowed: "
GATE_CONTENT_MARKER: Final = "[symfonic-graph gate]"
"""Ends the content of every result the gate writes: it survives round trips that drop metadata and status."""


_LC_CLASSES: Final = {
    "HumanMessage": "human", "HumanMessageChunk": "human", "AIMessage": "ai", "AIMessageChunk": "ai",
    "ToolMessage": "tool", "ToolMessageChunk": "tool", "ChatMessage": "chat", "ChatMessageChunk": "chat",
    "SystemMessage": "system", "SystemMessageChunk": "system",
}
"""Class names of LangChain's serialized ``{"lc": 1, "type": "constructor", ...}`` envelope, by message type."""

_KINDS: Final = {
    "ai": "ai", "assistant": "ai", "AIMessageChunk": "ai",
    "human": "user", "user": "user", "HumanMessageChunk": "user",
    "tool": "tool", "ToolMessageChunk": "tool",
    "function_call": "call", "function_call_output": "output",  # OpenAI Responses API items
}
_BY_ROLE: Final = frozenset({"chat", "ChatMessageChunk", "message"})
"""Message types whose ``role`` says what they are (``ChatMessage``, Responses ``message`` items)."""

MAX_ARGS_DEPTH: Final = 64
"""Arguments nested deeper than this are unreadable (they meet no ``same_args``), never a recursion error."""
_MAX_ARGS_NODES: Final = 100_000
_MAX_PROBLEMS: Final = 20
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _is_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    # ``type(...) is dict`` first: the common case, and an ABC isinstance check costs ~10x more
    return type(value) is dict or isinstance(value, Mapping)


def _unwrap(message: object) -> object:
    if not _is_mapping(message):
        return message
    if "content" not in message and _is_mapping(message.get("data")):
        return message["data"]  # message_to_dict() form: {"type": ..., "data": {...}}
    if message.get("lc") == 1 and message.get("type") == "constructor":  # langchain_core.load.dumpd()
        ident, kwargs = message.get("id"), message.get("kwargs")
        name = ident[-1] if isinstance(ident, list) and ident else None
        if isinstance(name, str) and name in _LC_CLASSES and _is_mapping(kwargs):
            return {**kwargs, "type": _LC_CLASSES[name]}
    return message


_OBJECTS: Final[set[type]] = set()
"""Classes seen to be no mapping (message objects): read by attribute without the Mapping checks."""
_LC_MESSAGES: Final[dict[type, bool]] = {}
"""Per class: whether it is a LangChain ``BaseMessage``, found without importing LangChain."""


def _view(message: object) -> tuple[Callable[[str], Any], bool]:
    """``key -> value`` of a message object or dict, unwrapped once (None when absent); and whether it is a dict."""
    cls = type(message)
    if cls in _OBJECTS:  # the common case (message objects), read without the Mapping checks
        return (lambda key: getattr(message, key, None)), False
    message = _unwrap(message)
    if _is_mapping(message):
        return message.get, True
    if type(message) is cls and len(_OBJECTS) < 256:
        _OBJECTS.add(cls)
    return (lambda key: getattr(message, key, None)), False


def _lc_message(message: object) -> bool:
    """True iff ``message`` is a LangChain message object (a ``BaseMessage``), without importing LangChain."""
    cls = type(message)
    known = _LC_MESSAGES.get(cls)
    if known is None:
        known = any(c.__name__ == "BaseMessage" and c.__module__.startswith("langchain_core.")
                    for c in cls.__mro__)
        if len(_LC_MESSAGES) < 256:
            _LC_MESSAGES[cls] = known
    return known


def _getter(message: object) -> Callable[[str], Any]:
    return _view(message)[0]


def field(message: object, key: str) -> Any:
    """``key`` of a message object or dict (None when absent)."""
    return _getter(message)(key)


def _kind_of(message: object, get: Callable[[str], Any], is_dict: bool) -> str | None:
    """``"ai"``, ``"user"``, ``"tool"``, ``"call"``/``"output"`` (Responses items), or None.

    A dict is read as ``convert_to_messages`` reads it: its ``role``, else its
    ``type``. An object by its ``type``, its ``role`` when the type is ``chat``.
    A bare string, or a ``(role, content)`` pair, is a message without calls.
    """
    if isinstance(message, str):
        return "user"  # convert_to_messages reads a bare string as a human message
    if isinstance(message, (tuple, list)):
        role = message[0] if len(message) == 2 else None
        return "user" if isinstance(role, str) and _KINDS.get(role) == "user" else None
    if is_dict:
        role = get("role")
        if isinstance(role, str):
            return _KINDS.get(role)
    kind = get("type")
    if isinstance(kind, str) and kind in _KINDS:
        return _KINDS[kind]
    role = get("role") if is_dict or kind is None or kind in _BY_ROLE else None  # ChatMessage: its role
    return _KINDS.get(role) if isinstance(role, str) else None


def _kind(message: object) -> str | None:
    get, is_dict = _view(message)
    return _kind_of(message, get, is_dict)


def _shallow(value: Mapping[Any, Any]) -> bool:
    """True iff ``value`` nests containers at most ``MAX_ARGS_DEPTH`` deep (walked without recursion)."""
    stack: list[tuple[Iterable[Any], int]] = [(value.values(), 1)]
    seen = 0
    while stack:
        children, depth = stack.pop()
        for child in children:
            seen += 1
            kind = type(child)
            if kind in _SCALARS:
                continue
            if kind is dict or (kind is not list and kind is not tuple and _is_mapping(child)):
                stack.append((child.values(), depth + 1))
            elif kind is list or kind is tuple:
                stack.append((child, depth + 1))
            else:
                continue
            if depth >= MAX_ARGS_DEPTH:
                return False
        if seen > _MAX_ARGS_NODES:
            return False
    return True


def _arguments(call: Mapping[str, Any], function: object) -> Mapping[str, Any] | None:
    args = call.get("args")
    if args is None:
        # OpenAI chat: function.arguments; Responses API: arguments; both a JSON object as text
        args = function.get("arguments") if _is_mapping(function) else call.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the decoder goes
            return None
    return args if _is_mapping(args) and _shallow(args) else None


def _call_ref(call: object, id_key: str = "id") -> ToolCallRef | None:
    """The call, or None when it names no tool (or two different ones)."""
    if not _is_mapping(call):
        return None
    name = call.get("name")
    function = call.get("function")
    if _is_mapping(function):
        other = function.get("name")  # OpenAI chat wire format
        if name is None:
            name = other
        elif other is not None and other != name:
            return None  # two names for one call: which would run is not ours to guess
    if not isinstance(name, str) or not name:
        return None
    call_id = call.get(id_key)
    return ToolCallRef(call_id if isinstance(call_id, str) and call_id else None, name,
                       _arguments(call, function))


def call_ref(call: object) -> ToolCallRef | None:
    """One tool call in any shape (LangChain ``ToolCall``, OpenAI chat), None when it names no single tool.

    Example:
        >>> call_ref({"id": "c1", "function": {"name": "deploy", "arguments": '{"env": "prod"}'}}).args
        {'env': 'prod'}
        >>> call_ref({"id": "c1", "name": ""}) is None
        True
    """
    try:
        return _call_ref(call)
    except Exception:  # a call that cannot be read names no tool
        return None


def unwrapped(message: object) -> object:
    """``message`` out of a ``message_to_dict()`` or ``dumpd()`` envelope (unchanged when in none).

    Example:
        >>> unwrapped({"type": "human", "data": {"content": "hi"}})
        {'content': 'hi'}
    """
    return _unwrap(message)


def _calls_of(kind: str | None, get: Callable[[str], Any]) -> list[ToolCallRef]:
    if kind == "call":  # one Responses API function_call item: its call_id links its output
        ref = _call_ref({"name": get("name"), "call_id": get("call_id"), "arguments": get("arguments")},
                        "call_id")
        return [ref] if ref is not None else []
    if kind != "ai":
        return []
    raw = get("tool_calls")
    if type(raw) is not list and not isinstance(raw, (list, tuple)):
        return []
    return [ref for ref in map(_call_ref, raw) if ref is not None]


def _tool_calls(message: object) -> list[ToolCallRef]:
    """The calls ``message`` requests; ``[]`` for any other message, or one that cannot be read."""
    try:
        get, is_dict = _view(message)
        return _calls_of(_kind_of(message, get, is_dict), get)
    except Exception:  # a message that cannot be read requests nothing
        return []


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


_GATE_PREFIXES: Final = (MISSING_PREFIX, UNAVAILABLE_PREFIX, NOT_ALLOWED_PREFIX)
_SPACE: Final = re.compile(r"\s*")
_GATE_INITIALS: Final = frozenset(prefix[0] for prefix in _GATE_PREFIXES)
_TEXT_KEYS: Final = ("text", "content", "output")


def _texts(content: object) -> Iterator[str]:
    """Every text of a content: a string, or blocks (``{"type": "text", "text": ...}``, nested ``content``)."""
    stack: list[tuple[object, int]] = [(content, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            yield item
        elif depth < 4 and isinstance(item, (list, tuple)):
            stack.extend((block, depth + 1) for block in reversed(item))
        elif depth < 4 and _is_mapping(item):
            stack.extend((item.get(key), depth + 1) for key in reversed(_TEXT_KEYS))


def user_text(message: object) -> str | None:
    """The text of ``message`` when it is a user message, in any shape; None for every other message.

    Example:
        >>> user_text({"role": "user", "content": [{"type": "text", "text": "refund order 7"}]})
        'refund order 7'
        >>> user_text("hi"), user_text({"role": "assistant", "content": "ok"})
        ('hi', None)
    """
    get, is_dict = _view(message)
    if _kind_of(message, get, is_dict) != "user":
        return None
    if _lc_message(message):
        return str(message.text)  # type: ignore[attr-defined]
    if isinstance(message, str):
        return message
    content = message[1] if isinstance(message, (tuple, list)) else get("content")
    return "".join(_texts(content))


def gate_text(text: str) -> bool:
    """True iff ``text`` starts as the gate's results start (or is the start of one, cut short).

    Example:
        >>> gate_text("Missing precondition: call auth before deploy"), gate_text("Missing prec")
        (True, True)
        >>> gate_text("Missing file"), gate_text("")
        (False, False)
    """
    start = _SPACE.match(text).end()  # type: ignore[union-attr]  # always matches; no copy of a long text
    if text[start:start + 1] not in _GATE_INITIALS:
        return False
    return any(text[start:start + len(p)] != "" and p.startswith(text[start:start + len(p)]) for p in _GATE_PREFIXES)


def _injected(get: Callable[[str], Any], kind: str) -> bool:
    """A result the gate wrote: its marker, or a text that starts like the gate's (whatever the content's shape)."""
    for key in ("response_metadata", "additional_kwargs"):
        meta = get(key)
        if meta and _is_mapping(meta) and meta.get(GATE_MARKER_KEY) == GATE_MARKER_VALUE:
            return True
    content = get("output" if kind == "output" else "content")
    return gate_text(content) if isinstance(content, str) else any(map(gate_text, _texts(content)))


def _is_injected(message: object) -> bool:
    get, is_dict = _view(message)
    return _injected(get, _kind_of(message, get, is_dict) or "tool")


_USER: Final = UserMessage()


class HistoryReader:
    """Read a conversation one message at a time, as :func:`parse_turn` reads it. Never raises.

    ``parse_turn`` is this reader fed every message but the last, so replaying
    a long conversation turn by turn costs one pass instead of one per turn.

    A result is a call made only when it answers exactly one pending call
    (requested earlier, not answered yet) by its id, under that call's name
    (or none), and the gate did not write it. Every other result counts as
    nothing, and so does a message that cannot be read; one whose reading
    raised also closes the user turn. ``problems`` names, per message index,
    what was read as nothing and why (the first 20).

    What it reads goes into ``conversation``, the events of
    :mod:`symfonic_graph.rules.events`: a user message, each call requested,
    each result that answers a call (successful or failed); a message that
    could not be read at all is a :class:`UserMessage` there (it ends the turn).

    Example:
        >>> reader = HistoryReader()
        >>> reader.feed({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "auth"}]})
        [ToolCallRef(id='c1', name='auth')]
        >>> reader.feed({"role": "tool", "content": "ok", "tool_call_id": "c1"})
        []
        >>> [r.name for r in reader.history().results]
        ['auth']
        >>> reader.feed({"role": "tool", "content": "ok", "tool_call_id": ["c1"]})
        []
        >>> reader.problems
        [(2, 'a tool result whose tool_call_id is a list, not a string: counted as no call')]
    """

    __slots__ = ("_before_last", "_fed", "_last_calls", "_pending", "conversation", "problems", "unread")

    def __init__(self) -> None:
        self._pending: dict[str, list[ToolCall]] = {}
        self.conversation = Conversation()
        """The events read so far."""
        self._fed = 0
        self._before_last = (0, 0)  # calls made and user turn before the last message fed
        self._last_calls: list[ToolCallRef] = []
        self.problems: list[tuple[int, str]] = []
        """``(message index, what was read as nothing)``, the first 20."""
        self.unread = 0
        """How many messages (or calls) were read as nothing, in all."""

    def feed(self, message: object) -> list[ToolCallRef]:
        """Take one more message; return its tool calls (``[]`` unless it requests calls).

        An AI message adds no call made (its calls are made once their results
        appear), so the history is the same just before and just after it.
        """
        index = self._fed
        self._fed += 1
        self._before_last = (len(self.conversation.results), self.conversation.user_turn)
        self._last_calls = []
        try:
            return self._read(message, index)
        except Exception as exc:  # reading raised: the message meets nothing and ends the user turn
            self.conversation.add(_USER)
            self._problem(index, f"a message that could not be read ({type(exc).__name__}): "
                                 "counted as nothing, and as the end of the user turn")
            return []

    def _problem(self, index: int, text: str) -> None:
        self.unread += 1
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append((index, text))

    def _read(self, message: object, index: int) -> list[ToolCallRef]:
        get, is_dict = _view(message)
        kind = _kind_of(message, get, is_dict)
        if kind == "user":
            self.conversation.add(_USER)
        elif kind in ("ai", "call"):
            calls = self._last_calls = _calls_of(kind, get)
            for ref in calls:
                call = self.conversation.add_call(ref)
                if ref.id is not None:
                    self._pending.setdefault(ref.id, []).append(call)
            self._note_unreadable_calls(kind, get, calls, index)
            return calls
        elif kind in ("tool", "output"):
            self._answer(get, kind, index)
        return []

    def _note_unreadable_calls(self, kind: str, get: Callable[[str], Any], calls: list[ToolCallRef],
                               index: int) -> None:
        raw = get("tool_calls") if kind == "ai" else [get]
        if isinstance(raw, (list, tuple)) and len(raw) != len(calls):
            self._problem(index, f"{len(raw) - len(calls)} tool call(s) without one tool name: never requested")
        for ref in calls:
            if ref.id is None:
                self._problem(index, f"a call of {ref.name!r} without a string id: no result can answer it")

    def _answer(self, get: Callable[[str], Any], kind: str, index: int) -> None:
        call_id = get("call_id" if kind == "output" else "tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            self._problem(index, f"a tool result whose tool_call_id is {_a(call_id)}, not a string: "
                                 "counted as no call")
            return
        pending = self._pending.pop(call_id, None)  # answered: a later result with this id answers nothing
        injected = _injected(get, kind)
        if injected:
            return
        if not pending or len(pending) > 1:
            what = "no pending call" if not pending else f"{len(pending)} pending calls"
            self._problem(index, f"a tool result for id {call_id[:80]!r}, which answers {what}: counted as no call")
            return
        call = pending[0]
        name = get("name")
        if name is not None and name != "" and name != call.name:
            self._problem(index, f"a tool result named {str(name)[:80]!r} answering a call of {call.name!r}: "
                                 "counted as no call")
            return
        status = get("status")
        failed = isinstance(status, str) and status == "error"
        content = get("output" if kind == "output" else "content")
        if not isinstance(content, (str, Mapping)):
            content = "".join(_texts(content))  # blocks: their texts, in order
        self.conversation.add(CallResult.of(call, failed=failed, content=content))

    def report(self, limit: int = 3) -> str:
        """One line naming what was read as nothing (the first ``limit`` problems), ``""`` when nothing was.

        Example:
            >>> reader = HistoryReader()
            >>> reader.feed({"role": "tool", "tool_call_id": "c9", "content": "ok"})
            []
            >>> reader.report()[:62]
            '1 message(s) or call(s) read as nothing: message 0: a tool res'
        """
        if not self.unread:
            return ""
        shown = "; ".join(f"message {index}: {text}" for index, text in self.problems[:limit])
        more = f"; and {self.unread - min(limit, len(self.problems))} more" if self.unread > limit else ""
        return f"{self.unread} message(s) or call(s) read as nothing: {shown}{more}"

    @property
    def results(self) -> Sequence[CallResult]:
        """The calls made so far, in the order their results appeared (a live view: do not change it)."""
        return self.conversation.results

    def history(self) -> History:
        """The calls made in the messages fed so far."""
        return self.conversation.history()

    def turn(self) -> tuple[History, list[ToolCallRef]]:
        """What :func:`parse_turn` reads when the last message fed is the terminal one.

        The calls made before that message, and its calls (``[]`` unless it
        requests calls; a message read in part still has the calls it names).

        Example:
            >>> reader = HistoryReader()
            >>> reader.feed({"role": "user", "content": "hi"})
            []
            >>> reader.feed({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "deploy"}]})
            [ToolCallRef(id='c1', name='deploy')]
            >>> history, calls = reader.turn()
            >>> history.user_turn, [c.name for c in calls]
            (1, ['deploy'])
        """
        made, user_turn = self._before_last
        return History(tuple(self.conversation.results[:made]), user_turn), list(self._last_calls)


def _a(value: object) -> str:
    return "missing" if value is None else "empty" if isinstance(value, str) else f"a {type(value).__name__}"


def parse_turn(messages: Sequence[Any]) -> tuple[History, list[ToolCallRef]]:
    """Read a conversation once: the calls made before its terminal message, and that message's calls.

    A call is made once its result appears (results the gate injected never
    count, see :class:`HistoryReader`); the terminal message's own calls are not
    made yet. Never raises.

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
    return read_conversation(messages).history()


def read_conversation(messages: Iterable[Any]) -> HistoryReader:
    """A reader fed every message of ``messages`` once: its ``conversation`` answers each call's history.

    Example:
        >>> reader = read_conversation([{"role": "user", "content": "hi"},
        ...     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "deploy"}]}])
        >>> reader.conversation.history_before("c1").user_turn
        1
    """
    reader = HistoryReader()
    for message in messages:
        reader.feed(message)
    return reader


def messages_of(state: object, key: str = "messages") -> Sequence[Any]:
    """``state[key]`` (or the attribute) when it is a sequence of messages, else ``[]``."""
    messages = state.get(key) if isinstance(state, Mapping) else getattr(state, key, None)
    if isinstance(messages, Sequence) and not isinstance(messages, str):
        return messages
    return []
