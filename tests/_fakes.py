"""The scripted chat model and recording tools the agent tests share.

A scripted model is no stand-in for Neo4j: it replaces only the LLM, whose
answers a test must fix in advance. The graph underneath is always real.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field


class Scripted(FakeMessagesListChatModel):
    """Replays ``responses`` in order and records the messages it was shown on each call.

    Like a real provider, it refuses an input where a tool call id is not
    answered exactly once (see :func:`assert_calls_answered`).
    """

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Scripted:
        return self

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> BaseMessage:
        shown = list(input)
        assert_calls_answered(shown)
        self.seen.append(shown)
        return await super().ainvoke(input, config, **kwargs)


def scripted(*responses: BaseMessage) -> Scripted:
    """A :class:`Scripted` model replaying ``responses``."""
    return Scripted(responses=list(responses))


def ai_calls(*calls: tuple[str, str]) -> AIMessage:
    """An AI message requesting ``(tool name, call id)`` pairs, in order."""
    return AIMessage("", tool_calls=[{"name": name, "args": {}, "id": call_id} for name, call_id in calls])


def recording_tools(*names: str) -> tuple[list[BaseTool], list[str]]:
    """Tools named ``names`` that append their name to the returned list when they run."""
    executed: list[str] = []

    def make(name: str) -> BaseTool:
        def run() -> str:
            executed.append(name)
            return f"{name} done"

        return StructuredTool.from_function(run, name=name, description=f"The {name} tool.")

    return [make(name) for name in names], executed


def assert_calls_answered(messages: Sequence[BaseMessage]) -> None:
    """Every tool call id in ``messages`` is answered by exactly one ToolMessage, and no answer is stray."""
    asked = Counter(c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls)
    answered = Counter(m.tool_call_id for m in messages if isinstance(m, ToolMessage))
    assert asked == answered, f"tool calls {dict(asked)} answered {dict(answered)}"


def assert_every_call_answered(model: Scripted) -> None:
    """Every tool call id was answered before the model ran again."""
    for shown in model.seen:
        assert_calls_answered(shown)


class Clock:
    """A settable clock (seconds): pass it as ``clock=`` or ``wall_clock=`` and move ``now`` by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
