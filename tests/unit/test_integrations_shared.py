"""Both integrations pick a turn's reminders by one cue: the latest user message, in any shape, never a reminder."""

from __future__ import annotations

import random

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from symfonic_graph.integrations import _shared, langchain, langgraph
from symfonic_graph.integrations._shared import REMINDERS_MARKER_KEY, REMINDERS_MARKER_VALUE, last_human_text


def user(text: str, shape: int) -> object:
    return [HumanMessage(text), {"role": "user", "content": text}, {"type": "human", "content": text},
            ("user", text), {"role": "user", "content": [{"type": "text", "text": text}]}][shape]


def other(rng: random.Random) -> object:
    return rng.choice([
        AIMessage("on it"), {"role": "assistant", "content": "ok"}, SystemMessage("be kind"),
        ToolMessage("done", tool_call_id="c1"), {"role": "tool", "content": "x", "tool_call_id": "c1"},
        HumanMessage("(reminders)", response_metadata={REMINDERS_MARKER_KEY: REMINDERS_MARKER_VALUE}),
    ])


@pytest.mark.parametrize("seed", range(300))
def test_the_cue_is_the_latest_user_text_whatever_the_shapes(seed: int) -> None:
    rng = random.Random(seed)
    messages: list[object] = []
    expected = ""
    for _ in range(rng.randrange(0, 8)):
        if rng.random() < 0.4:
            expected = f"request {rng.randrange(1000)}"
            messages.append(user(expected, rng.randrange(5)))
        else:
            messages.append(other(rng))
    assert last_human_text(messages) == expected


def test_the_two_integrations_read_the_cue_and_mark_reminders_alike() -> None:
    assert langchain.last_human_text is langgraph.last_human_text is _shared.last_human_text
    assert langchain.Cue is langgraph.Cue is _shared.Cue
    assert langchain.REMINDERS_MARKER_KEY == _shared.REMINDERS_MARKER_KEY
