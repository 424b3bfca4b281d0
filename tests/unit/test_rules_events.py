"""The rules decide over events, not messages: a framework-free core, and each message read once per turn.

* The core (gate, events, rule set, pre-flight) imports without LangChain.
* A turn of 5 parallel tool calls reads each message of the conversation
  once and resolves the scope once, on both integrations: ``MemoryMiddleware``
  (``create_agent``'s ``wrap_tool_call`` path) and the guarded tool node that
  ``build_agent_graph`` wires (``create_guarded_tool_node``); the next turn
  reads only the messages added since.
* Reading a conversation in pieces (the shared readings) gives the history a
  fresh read gives, on every hostile shape the reader knows, and the
  middleware's decision on a call is the reference model's.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter
from types import SimpleNamespace
from typing import Any

import neo4j
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import ModelResponse, ToolCallRequest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from symfonic_graph import GraphMemoryStore, MemoryScope, TurnMemory, TurnSnapshot
from symfonic_graph.integrations._adapters import Conversations
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.langgraph import create_guarded_tool_node
from symfonic_graph.memory.turn_scope import scope_from_turn
from symfonic_graph.rules._messages import HistoryReader, parse_turn, read_history
from symfonic_graph.rules.events import CallResult, Conversation, History, ToolCallRef, UserMessage
from symfonic_graph.rules.gate import gate_decisions
from tests._fakes import recording_tools
from tests._skills import skill
from tests.unit.test_history_properties import ENVS, SHAPES, histories, reference_allows, render, rule, terminal

SCOPE = MemoryScope("acme", "user-7")
READS: Counter[int] = Counter()
"""Per message object (``id``): how many times the library read what kind of message it is."""


def _by_library(depth: int) -> bool:
    return str(sys._getframe(depth).f_globals.get("__name__", "")).startswith("symfonic_graph")


class _Counted:
    """A message object counting the library's reads of its ``type`` (the first thing a reading asks)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "type" and _by_library(2):
            READS[id(self)] += 1
        return super().__getattribute__(name)


class CountedHuman(_Counted, HumanMessage):
    pass


class CountedAI(_Counted, AIMessage):
    pass


class CountedTool(_Counted, ToolMessage):
    pass


class CountedDict(dict[str, Any]):
    """A role dict counting the library's reads of its ``role``."""

    def get(self, key: str, default: Any = None) -> Any:
        if key == "role" and _by_library(2):
            READS[id(self)] += 1
        return super().get(key, default)


TOOLS = ("auth", "deploy", "publish", "review", "lookup")
SKILLS = (skill("deploy", ["auth"], id="s-deploy"), skill("publish", ["review"], id="s-publish"))
BATCH = (("c0", "deploy"), ("c1", "publish"), ("c2", "lookup"), ("c3", "review"), ("c4", "deploy"))
VERDICTS = ["allowed", "blocked", "allowed", "allowed", "allowed"]  # review in the same batch does not count


def _calls(*calls: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"id": call_id, "name": name, "args": {}} for call_id, name in calls]


def conversation() -> list[Any]:
    """A conversation in two shapes (objects and role dicts) ending in a batch of 5 parallel calls."""
    return [
        CountedHuman("ship it"),
        CountedAI("", tool_calls=_calls(("a1", "auth"))),
        CountedTool("ok", tool_call_id="a1", name="auth"),
        CountedDict(role="user", content="and look it up"),
        CountedDict(role="assistant", content="", tool_calls=_calls(("b1", "lookup"))),
        CountedDict(role="tool", content="found", tool_call_id="b1"),
        CountedAI("", tool_calls=_calls(*BATCH)),
    ]


def next_turn(messages: list[Any]) -> list[Any]:
    """The same conversation one turn later: every call answered, a new user message, a new batch."""
    answers = [CountedTool("done", tool_call_id=call_id, name=name) for call_id, name in BATCH]
    return [*messages, *answers, CountedHuman("again"), CountedAI("", tool_calls=_calls(("d0", "deploy")))]


class PlainState(TypedDict):
    messages: list[Any]
    memory_scope: Any


