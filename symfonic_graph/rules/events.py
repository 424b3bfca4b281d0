"""A conversation as the rules read it: an ordered list of events, in pure Python.

The gate, pre-flight, replay and mining never look at a message of any
framework: :mod:`symfonic_graph.rules._messages` reads messages in every shape
into these events once per turn, and the rules decide over the events.

* :class:`UserMessage`: a user turn begins.
* :class:`ToolCall`: an AI message requested a call (name, call id, arguments,
  and the user turn it was requested in).
* :class:`CallResult`: a result answered exactly one pending call; it is the
  call *made*, successful or failed (``failed=True``).

:class:`Conversation` holds the events in order and extends them one at a time;
:class:`History` is what a requirement check reads: the calls made before a
given point, and the user turn at that point.

Example:
    >>> conversation = Conversation()
    >>> conversation.add(UserMessage())
    >>> call = conversation.add_call(ToolCallRef("c1", "auth", {}))
    >>> conversation.add(CallResult.of(call, failed=False))
    >>> conversation.add_call(ToolCallRef("c2", "deploy", {})).user_turn
    1
    >>> [r.name for r in conversation.history_before("c2").results]
    ['auth']
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

__all__ = ["CallResult", "parse_content", "Conversation", "Event", "History", "ToolCall", "ToolCallRef", "UserMessage"]


_UNPARSED: Any = object()
_JSON_START = frozenset('{["-0123456789tfn')


def parse_content(raw: object) -> Any:
    """A result's content as rules read it: JSON when a string parses as JSON, else the value as it is.

    Example:
        >>> parse_content('[1, 2]'), parse_content("ok"), parse_content({"a": 1})
        ([1, 2], 'ok', {'a': 1})
    """
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    if not text or text[0] not in _JSON_START:
        return raw
    try:
        return json.loads(text)
    except ValueError:
        return raw


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
    """The call's arguments (LangChain ``args``, or OpenAI ``arguments`` decoded); None if unreadable."""


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A user turn begins (a message that could not be read at all ends the user turn too).

    Example:
        >>> UserMessage()
        UserMessage()
    """


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call an AI message requested, in the user turn it was requested in.

    ``made_before`` is how many calls had been made (results appeared) when it
    was requested: the history this call is decided against.

    Example:
        >>> ToolCall(ToolCallRef("c1", "deploy"), user_turn=2).name
        'deploy'
    """

    ref: ToolCallRef
    user_turn: int = 0
    made_before: int = 0

    @property
    def name(self) -> str:
        return self.ref.name

    @property
    def id(self) -> str | None:
        return self.ref.id

    @property
    def args(self) -> Mapping[str, Any] | None:
        return self.ref.args


@dataclass(frozen=True, slots=True)
class CallResult:
    """A tool call that has its result in the conversation: a call that was made.

    Attributes:
        name: the tool.
        args: the arguments the AI message gave it (None when unknown).
        failed: the result was marked failed (``status="error"``).
        user_turn: how many user messages came before the call was *requested*.
    """

    name: str
    args: Mapping[str, Any] | None
    failed: bool
    user_turn: int
    raw: Any = dataclass_field(default=None, repr=False, compare=False)
    """The result's content as the message held it (a string, or the texts of its blocks joined)."""
    _parsed: Any = dataclass_field(default=_UNPARSED, init=False, repr=False, compare=False)
    scope: Any = dataclass_field(default=None, init=False, repr=False, compare=False)
    """What rules' expressions bound of this result (set by the rules on first use; reused by every decision)."""
    held: Any = dataclass_field(default=None, init=False, repr=False, compare=False)
    """What each expression reading only this result (``result``, ``call``) gave over it, by its text (a pure
    function of the result: set by the rules on first use, reused by every later decision)."""

    @classmethod
    def of(cls, call: ToolCall, *, failed: bool, content: Any = None) -> CallResult:
        """The result answering ``call``, successful or failed, with its content."""
        return cls(call.ref.name, call.ref.args, failed, call.user_turn, content)

    @property
    def content(self) -> Any:
        """The result parsed: JSON when the content parses as JSON, else the string (parsed once).

        Example:
            >>> CallResult("get_order", None, False, 0, '{"status": "pending"}').content
            {'status': 'pending'}
            >>> CallResult("get_order", None, False, 0, "Order not found").content
            'Order not found'
        """
        parsed = self._parsed
        if parsed is _UNPARSED:
            parsed = parse_content(self.raw)
            object.__setattr__(self, "_parsed", parsed)
        return parsed


Event = UserMessage | ToolCall | CallResult
"""One event of a conversation."""


