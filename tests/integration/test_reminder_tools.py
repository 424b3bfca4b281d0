"""The model keeps the user's reminders itself: reminder_tools in a create_agent run, through a real Neo4j.

A scripted model adds a weekly reminder through the tool (the node is
checked), is offered it when due with its id in the block and in the run's
state, completes it through the tool, and is not offered it again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph.langchain import OFFERED_KEY, MemoryMiddleware, reminder_tools
from tests._fakes import Clock, Scripted

pytestmark = pytest.mark.anyio

THURSDAY = datetime(2031, 5, 1, 9, 0, tzinfo=UTC).timestamp()
MONDAY = datetime(2031, 5, 5, 9, 0, tzinfo=UTC).timestamp()


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


async def test_the_model_adds_is_offered_and_completes_a_weekly_reminder(
    store: GraphMemoryStore, tenant: str, driver: Any
) -> None:
    scope, clock = MemoryScope(tenant, "u1"), Clock(THURSDAY)
    tools = reminder_tools(ProspectiveLayer(store, clock=clock), scope)
    middleware = MemoryMiddleware(TurnMemory(store, wall_clock=clock), reminder_ids=True)

    async def turn(text: str, *responses: AIMessage) -> tuple[Scripted, dict[str, Any]]:
        model = Scripted(responses=list(responses))
        state = await create_agent(model, tools, middleware=[middleware]).ainvoke(
            {"messages": [HumanMessage(text)]}, context=scope)
        return model, state

    def reminders(model: Scripted, n: int = 0) -> list[str]:
        return [str(m.content) for m in model.seen[n] if isinstance(m, HumanMessage) and "REMINDERS" in str(m.content)]

    # 1. "remind me every Monday": the model stores it through the tool, no app code
    _, state = await turn("Remind me every Monday at nine to send the weekly report.",
                          call("add_reminder", "c1", task="Send the weekly report.",
                               due_at="2031-05-05T09:00:00+00:00", recurrence="FREQ=WEEKLY;BYDAY=MO"),
                          AIMessage("Will do."))
    [answer] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert str(answer.content).startswith("Reminder ") and answer.status != "error"
    records, _, _ = await driver.execute_query(
        "MATCH (t:Trigger {tenant_id: $t}) RETURN t.id AS id, t.namespace AS ns, t.kind AS kind, "
        "t.status AS status, t.recurrence AS rule, t.due_at.epochSeconds AS due", {"t": tenant})
    assert [(r["ns"], r["kind"], r["status"], r["rule"], r["due"]) for r in records] == [
        ("u1", "time", "pending", "FREQ=WEEKLY;BYDAY=MO", MONDAY)]
    first = records[0]["id"]
    assert first in str(answer.content)

    # 2. before Monday nothing is offered
    model, state = await turn("hello", AIMessage("hi"))
    assert reminders(model) == [] and OFFERED_KEY not in state

    # 3. on Monday it is offered, its id in the block and in the run's state
    clock.now = MONDAY
    model, state = await turn("good morning", AIMessage("Time to send the weekly report."))
    assert reminders(model) == [f"## PENDING REMINDERS\n- Send the weekly report.\n(reminder ids, in this order: "
                                f"{first})"]
    assert state[OFFERED_KEY] == [first]

    # 4. offered again (selection is not acknowledgement); the model completes it through the tool
    model, state = await turn("ok, sent it", call("complete_reminder", "c2", reminder_id=first), AIMessage("Noted."))
    assert first in reminders(model)[0]
    [done] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert str(done.content).startswith(f"Reminder {first} completed. Next occurrence: ")
    assert state[OFFERED_KEY] == []  # the model call after the tool was offered nothing

    # 5. never offered again; next Monday's occurrence waits
    model, state = await turn("anything else?", AIMessage("No."))
    assert reminders(model) == [] and OFFERED_KEY not in state
    [following] = await ProspectiveLayer(store).get_pending(scope)
    assert following.id != first and following.due_at == datetime(2031, 5, 12, 9, tzinfo=UTC)
    model, _ = await turn("list my reminders", call("list_reminders", "c3"), AIMessage("One."))
    listed = [str(m.content) for m in model.seen[1] if isinstance(m, ToolMessage)]
    assert listed == [f"{following.id}: Send the weekly report. (due 2031-05-12T09:00:00+00:00, "
                      "repeats FREQ=WEEKLY;BYDAY=MO)"]


async def test_a_bad_argument_comes_back_to_the_model_and_writes_nothing(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "u1")
    tools = {t.name: t for t in reminder_tools(ProspectiveLayer(store), scope)}
    out = await tools["add_reminder"].ainvoke({"task": "x", "due_at": "next monday"})
    assert "due_at" in out
    out = await tools["complete_reminder"].ainvoke({"reminder_id": "nope"})
    assert "no trigger" in out
    out = await tools["snooze_reminder"].ainvoke({"reminder_id": "nope"})
    assert "until" in out
    assert await ProspectiveLayer(store).get_pending(scope) == []