def _unused_store() -> GraphMemoryStore:
    return GraphMemoryStore(neo4j.AsyncGraphDatabase.driver("bolt://127.0.0.1:1", auth=("n", "x")))  # never used


def _memory() -> tuple[TurnMemory, list[Any]]:
    """A TurnMemory whose scope resolutions are recorded (the state names the scope)."""
    resolved: list[Any] = []
    read = scope_from_turn()

    def spy(state: Any) -> MemoryScope:
        resolved.append(state)
        return read(state)

    return TurnMemory(_unused_store(), scope_from=spy), resolved


def _snapshot() -> TurnSnapshot:
    return TurnSnapshot(SCOPE, 1, SKILLS, (), time.monotonic())  # type: ignore[arg-type]


# --- the core needs no framework ---------------------------------------------------------


def test_the_rules_core_imports_without_langchain() -> None:
    code = ("import sys; sys.modules['langchain_core'] = None; sys.modules['langchain'] = None; "
            "import symfonic_graph.rules.gate, symfonic_graph.rules.events, symfonic_graph.rules.ruleset, "
            "symfonic_graph.rules.preflight, symfonic_graph.rules._messages; "
            "from symfonic_graph.rules.gate import gate_decisions; "
            "d = gate_decisions([{'role': 'assistant', 'content': '', 'tool_calls': "
            "[{'id': 'c1', 'name': 'deploy', 'args': {}}]}], "
            "[{'metadata': {'action_tool': 'deploy', 'precondition': ['auth']}}], {}); "
            "print(d[0].verdict, sorted(d[0].error_result()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["blocked", "['content',", "'name',", "'response_metadata',", "'status',",
                                  "'tool_call_id']"]


def test_a_history_is_the_fold_of_its_events() -> None:
    events = Conversation()
    events.add(UserMessage())
    auth = events.add_call(ToolCallRef("a1", "auth", {"env": "prod"}))
    events.add(CallResult.of(auth, failed=True))
    events.add_call(ToolCallRef("d1", "deploy", {}))
    assert events.history_before("d1") == History((CallResult("auth", {"env": "prod"}, True, 1),), 1)
    assert History.of_events(events.events) == events.history()
    assert events.history_before("never") == events.history()


# --- each message read once per turn, the scope resolved once -----------------------------


def _request(messages: list[Any], call: dict[str, Any]) -> ToolCallRequest:
    state = {"messages": messages, "memory_scope": SCOPE}  # each call its own state dict, as create_agent does
    runtime = SimpleNamespace(context=None)
    return ToolCallRequest(tool_call={**call, "type": "tool_call"}, tool=None, state=state,  # type: ignore[arg-type]
                           runtime=runtime)  # type: ignore[arg-type]


async def _ran(request: ToolCallRequest) -> ToolMessage:
    return ToolMessage("ran", tool_call_id=request.tool_call["id"], name=request.tool_call["name"])


@pytest.mark.anyio
async def test_the_middleware_reads_each_message_once_and_resolves_the_scope_once_per_turn() -> None:
    memory, resolved = _memory()
    middleware = MemoryMiddleware(memory)
    messages = conversation()
    middleware._remember(SCOPE, _snapshot(), ModelResponse(result=[messages[-1]]))
    READS.clear()

    answers = await asyncio.gather(*(middleware.awrap_tool_call(_request(messages, call), _ran)
                                     for call in messages[-1].tool_calls))

    assert [a.content == "ran" for a in answers] == [v == "allowed" for v in VERDICTS]  # the blocked call never ran
    assert [a.tool_call_id for a in answers] == [call_id for call_id, _ in BATCH]
    assert [READS[id(m)] for m in messages] == [1] * len(messages)
    assert len(resolved) == 1

    later = next_turn(messages)
    middleware._remember(SCOPE, _snapshot(), ModelResponse(result=[later[-1]]))
    [answer] = [await middleware.awrap_tool_call(_request(later, call), _ran) for call in later[-1].tool_calls]
    assert answer.content == "ran"
    assert [READS[id(m)] for m in later] == [1] * len(later)  # the earlier messages were not read again
    assert len(resolved) == 2


@pytest.mark.anyio
async def test_the_guarded_tool_node_reads_each_message_once_and_resolves_the_scope_once_per_turn() -> None:
    memory, resolved = _memory()
    memory._snapshots[SCOPE] = _snapshot()  # the turn's read, as begin() leaves it
    tools, executed = recording_tools(*TOOLS)
    builder = StateGraph(PlainState)  # no reducer: the dicts stay dicts, the objects stay themselves
    builder.add_node("tools", create_guarded_tool_node(tools, memory))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile()
    messages = conversation()
    READS.clear()

    answers = (await graph.ainvoke({"messages": messages, "memory_scope": SCOPE}))["messages"]

    assert [a.tool_call_id for a in answers] == [call_id for call_id, _ in BATCH]
    assert [a.status != "error" for a in answers] == [v == "allowed" for v in VERDICTS]
    assert sorted(executed) == sorted(name for (_, name), v in zip(BATCH, VERDICTS, strict=True) if v == "allowed")
    assert [READS[id(m)] for m in messages] == [1] * len(messages)
    assert len(resolved) == 1

    later = next_turn(messages)
    await graph.ainvoke({"messages": later, "memory_scope": SCOPE})
    assert [READS[id(m)] for m in later] == [1] * len(later)
    assert len(resolved) == 2


# --- reading in pieces is reading once ----------------------------------------------------


def _scan_before(messages: list[Any], call_id: str | None) -> History:
    """The reference: the messages before the latest one requesting ``call_id``, read afresh."""
    for index in range(len(messages) - 1, -1, -1):
        reader = HistoryReader()
        if any(ref.id == call_id for ref in reader.feed(messages[index])):
            return read_history(messages[:index])
    return read_history(messages)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(histories, st.lists(st.integers(0, 40), max_size=3), st.sampled_from(["c0", "c1", "call_0", "ü-1", None]))
def test_a_conversation_read_in_pieces_is_the_conversation_read_once(
    history: list[Any], cuts: list[int], call_id: str | None,
) -> None:
    messages = render(history)
    conversations = Conversations()
    for cut in sorted(cuts):  # earlier turns: prefixes of the same message objects
        conversations.read(messages[:cut])
    reader = conversations.read(list(messages))
    assert reader.history() == read_history(messages)
    assert reader.conversation.history_before(call_id) == _scan_before(messages, call_id)
    assert History.of_events(reader.conversation.events) == reader.history()
    assert reader.turn() == parse_turn(messages)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(histories, st.sampled_from(ENVS[:4]), st.sampled_from(SHAPES), st.booleans(), st.booleans(), st.booleans(),
       st.integers(0, 40))
def test_the_middleware_allows_exactly_what_the_reference_allows(
    history: list[Any], env: Any, shape: str, same_args: bool, within: bool, count_failed: bool, cut: int,
) -> None:
    rendered = render(history)
    final = terminal(env, shape)
    middleware = MemoryMiddleware(TurnMemory(_unused_store()), count_failed_calls=count_failed)
    snapshot = TurnSnapshot(SCOPE, 1, (rule(same_args, within),), (), time.monotonic())  # type: ignore[arg-type]
    middleware._remember(SCOPE, snapshot, ModelResponse(result=[AIMessage("", tool_calls=_calls(("t-final", "x")))]))
    call = {"id": "t-final", "name": "deploy", "args": {"env": env}, "type": "tool_call"}

    def decide(messages: list[Any]) -> str:
        request = ToolCallRequest(tool_call=call, tool=None, state={"messages": messages},  # type: ignore[arg-type]
                                  runtime=SimpleNamespace(context=SCOPE))  # type: ignore[arg-type]
        return asyncio.run(middleware.decide(request)).verdict

    earlier = rendered[:cut]  # an earlier turn of the same objects, then the whole conversation
    [expected_earlier] = gate_decisions([*earlier, final], [rule(same_args, within)], {},
                                        count_failed_calls=count_failed)
    assert decide(earlier) == expected_earlier.verdict
    expected = reference_allows(history, env, same_args=same_args, within=within, count_failed=count_failed)
    assert decide([*rendered, final]) == ("allowed" if expected else "blocked")
