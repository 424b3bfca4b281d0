"""``symfonic-graph demo``: a scripted multi-tenant agent on the real graph.

No network and no API key: the chat model is a scripted langchain-core fake,
everything else is real — Neo4j, the Cypher seeds, the pre-flight block, the
guarded tool node, and the trigger capability.

Two wirings of the same memory, chosen with ``run_demo(..., agent=...)``:

* ``"langgraph"`` (the default): a hand-built LangGraph ``StateGraph`` with
  the guarded tool node (needs the ``langgraph`` extra);
* ``"middleware"``: LangChain v1's ``create_agent`` with
  ``symfonic_graph.langchain.MemoryMiddleware`` (needs the ``langchain`` extra).
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, NotRequired, TypedDict

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import tools_condition
from pydantic import Field

from symfonic_graph._store import GraphMemoryStore
from symfonic_graph._store.cypher import cypher_root
from symfonic_graph.integrations.langgraph import create_guarded_tool_node
from symfonic_graph.memory.triggers import GraphPendingTriggers, ProspectiveTriggerCapability
from symfonic_graph.memory.turn import TurnMemory
from symfonic_graph.ops.seedfile import split_cypher_script
from symfonic_graph.shape.scope import MemoryScope

DEMO_SEED = "demo_tenants.cypher"
AGENTS: Final = ("langgraph", "middleware")
"""The agent wirings ``run_demo`` can show."""
DEMO_PROMPT = "You are the reporting assistant of the demo."


class DemoState(TypedDict):
    messages: Annotated[list[AnyMessage], operator.add]
    memory_scope: MemoryScope
    channel: str


class _ScriptedModel(FakeMessagesListChatModel):
    """Replays scripted replies and records what it was shown; ``bind_tools`` is a no-op."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> _ScriptedModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


@tool
def get_integration_status(channel: str) -> str:
    """Check that the delivery integration for a channel is connected."""
    return f"{channel}: connected"


@tool
def deliver(channel: str, report: str) -> str:
    """Deliver a report to a channel."""
    return f"delivered {report!r} to {channel}"


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:8]}"}


def keyword_evaluator(condition: str, cue: str) -> bool:
    """The demo's evaluator: every word after 'mentions' appears in the cue."""
    words = condition.lower().split("mentions", 1)[-1].split()
    return bool(words) and all(w.strip(".,'\"") in cue.lower() for w in words)


@dataclass
class Transcript:
    lines: list[str]
    out: Callable[[str], None]

    def say(self, text: str = "") -> None:
        self.lines.append(text)
        self.out(text)


async def seed_demo(store: GraphMemoryStore) -> int:
    """Run the demo's plain-Cypher seed script, then stamp its nodes' keys; return the statement count."""
    script = (cypher_root() / "seeds" / DEMO_SEED).read_text(encoding="utf-8")
    statements = split_cypher_script(script)
    for statement in statements:
        await store.driver.execute_query(statement.text, database_=store.database)
    await store.stamp_keys()  # what `symfonic-graph schema apply` does after a plain-Cypher seed
    return len(statements)


def _build_graph(memory: TurnMemory, model: _ScriptedModel) -> Any:
    tools = [get_integration_status, deliver]

    async def agent(state: DemoState) -> dict[str, Any]:
        snapshot = await memory.begin(state["memory_scope"])  # the turn's one read
        block = snapshot.preflight({"channel": state["channel"]})
        prefix = [SystemMessage(block.content)] if block else []
        return {"messages": [await model.ainvoke([*prefix, *state["messages"]])]}

    builder = StateGraph(DemoState)
    builder.add_node("agent", agent)
    builder.add_node("tools", create_guarded_tool_node(tools, memory.get_active_skills))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "agent")
    return builder.compile()


class _Prompt:
    def __init__(self, prompt: str) -> None:
        self.prompt = prompt


