"""ToolTalk's reminder and alarm conversations, replayed as triggers against a real Neo4j.

ToolTalk (microsoft/ToolTalk, MIT) holds golden conversations in which an
assistant calls ``AddReminder``, ``CompleteReminder``, ``DeleteReminder``,
``AddAlarm``, ``DeleteAlarm``, ``GetReminders`` and ``FindAlarms``. Each
conversation is mapped to triggers (:func:`plan`):

* ``AddReminder`` with a ``due_date`` and ``AddAlarm`` (its next ``HH:MM:SS``
  at or after the conversation's timestamp) are ``time`` triggers;
* ``AddReminder`` whose task says "when I <verb>" is an ``event`` trigger on
  the tool an application would call when it happens (:data:`WHEN_TOOLS`:
  ToolTalk has no such tool, so the test names it);
* ``CompleteReminder`` acknowledges, ``DeleteReminder`` and ``DeleteAlarm``
  cancel; a reminder or alarm the conversation resolves without having set
  it is stored first, from the conversation's own ``GetReminders`` or
  ``FindAlarms`` answer, else from ToolTalk's database of the user;
* anything else is reported, unmapped, with its reason (an undated
  reminder with no condition has neither a time nor an event).

ToolTalk's times have no zone: they are read as UTC, the conversation's
timestamp included. The replay sets, acknowledges and cancels in the
conversation's order at its timestamp and, after each assistant turn, asks
``MemoryMiddleware`` (a real ``create_agent`` agent, only the chat model
scripted, ``TurnMemory(wall_clock=...)``) what it offers; then moves the
clock to each reminder's time. A reminder is offered from its time (not a
minute before), an event one once its tool's call is in the conversation,
and none after it was completed or deleted.

The data: ``SYMFONIC_TOOLTALK`` or ``../shared/tooltalk`` beside the repo
for all of ToolTalk; ``tooltalk_reminders.json`` here (a few conversations
reduced to their calls, with their source and license) always runs.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph.langchain import MemoryMiddleware
from tests._fakes import Clock, Scripted

FIXTURE = Path(__file__).with_name("tooltalk_reminders.json")
REMINDER_APIS = frozenset({"AddReminder", "CompleteReminder", "DeleteReminder", "GetReminders",
                           "AddAlarm", "DeleteAlarm", "FindAlarms"})
WHEN_TOOLS = {"land": "flight_landed"}  # "when I land": the tool an application would call
WHEN = re.compile(r"\bwhen (?:i|we) (\w+)", re.IGNORECASE)
MINUTE = 60.0


def tooltalk_home() -> Path | None:
    """ToolTalk's checkout: ``SYMFONIC_TOOLTALK``, else ``../shared/tooltalk`` beside the repo, else None."""
    configured = os.environ.get("SYMFONIC_TOOLTALK")
    home = Path(configured) if configured else Path(__file__).resolve().parents[3] / "shared" / "tooltalk"
    return home if (home / "data" / "tooltalk").is_dir() else None