@dataclass(frozen=True, slots=True)
class History:
    """The calls made before a point of the conversation, and the user turn there.

    Example:
        >>> History.of_names(["auth"]).called(count_failed=False)
        frozenset({'auth'})
    """

    results: tuple[CallResult, ...] = ()
    user_turn: int = 0
    """How many user messages came before that point."""
    _memo: Any = dataclass_field(default=None, init=False, repr=False, compare=False)
    """What the rules asked of this history before (``called``): answered once per history."""
    _index: Any = dataclass_field(default=None, init=False, repr=False, compare=False)
    """Each tool's positions in ``results`` (built on the first ``positions``: every rule's lookup is one get)."""

    @classmethod
    def of_names(cls, names: Iterable[str]) -> History:
        """A history where each of ``names`` was called once, successfully, in this user turn."""
        return cls(tuple(CallResult(name, None, False, 0) for name in names), 0)

    @classmethod
    def of_events(cls, events: Iterable[Event]) -> History:
        """The history at the end of ``events``.

        Example:
            >>> History.of_events([UserMessage(), CallResult("auth", None, False, 1)]).user_turn
            1
        """
        conversation = Conversation()
        for event in events:
            conversation.add(event)
        return conversation.history()

    def called(self, *, count_failed: bool) -> frozenset[str]:
        """The tools with a result (failed ones only with ``count_failed``)."""
        memo = self._asked()
        key = "called+failed" if count_failed else "called"
        found: frozenset[str] | None = memo.get(key)
        if found is None:
            found = memo[key] = frozenset(r.name for r in self.results if count_failed or not r.failed)
        return found

    def positions(self, name: object) -> tuple[int, ...]:
        """The indexes in ``results`` of the calls of ``name``, in order (the rules scan only those).

        Example:
            >>> History.of_names(["auth", "deploy", "auth"]).positions("auth")
            (0, 2)
        """
        index: dict[str, tuple[int, ...]] | None = self._index
        if index is None:
            built: dict[str, list[int]] = {}
            for position, result in enumerate(self.results):
                if isinstance(result.name, str):  # a tool is named by a string; nothing else matches one
                    built.setdefault(result.name, []).append(position)
            index = {tool: tuple(each) for tool, each in built.items()}
            object.__setattr__(self, "_index", index)
        return index.get(name, ()) if isinstance(name, str) else ()

    def _asked(self) -> dict[str, Any]:
        memo: dict[str, Any] | None = self._memo
        if memo is None:
            memo = {}
            object.__setattr__(self, "_memo", memo)
        return memo


class Conversation:
    """The events of a conversation, in order, extended one at a time.

    It keeps what the rules ask of it without a second pass: the calls made so
    far, the current user turn, and for each call id the latest call requested
    under it (so the history before that request is a slice, not a re-read).
    """

    __slots__ = ("_by_id", "_results", "events", "user_turn")

    def __init__(self) -> None:
        self.events: list[Event] = []
        """Every event, in order (a live list: do not change it)."""
        self.user_turn = 0
        """How many user turns began so far."""
        self._results: list[CallResult] = []
        self._by_id: dict[str | None, ToolCall] = {}

    def add(self, event: Event) -> None:
        """Append one event (a ``ToolCall`` built elsewhere keeps its own ``user_turn``)."""
        self.events.append(event)
        if type(event) is CallResult:
            self._results.append(event)
        elif type(event) is UserMessage:
            self.user_turn += 1
        elif type(event) is ToolCall:
            self._by_id[event.ref.id] = event  # an id-less call too: the latest of them, as a scan finds it

    def add_call(self, ref: ToolCallRef) -> ToolCall:
        """Append the request of ``ref`` in the current user turn, and return its event."""
        call = ToolCall(ref, self.user_turn, len(self._results))
        self.add(call)
        return call

    @property
    def results(self) -> list[CallResult]:
        """The calls made so far, in the order their results appeared (a live list: do not change it)."""
        return self._results

    def history(self) -> History:
        """The calls made in the events so far."""
        return History(tuple(self._results), self.user_turn)

    def requested(self, call_id: str | None) -> ToolCall | None:
        """The latest call requested under ``call_id``, None when none was."""
        return self._by_id.get(call_id)

    def history_before(self, call_id: str | None) -> History:
        """The calls made before the latest request of ``call_id`` (all so far when it was never requested).

        ``None`` stands for a call without an id: the latest such request.
        """
        call = self.requested(call_id)
        if call is None:
            return self.history()
        return History(tuple(self._results[:call.made_before]), call.user_turn)