async def run_demo(
    store: GraphMemoryStore, out: Callable[[str], None] = print, *, agent: str = "langgraph"
) -> list[str]:
    """Seed two tenants and run the scripted turns; return the transcript lines.

    Args:
        store: the graph store.
        out: where each transcript line goes.
        agent: ``"langgraph"`` (a ``StateGraph`` with the guarded tool node) or
            ``"middleware"`` (``create_agent`` with ``MemoryMiddleware``).

    Raises:
        ValueError: ``agent`` is not one of ``AGENTS``.
        AssertionError: if tenant isolation or the gate misbehaves (the demo is
            also a check).
    """
    if agent not in AGENTS:
        raise ValueError(f"agent must be one of {', '.join(AGENTS)}; got {agent!r}")
    t = Transcript([], out)
    await store.apply_schema()
    count = await seed_demo(store)
    t.say(f"seeded tenants acme and globex from cypher/seeds/{DEMO_SEED} ({count} statements)")
    acme, globex = MemoryScope("acme", "user-7"), MemoryScope("globex")
    memory = TurnMemory(store)
    await memory.warm_up()
    if agent == "middleware":
        await _middleware_demo(t, memory, acme, globex)
    else:
        await _langgraph_demo(t, store, memory, acme, globex)
    t.say("\ndemo finished: acme was blocked, recovered and reminded; globex saw none of acme's memory")
    return t.lines