def load_tooltalk(home: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """ToolTalk's conversations that call a reminder or alarm API, and its Reminder and Alarm databases."""
    files = sorted((home / "data" / "tooltalk").glob("*.json")) + sorted((home / "data" / "easy").glob("*.json"))
    conversations = [json.loads(f.read_text()) for f in files]
    databases = {name: json.loads((home / "data" / "databases" / f"{name}.json").read_text())
                 for name in ("Reminder", "Alarm")}
    return [c for c in conversations if any(a["request"]["api_name"] in REMINDER_APIS
                                            for a in _calls(c))], databases


def load_fixture() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    data = json.loads(FIXTURE.read_text())
    return data["conversations"], data["databases"]


def _calls(conversation: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for turn in conversation["conversation"]:
        yield from turn.get("apis") or ()


def _instant(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()


def next_alarm(clock_time: str, after: float) -> float:
    """The first instant at or after ``after`` whose time of day (UTC) is ``clock_time`` (``HH:MM:SS``)."""
    day = datetime.fromtimestamp(after, UTC).date()
    at = datetime.combine(day, datetime.strptime(clock_time, "%H:%M:%S").time(), UTC)
    return (at if at.timestamp() >= after else at + timedelta(days=1)).timestamp()


@dataclass
class Item:
    """One reminder or alarm of a conversation, and what it maps to."""

    source: str  # AddReminder, AddAlarm, or "existing reminder" / "existing alarm"
    task: str
    kind: str | None = None  # time, event, or None: unmapped
    due: float | None = None
    on_tool: str | None = None
    set_turn: int = -1  # -1: existed before the conversation
    done: str | None = None  # ack or cancel
    done_turn: int | None = None
    reason: str = ""
    trigger_id: str | None = None


@dataclass
class Plan:
    name: str
    start: float
    items: list[Item] = field(default_factory=list)
    turns: int = 0

    @property
    def mapped(self) -> list[Item]:
        return [i for i in self.items if i.kind is not None]

    @property
    def unmapped(self) -> list[Item]:
        return [i for i in self.items if i.kind is None]


def _reminder(source: str, task: str, due_date: str | None, set_turn: int) -> Item:
    item = Item(source, task, set_turn=set_turn)
    when = WHEN.search(task)
    if due_date is not None:
        item.kind, item.due = "time", _instant(due_date)
    elif when is not None and when.group(1).lower() in WHEN_TOOLS:
        item.kind, item.on_tool = "event", WHEN_TOOLS[when.group(1).lower()]
    elif when is not None:
        item.reason = f"'when I {when.group(1)}': no tool reports it"
    else:
        item.reason = "no due_date in the call and no 'when ...' condition: an undated to-do"
    return item


def plan(conversation: dict[str, Any], databases: dict[str, Any]) -> Plan:
    """The items a ToolTalk conversation sets, finds and resolves, in its order (pure)."""
    start = _instant(conversation["metadata"]["timestamp"])
    user = conversation["metadata"].get("username") or conversation.get("user", {}).get("username")
    result = Plan(conversation["name"], start, turns=len(conversation["conversation"]))
    known: dict[str, Item] = {}

    def existing(ref: str, alarm: bool) -> Item | None:
        if ref in known:
            return known[ref]
        row = databases["Alarm" if alarm else "Reminder"].get(user, {}).get(ref)
        if row is None:
            return None
        return remember(ref, _existing(row, alarm, start))

    def remember(ref: str | None, item: Item) -> Item:
        result.items.append(item)
        if ref is not None:
            known[ref] = item
        return item

    for turn, message in enumerate(conversation["conversation"]):
        for call in message.get("apis") or ():
            api, args = call["request"]["api_name"], call["request"]["parameters"]
            answer = call.get("response") or {}
            if call.get("exception") is not None or api not in REMINDER_APIS:
                continue
            ref = answer.get("reminder_id") or answer.get("alarm_id")
            if api == "AddReminder":
                remember(ref, _reminder("AddReminder", args["task"], args.get("due_date"), turn))
            elif api == "AddAlarm":
                remember(ref, Item("AddAlarm", f"Alarm at {args['time']}.", "time", next_alarm(args["time"], start),
                                   set_turn=turn))
            elif api in ("GetReminders", "FindAlarms"):
                for row in answer.get("reminders") or answer.get("alarms") or ():
                    key = row.get("reminder_id") or row["alarm_id"]
                    if key not in known and row.get("status", "pending") == "pending":
                        remember(key, _existing(row, api == "FindAlarms", start))
            else:
                item = existing(args.get("reminder_id") or args["alarm_id"], api == "DeleteAlarm")
                if item is not None and item.done is None:
                    item.done, item.done_turn = ("ack" if api == "CompleteReminder" else "cancel"), turn
    return result


def _existing(row: dict[str, Any], alarm: bool, start: float) -> Item:
    if alarm:
        return Item("existing alarm", f"Alarm at {row['time']}.", "time", next_alarm(row["time"], start))
    item = _reminder("existing reminder", row["task"], row.get("due_date"), -1)
    return item


def survey(plans: list[Plan]) -> dict[str, Any]:
    """How many conversations and items map to time or event triggers, and why the others do not."""
    items = [i for p in plans for i in p.items]
    return {
        "conversations": len(plans),
        "fully_mapped": sum(bool(p.items) and not p.unmapped for p in plans),
        "with_unmapped": sum(bool(p.unmapped) for p in plans),
        "nothing_to_map": sum(not p.items for p in plans),
        "items": Counter(i.kind or "unmapped" for i in items),
        "resolved": Counter(i.done for i in items if i.kind is not None and i.done),
        "reasons": Counter(i.reason for i in items if i.kind is None),
    }


# --- the replay through the middleware ------------------------------------------------------


def _happened(tool: str) -> list[BaseMessage]:
    """A conversation in which the event's tool was called and answered."""
    return [HumanMessage("I just landed."),
            AIMessage("", tool_calls=[{"name": tool, "args": {}, "id": f"{tool}-1"}]),
            ToolMessage("ok", tool_call_id=f"{tool}-1")]


async def offered(middleware: MemoryMiddleware, scope: MemoryScope, history: list[BaseMessage]) -> list[str]:
    """The tasks the middleware shows the (scripted) model on one turn, in order."""
    model = Scripted(responses=[AIMessage("Noted.")])
    agent = create_agent(model, [], middleware=[middleware])
    await agent.ainvoke({"messages": [*history, HumanMessage("Anything I should know?")]}, context=scope)
    last = str(model.seen[0][-1].content)
    if not last.startswith("## PENDING REMINDERS"):
        return []
    return sorted(line[2:] for line in last.splitlines()[1:])


def expected(items: list[Item], now: float, happened: bool, done: set[str]) -> list[str]:
    """The tasks of the stored, unresolved items due at ``now`` (event ones once ``happened``)."""
    return sorted(i.task for i in items if i.trigger_id is not None and i.trigger_id not in done
                  and ((i.kind == "event" and happened) or (i.kind == "time" and i.due is not None and i.due <= now)))


def day_shift(start: float, real_now: float) -> float:
    """Whole days that move ``start`` (a ToolTalk instant, 2023) past tomorrow of ``real_now``.

    A trigger's offer key is never before its ``created_at``, the server's
    real time when written, so the replay's clock must be later than that:
    every ToolTalk instant moves by the same whole days (times of day kept).
    """
    return math.ceil((real_now + 86400 - start) / 86400) * 86400


async def replay(store: GraphMemoryStore, scope: MemoryScope, p: Plan) -> int:
    """Replay a plan: assert every offer; return the number of middleware turns checked."""
    shift = day_shift(p.start, time.time())
    start = p.start + shift
    clock = Clock(start)
    layer = ProspectiveLayer(store, clock=clock)
    middleware = MemoryMiddleware(TurnMemory(store, wall_clock=clock, coalesce_window=None))
    mapped, checks, done = p.mapped, 0, set[str]()
    history = [m for tool in sorted({i.on_tool for i in mapped if i.on_tool}) for m in _happened(tool)]

    async def check(now: float, happened: bool = False) -> None:
        nonlocal checks
        clock.now = now
        got = await offered(middleware, scope, history if happened else [])
        assert got == expected(mapped, now - shift, happened, done), (p.name, now - shift, happened)
        checks += 1

    async def store_item(item: Item) -> None:
        due = None if item.due is None else item.due + shift
        item.trigger_id = await layer.set_trigger(scope, task=item.task, due_at=due, on_tool=item.on_tool)

    for item in mapped:
        if item.set_turn < 0:
            await store_item(item)
    await check(start)
    for turn in range(p.turns):
        for item in mapped:
            if item.set_turn == turn:
                await store_item(item)
        for item in mapped:
            if item.done_turn == turn:
                assert item.trigger_id is not None
                await (layer.ack_trigger if item.done == "ack" else layer.cancel_trigger)(scope, item.trigger_id)
                done.add(item.trigger_id)
        await check(start)
        await check(start, happened=True)
    for item in mapped:  # at its time, not a minute before; never once done
        if item.kind == "time":
            assert item.due is not None
            due = max(item.due + shift, start)
            await check(max(due - MINUTE, start))
            await check(due)
            await check(due + 86400)
        else:
            await check(start + 86400, happened=False)
            await check(start + 86400, happened=True)
    return checks


pytestmark = pytest.mark.anyio


def test_the_fixture_covers_each_mapping() -> None:
    conversations, databases = load_fixture()
    plans = [plan(c, databases) for c in conversations]
    found = survey(plans)
    assert found["items"]["time"] > 0 and found["items"]["event"] == 1 and found["items"]["unmapped"] > 0
    assert found["resolved"]["ack"] > 0 and found["resolved"]["cancel"] > 0
    [landing] = [i for p in plans for i in p.items if i.kind == "event"]
    assert (landing.task, landing.on_tool) == ("call dad when I land", "flight_landed")
    assert next_alarm("09:00:00", _instant("2023-09-11 10:00:00")) == _instant("2023-09-12 09:00:00")
    assert next_alarm("10:00:00", _instant("2023-09-11 10:00:00")) == _instant("2023-09-11 10:00:00")


async def test_the_fixture_conversations_offer_at_their_time_and_never_once_done(
    store: GraphMemoryStore, tenant: str
) -> None:
    conversations, databases = load_fixture()
    checks = 0
    for n, conversation in enumerate(conversations):
        checks += await replay(store, MemoryScope(tenant, f"tooltalk-{n}"), plan(conversation, databases))
    assert checks > 50


@pytest.mark.skipif(tooltalk_home() is None, reason="ToolTalk not found: set SYMFONIC_TOOLTALK to a checkout of "
                    "microsoft/ToolTalk, or place it at ../shared/tooltalk beside the repo (the committed "
                    "fixture runs without it)")
async def test_every_tooltalk_reminder_conversation_replays(store: GraphMemoryStore, tenant: str) -> None:
    home = tooltalk_home()
    assert home is not None
    conversations, databases = load_tooltalk(home)
    plans = [plan(c, databases) for c in conversations]
    for n, p in enumerate(plans):
        await replay(store, MemoryScope(tenant, f"tooltalk-{n}"), p)
    found = survey(plans)
    assert found["conversations"] == len(conversations) > 0
    assert found["items"]["event"] >= 1 and found["items"]["time"] > found["items"]["unmapped"]
