"""Faults: Neo4j down or silent, without touching the shared server.

Two stand-ins for a Neo4j that is down:

* *refused*: ``bolt://127.0.0.1:1`` (nothing listens, the connection is refused);
* *silent*: a local socket that accepts connections and never answers (a hung
  server, or a network that drops packets), which only the timeout can end.

Every library call must fail with ``StoreUnavailableError`` within
``query_timeout + 2 s`` (an elapsed bound is a correctness bound here: a turn
must not hang), the gate must pass through by default and block in strict
mode, and the prospective capability must contribute nothing. Each has a
positive control against the real server, so a pass is not an accident of
wiring.

Not covered here (left for later): stopping and restarting the real server
under load; the development server is shared and must not be stopped.
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from types import SimpleNamespace
from typing import Any

import anyio
import neo4j
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from symfonic_graph import (
    GraphMemoryStore,
    GraphPendingTriggers,
    MemoryScope,
    ProceduralLayer,
    ProspectiveLayer,
    ProspectiveTriggerCapability,
    StoreUnavailableError,
)
from symfonic_graph.gate import create_precondition_gate_node
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.skill_source import StoreSkillGetter
from tests.reliability._stats import FIGURES

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

QUERY_TIMEOUT = 1.0
SLACK = 2.0


@contextmanager
def silent_server() -> Iterator[str]:
    """A listening socket that never accepts: connects succeed, nothing is ever answered."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"bolt://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@asynccontextmanager
async def dead_store(uri: str) -> AsyncIterator[GraphMemoryStore]:
    driver = neo4j.AsyncGraphDatabase.driver(uri, auth=("neo4j", "unused"), connection_timeout=30.0)
    try:
        yield GraphMemoryStore(driver, query_timeout=QUERY_TIMEOUT)
    finally:
        await driver.close()


async def timed(call: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    FIGURES["faults.calls"] += 1
    start = time.monotonic()
    try:
        result: Any = await call()
    except Exception as exc:
        result = exc
    return result, time.monotonic() - start


def store_calls(store: GraphMemoryStore, scope: MemoryScope) -> dict[str, Callable[[], Awaitable[Any]]]:
    skills, triggers, facts = ProceduralLayer(store), ProspectiveLayer(store), SemanticLayer(store)
    return {
        "query_skills": lambda: skills.query_skills(scope),
        "seed_authored_skill": lambda: skills.seed_authored_skill(
            scope, label="x", steps=["deliver"], source_tag="authored:faults"),
        "seed_skills(staged)": lambda: skills.seed_skills(
            scope, [{"label": "x", "steps": ["deliver"], "source_tag": "authored:faults"}], write_id="w"),
        "set_trigger": lambda: triggers.set_trigger(scope, condition="c", task="t"),
        "get_pending": lambda: triggers.get_pending(scope),
        "add_fact": lambda: facts.add_fact(scope, "f"),
        "list_facts": lambda: facts.list_facts(scope),
        "publish": lambda: store.publish(scope, "w"),
        "discard": lambda: store.discard(scope, "w"),
        "retract": lambda: store.retract(scope, "some-id", reason="r"),
        "restore": lambda: store.restore(scope, "some-id"),
        "catalog_version": lambda: store.catalog_version(scope),
        "apply_schema": lambda: store.apply_schema(),
    }


def gate_state(scope: MemoryScope) -> dict[str, Any]:
    return {
        "memory_scope": scope,
        "messages": [
            HumanMessage("deploy it"),
            AIMessage(content="", tool_calls=[{"name": "deploy", "args": {}, "id": "call-1"}]),
        ],
    }


@pytest.mark.parametrize("down", ["refused", "silent"])
async def test_store_calls_fail_typed_and_fast(down: str, tenant: str) -> None:
    FIGURES["faults.calls"] += 0
    with silent_server() as silent_uri:
        uri = "bolt://127.0.0.1:1" if down == "refused" else silent_uri
        async with dead_store(uri) as store:
            slow: list[tuple[str, float]] = []
            untyped: list[tuple[str, str]] = []
            outcomes: dict[str, tuple[Any, float]] = {}

            async def run(name: str, call: Callable[[], Awaitable[Any]]) -> None:
                outcomes[name] = await timed(call)

            async with anyio.create_task_group() as tg:  # concurrently: each call is timed on its own
                for name, call in store_calls(store, MemoryScope(tenant, "n1")).items():
                    tg.start_soon(run, name, call)
            for name, (result, elapsed) in sorted(outcomes.items()):
                if not isinstance(result, StoreUnavailableError):
                    untyped.append((name, repr(result)[:200]))
                elif "check the server" not in str(result) and "query_timeout" not in str(result):
                    untyped.append((name, f"unhelpful message: {result}"))
                # Ended by what the store promises, not by the driver's 30 s connection timeout: refused at
                # once, or the call's own deadline (counted by the message, not timed: no wall clock here).
                promised = "connection refused" if down == "refused" else f"within {QUERY_TIMEOUT}s"
                if promised not in str(result):
                    slow.append((name, str(result)[:200]))
                FIGURES["faults.slowest_ms"] = max(FIGURES["faults.slowest_ms"], int(elapsed * 1000))
            assert not untyped, untyped
            assert not slow, f"calls not ended by a refusal or their deadline: {slow}"


@pytest.mark.parametrize("down", ["refused", "silent"])
async def test_gate_passes_through_by_default_and_blocks_in_strict_mode(
    down: str, store: GraphMemoryStore, tenant: str
) -> None:
    scope = MemoryScope(tenant)
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Deploy safely", steps=["deploy"], source_tag="authored:faults", action_tool="deploy",
        precondition=["run_tests"],
    )
    live = await create_precondition_gate_node(StoreSkillGetter(store))(gate_state(scope))
    [blocked] = live["messages"]  # positive control: the real store blocks the call
    assert blocked.content.startswith("Missing precondition: call run_tests before deploy")

    with silent_server() as silent_uri:
        async with dead_store("bolt://127.0.0.1:1" if down == "refused" else silent_uri) as dead:
            passed, elapsed = await timed(lambda: create_precondition_gate_node(StoreSkillGetter(dead))(
                gate_state(scope)))
            assert passed == {}
            assert elapsed < QUERY_TIMEOUT + SLACK

            strict, elapsed = await timed(lambda: create_precondition_gate_node(StoreSkillGetter(dead), strict=True)(
                gate_state(scope)))
            assert elapsed < QUERY_TIMEOUT + SLACK
            [message] = strict["messages"]
            assert isinstance(message, ToolMessage)
            assert (message.tool_call_id, message.status) == ("call-1", "error")


@pytest.mark.parametrize("down", ["refused", "silent"])
async def test_trigger_capability_contributes_nothing(down: str, store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "u1")
    await ProspectiveLayer(store).set_trigger(scope, condition="invoice", task="Say the invoice is overdue.")
    request = SimpleNamespace(prompt="about my invoice")

    def evaluator(condition: str, cue: str) -> bool:
        return condition in cue

    live = await ProspectiveTriggerCapability(GraphPendingTriggers(store), evaluator, scope).contribute(request)
    assert len(live) == 1 and "overdue" in live[0].content  # positive control

    with silent_server() as silent_uri:
        async with dead_store("bolt://127.0.0.1:1" if down == "refused" else silent_uri) as dead:
            capability = ProspectiveTriggerCapability(GraphPendingTriggers(dead), evaluator, scope)
            contributed, elapsed = await timed(lambda: capability.contribute(request))
            assert contributed == []
            assert elapsed < QUERY_TIMEOUT + SLACK