async def _langgraph_demo(
    t: Transcript, store: GraphMemoryStore, memory: TurnMemory, acme: MemoryScope, globex: MemoryScope
) -> None:
    t.say("\n== acme / user-7: pre-flight block in the cached system prompt ==")
    block = (await memory.begin(acme)).preflight({"channel": "slack"})
    assert block is not None, "acme's skills should yield a pre-flight block"
    t.say(block.content)

    t.say("\n== acme turn 1: 'Send the weekly report to Slack' ==")
    first, second, third = _call("deliver", channel="slack", report="weekly"), _call(
        "get_integration_status", channel="slack"), _call("deliver", channel="slack", report="weekly")
    model = _ScriptedModel(responses=[
        AIMessage("", tool_calls=[first]),
        AIMessage("", tool_calls=[second]),
        AIMessage("", tool_calls=[third]),
        AIMessage("The weekly report is on Slack."),
    ])
    graph = _build_graph(memory, model)
    result = await graph.ainvoke({"messages": [HumanMessage("Send the weekly report to Slack")],
                                  "memory_scope": acme, "channel": "slack"})
    blocked = [m for m in result["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    for message in result["messages"][1:]:
        t.say(_render(message))
    expected = "Missing precondition: call get_integration_status before deliver"
    assert blocked and str(blocked[0].content).startswith(expected), "the first deliver call must be blocked"
    assert any(isinstance(m, ToolMessage) and m.name == "deliver" and m.status != "error" for m in result["messages"])

    t.say("\n== acme turns 2 and 3: stored reminders matched against the user's words ==")
    for turn, prompt in ((2, "Thanks! Anything about my invoice?"), (3, "Sorry, the invoice again?")):
        snapshot = await memory.begin(acme)  # the turn's one read: catalog version, skills if stale, triggers
        capability = ProspectiveTriggerCapability(snapshot, keyword_evaluator, acme)
        contributions = await capability.contribute(_Prompt(prompt))
        t.say(f"turn {turn} user: {prompt}")
        for c in contributions:
            t.say(f"  offered to the prompt ({c.position}): {c.content}")
        assert contributions, "the invoice reminder should be selected on every matching turn"
    pending = await GraphPendingTriggers(store).pending(acme)
    t.say(f"  still pending after two selections (selection is not acknowledgement): {len(pending)} trigger(s)")

    t.say("\n== globex: the same questions, another tenant ==")
    globex_block = (await memory.begin(globex)).preflight({"channel": "slack"})
    t.say(globex_block.content if globex_block else "(no pre-flight rules)")
    assert globex_block is None or "deliver" not in globex_block.content, "globex must not see acme's rules"
    globex_cap = ProspectiveTriggerCapability(GraphPendingTriggers(store), keyword_evaluator, globex)
    leaked = await globex_cap.contribute(_Prompt("Anything about my invoice?"))
    assert all("invoice 4711" not in c.content for c in leaked), "globex must not see acme's reminders"
    t.say(f"globex reminders selected for 'invoice': {[c.content for c in leaked] or 'none'}")


async def _middleware_demo(t: Transcript, memory: TurnMemory, acme: MemoryScope, globex: MemoryScope) -> None:
    """The same turns through LangChain's ``create_agent`` and ``MemoryMiddleware``."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentState
    from langgraph.checkpoint.memory import InMemorySaver

    from symfonic_graph.integrations.langchain import REMINDERS_MARKER_KEY, MemoryMiddleware

    class ChannelState(AgentState[Any]):
        channel: NotRequired[str]  # what the skills' state predicates read

    def reminders_in(shown: Sequence[BaseMessage]) -> list[str]:
        return [str(m.content) for m in shown if REMINDERS_MARKER_KEY in m.response_metadata]

    middleware = MemoryMiddleware(memory, evaluator=keyword_evaluator)  # one per process, shared by tenants
    tools = [get_integration_status, deliver]
    status, first, retry = (_call("get_integration_status", channel="slack"),
                            _call("deliver", channel="slack", report="weekly"),
                            _call("deliver", channel="slack", report="weekly"))
    model = _ScriptedModel(responses=[
        AIMessage("", tool_calls=[status, first]),  # one parallel batch: the precondition and its action
        AIMessage("", tool_calls=[retry]),
        AIMessage("The weekly report is on Slack."),
        AIMessage("Yes: invoice 4711 is overdue."),
        AIMessage("As I said, invoice 4711 is overdue."),
    ])
    agent: Any = create_agent(model, tools, system_prompt=DEMO_PROMPT, middleware=[middleware],
                         state_schema=ChannelState, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": f"demo-acme-{uuid.uuid4().hex[:8]}"}}

    t.say("\n== acme / user-7: LangChain create_agent with MemoryMiddleware ==")
    t.say("== acme turn 1: 'Send the weekly report to Slack' ==")
    result = await agent.ainvoke({"messages": [HumanMessage("Send the weekly report to Slack")], "channel": "slack"},
                                 config=thread, context=acme)
    t.say("system message the model was shown (the pre-flight block is its last, cached part):")
    for text in _system_blocks(model.seen[0]):
        t.say(text)
    for message in result["messages"][1:]:
        t.say(_render(message))
    blocked = [m for m in result["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    expected = "Missing precondition: call get_integration_status before deliver"
    assert blocked and str(blocked[0].content).startswith(expected), "deliver in the same batch must be blocked"
    assert any(isinstance(m, ToolMessage) and m.name == "deliver" and m.status != "error" for m in result["messages"])

    t.say("\n== acme turns 2 and 3: stored reminders matched against the user's words ==")
    for turn, prompt in ((2, "Thanks! Anything about my invoice?"), (3, "Sorry, the invoice again?")):
        calls = len(model.seen)
        result = await agent.ainvoke({"messages": [HumanMessage(prompt)]}, config=thread, context=acme)
        t.say(f"turn {turn} user: {prompt}")
        [shown] = model.seen[calls:]
        reminders = reminders_in(shown)
        assert reminders, "the invoice reminder should be selected on every matching turn"
        assert _system_blocks(shown) == _system_blocks(model.seen[0]), "the cached system message must not move"
        t.say(f"  shown after the history, outside the cached prefix: {reminders[0]}")
        t.say(_render(result["messages"][-1]))
    pending = await GraphPendingTriggers(memory.store).pending(acme)
    t.say(f"  still pending after two selections (selection is not acknowledgement): {len(pending)} trigger(s)")

    t.say("\n== globex: the same questions, another tenant ==")
    globex_model = _ScriptedModel(responses=[AIMessage("Nothing is due.")])
    globex_agent: Any = create_agent(globex_model, tools, system_prompt=DEMO_PROMPT, middleware=[middleware],
                                state_schema=ChannelState)
    await globex_agent.ainvoke({"messages": [HumanMessage("Anything about my invoice?")], "channel": "slack"},
                               context=globex)
    [shown] = globex_model.seen
    blocks = _system_blocks(shown)
    t.say(blocks[-1] if len(blocks) > 1 else "(no pre-flight rules)")
    assert all("deliver" not in b for b in blocks), "globex must not see acme's rules"
    leaked = reminders_in(shown)
    assert all("invoice 4711" not in c for c in leaked), "globex must not see acme's reminders"
    t.say(f"globex reminders selected for 'invoice': {leaked or 'none'}")


def _system_blocks(shown: Sequence[BaseMessage]) -> list[str]:
    """The text blocks of the system message the model was shown (none without one)."""
    if not shown or not isinstance(shown[0], SystemMessage):
        return []
    content = shown[0].content
    if isinstance(content, str):
        return [content]
    return [str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content]


def _render(message: AnyMessage) -> str:
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = ", ".join(f"{c['name']}({', '.join(f'{k}={v!r}' for k, v in c['args'].items())})"
                          for c in message.tool_calls)
        return f"model asks: {calls}"
    if isinstance(message, ToolMessage):
        tag = "BLOCKED" if message.status == "error" else "tool"
        return f"  {tag} {message.name}: {message.content}"
    return f"model: {message.content}"
