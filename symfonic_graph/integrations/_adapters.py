"""LangChain at the edge of the rules core: messages in, the gate's answers out, each message read once.

The rules core (:mod:`symfonic_graph.rules`) decides over events and imports
no framework. What needs LangChain lives here:

* :func:`terminal_ai_message`: the terminal message as the ``AIMessage`` a
  ``ToolNode`` executes (any shape converted by ``convert_to_messages``);
* :func:`tool_message`: the gate's error result as a ``ToolMessage``;
* :class:`Conversations`: the readings of the conversations an integration
  decides on, kept so that a turn reads each message once, however many tool
  calls it holds, and the next turn reads only the messages added since.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> conversations = Conversations()
    >>> first = [HumanMessage("go"), AIMessage("", tool_calls=[{"id": "c1", "name": "auth", "args": {}}])]
    >>> conversations.read(first).conversation.history_before("c1").user_turn
    1
    >>> conversations.read([*first, HumanMessage("again")]).conversation.user_turn  # only the new message is read
    2
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, convert_to_messages

from symfonic_graph.rules._messages import HistoryReader, unwrapped
from symfonic_graph.rules.gate import GateDecision

__all__ = ["Conversations", "terminal_ai_message", "tool_message"]


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
            last = convert_to_messages([unwrapped(last)])[0]  # type: ignore[list-item]
        except Exception:  # not a message we can execute
            return None
    return last if isinstance(last, AIMessage) and last.tool_calls else None


def tool_message(decision: GateDecision) -> ToolMessage | None:
    """The error ``ToolMessage`` answering a call the gate blocked, None when it may run.

    Example:
        >>> tool_message(GateDecision("deploy", "c1", "store_unavailable")).status
        'error'
        >>> tool_message(GateDecision("deploy", "c1", "allowed")) is None
        True
    """
    fields = decision.error_result()
    return ToolMessage(**fields) if fields is not None else None


class _Reading:
    __slots__ = ("read", "reader")

    def __init__(self) -> None:
        self.reader = HistoryReader()
        self.read: list[Any] = []  # the message objects fed, in order (held: their ids stay theirs)

    def continues(self, messages: Sequence[Any], end: int) -> bool:
        """True iff the messages read are the first ones of ``messages[:end]``, object for object."""
        if len(self.read) > end:
            return False
        return all(map(operator.is_, self.read, messages))  # stops with the messages read

    def extend(self, messages: Sequence[Any], end: int) -> None:
        for index in range(len(self.read), end):
            message = messages[index]
            self.read.append(message)
            self.reader.feed(message)


class Conversations:
    """The readings of the conversations an integration decides on; bounded, least recently used go.

    A conversation is found by its first message object, and its reading is
    reused when the messages it read are still, object for object (``is``),
    the first ones of the list; the messages after them are read and added.
    Any other list is read from its start. So the parallel calls of a turn
    share one reading, and a turn reads only the messages the last one did not.
    Message objects are assumed not to change once in a conversation (as the
    ``add_messages`` reducer keeps them: an edit replaces the object).

    Example:
        >>> conversations = Conversations(size=2)
        >>> conversations.read([{"role": "user", "content": "hi"}]).history().user_turn
        1
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._readings: OrderedDict[int, _Reading] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, messages: Sequence[Any], end: int | None = None) -> HistoryReader:
        """A reader fed ``messages[:end]`` (all of them by default), each message read at most once."""
        end = len(messages) if end is None else max(0, min(end, len(messages)))
        if end == 0:
            return HistoryReader()
        key = id(messages[0])
        with self._lock:
            reading = self._readings.get(key)
            if reading is None or not reading.continues(messages, end):
                reading = self._readings[key] = _Reading()
            self._readings.move_to_end(key)
            while len(self._readings) > self.size:
                self._readings.popitem(last=False)
            reading.extend(messages, end)
            return reading.reader
