"""``symfonic_graph.langchain`` without a database: scope reading, system-message assembly,
the gate's same-batch rule on one tool call, construction errors, and the optional import.

Nothing here talks to Neo4j; the behaviour on the real graph is in
``tests/integration/test_langchain_middleware.py``.
"""

from __future__ import annotations

import doctest
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import Any

import neo4j
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelResponse, ToolCallRequest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

import symfonic_graph.integrations.langchain as lc
from symfonic_graph import GraphMemoryStore, MemoryScope, TurnMemory, TurnSnapshot
from symfonic_graph.errors import ScopeError
from symfonic_graph.langchain import MemoryMiddleware, scope_in_context, with_preflight
from tests._fakes import Scripted, ai_calls
from tests._skills import ai, result, skill

SCOPE = MemoryScope("acme", "user-7")


@pytest.fixture
def memory() -> TurnMemory:
    """A TurnMemory over a driver that is never used by these tests (no connection is opened)."""
    return TurnMemory(GraphMemoryStore(neo4j.AsyncGraphDatabase.driver("bolt://127.0.0.1:1", auth=("n", "x"))))


def test_docstring_examples_run() -> None:
    outcome = doctest.testmod(lc, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert outcome.attempted > 0 and outcome.failed == 0


@pytest.mark.parametrize("context", [
    SCOPE,
    {"tenant_id": "acme", "namespace": "user-7"},
    SimpleNamespace(tenant_id="acme", namespace="user-7"),
    {"memory_scope": SCOPE, "user_id": "u-1"},
    SimpleNamespace(memory_scope={"tenant_id": "acme", "namespace": "user-7"}, user_id="u-1"),
])
def test_the_context_names_the_scope(context: Any) -> None:
    assert scope_in_context(context) == SCOPE


@pytest.mark.parametrize("context", [None, "acme", ("acme",), 7, {"user_id": "u-1"}, SimpleNamespace(user_id="u")])
def test_a_context_naming_no_scope_gives_none(context: Any) -> None:
    assert scope_in_context(context) is None


@pytest.mark.parametrize("context", [{"tenant_id": ""}, {"tenant_id": 7}, {"memory_scope": "acme"},
                                     {"memory_scope": None}, {"tenant_id": "acme", "namespace": ""}])
def test_a_malformed_scope_in_the_context_raises(context: Any) -> None:
    with pytest.raises(ScopeError):
        scope_in_context(context)


def test_the_preflight_block_is_the_last_content_block_and_nothing_else_moves() -> None:
    original = SystemMessage(content="Be brief.", id="sys-1", additional_kwargs={"k": 1})
    combined = with_preflight(original, "## RULES")
    assert combined.content == [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "## RULES"}]
    assert (combined.id, combined.additional_kwargs) == ("sys-1", {"k": 1})
    assert original.content == "Be brief."  # the request's message is not mutated
    blocks = [{"type": "text", "text": "static", "cache_control": {"type": "ephemeral"}}]
    assert with_preflight(SystemMessage(content=blocks), "## RULES").content == [*blocks, {"type": "text",
                                                                                           "text": "## RULES"}]
    assert with_preflight(SystemMessage(content=""), "## RULES").content == "## RULES"
    assert with_preflight(None, "## RULES").content == "## RULES"
    # the same inputs give the same bytes, call after call
    assert with_preflight(original, "## RULES") == with_preflight(original, "## RULES")


def test_construction_errors_are_loud(memory: TurnMemory) -> None:
    with pytest.raises(TypeError, match="TurnMemory"):
        MemoryMiddleware(memory.get_active_skills)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        MemoryMiddleware(memory, evaluator="invoice")  # type: ignore[arg-type]

    async def evaluator(condition: str, cue: str) -> bool:
        return True

    with pytest.raises(TypeError, match="synchronous"):
        MemoryMiddleware(memory, evaluator=evaluator)


def _request(state: dict[str, Any], call_id: str, name: str, context: Any = SCOPE) -> ToolCallRequest:
    runtime = SimpleNamespace(context=context)
    call = {"name": name, "args": {}, "id": call_id, "type": "tool_call"}
    return ToolCallRequest(tool_call=call, tool=None, state=state, runtime=runtime)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_each_call_is_decided_against_results_before_its_own_ai_message(memory: TurnMemory) -> None:
    middleware = MemoryMiddleware(memory)
    snapshot = TurnSnapshot(SCOPE, 1, (skill("deliver", ["get_status"]),), (), time.monotonic())  # type: ignore[arg-type]
    batch = ai(("c1", "get_status"), ("c2", "deliver"))
    middleware._remember(SCOPE, snapshot, ModelResponse(result=[batch]))

    # the precondition's answer from the same batch is already in the state: it does not count
    state = {"messages": [HumanMessage("go"), batch, result("c1", "get_status")]}
    assert (await middleware.decide(_request(state, "c2", "deliver"))).verdict == "blocked"
    assert (await middleware.decide(_request(state, "c1", "get_status"))).verdict == "allowed"

    retry = ai(("c3", "deliver"))
    middleware._remember(SCOPE, snapshot, ModelResponse(result=[retry]))
    later = {"messages": [*state["messages"], result("c2", "deliver"), retry]}
    assert (await middleware.decide(_request(later, "c3", "deliver"))).verdict == "allowed"


@pytest.mark.anyio
async def test_a_tool_call_without_a_scope_raises(memory: TurnMemory) -> None:
    middleware = MemoryMiddleware(memory, strict=True)
    state = {"messages": [ai(("c1", "deliver"))]}
    with pytest.raises(ScopeError):
        await middleware.decide(_request(state, "c1", "deliver", context=None))


def test_the_sync_path_says_to_use_ainvoke(memory: TurnMemory) -> None:
    agent = create_agent(Scripted(responses=[ai_calls(("deliver", "c1")), AIMessage("done")]), [],
                         middleware=[MemoryMiddleware(memory)])
    with pytest.raises(NotImplementedError, match="ainvoke"):
        agent.invoke({"messages": [HumanMessage("go")]}, context=SCOPE)


def test_importing_the_package_does_not_import_langchain() -> None:
    code = ("import sys, symfonic_graph, symfonic_graph.langgraph; "
            "print(sorted(m for m in sys.modules if m == 'langchain' or m.startswith('langchain.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
