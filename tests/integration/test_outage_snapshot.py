"""A process that starts while Neo4j is down keeps the rules it can know, through a real Neo4j.

One process reads the scope (its ``TurnMemory`` writes the local snapshot);
the connection is cut (``tests._proxy``); a NEW process (new driver, new
``TurnMemory``, same ``snapshot_dir``) then runs an agent. The tools record
their real invocations; only the chat model is scripted.

- within ``max_age + outage_grace`` of the read, the snapshot's rules are
  enforced as they were (the unguarded lookup runs, the guarded cancel waits
  for it, then runs);
- past it, ``strict="guarded"`` refuses the guarded cancel however often it
  is asked and runs the lookup; ``strict=False`` runs both (the documented
  open default), ``strict=True`` refuses both;
- without a snapshot, ``guarded_tools`` names what ``strict="guarded"`` refuses;
- a corrupt file is ignored with a WARNING; the file is never read while the
  store answers, and after an outage the store's newest rule wins.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import neo4j
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.langgraph import build_agent_graph
from symfonic_graph.memory._snapshot import SnapshotDir
from tests._fakes import Scripted, ai_calls, assert_every_call_answered, recording_tools
from tests._proxy import TcpProxy
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

GUARDED, LOOKUP = "cancel_reservation", "get_reservation"
MISSING = f"Missing precondition: call {LOOKUP} before {GUARDED}"
UNAVAILABLE = "Precondition check unavailable"


class Network:
    """A proxy in front of the test server that can be cut and brought back on the same port."""

    def __init__(self, settings: Neo4jSettings, proxy: TcpProxy) -> None:
        self.settings, self.proxy, self.uri = settings, proxy, proxy.uri
        self.drivers: list[neo4j.AsyncDriver] = []

    def store(self, query_timeout: float = 10.0) -> GraphMemoryStore:
        """A new process's store: its own driver, through the proxy."""
        driver = neo4j.AsyncGraphDatabase.driver(self.uri, auth=(self.settings.user, self.settings.password))
        self.drivers.append(driver)
        return GraphMemoryStore(driver, database=self.settings.database, query_timeout=query_timeout)

    async def back(self) -> None:
        """Listen again on the same port: the server is back for every driver."""
        port = int(self.uri.rsplit(":", 1)[1])
        again = TcpProxy(self.proxy.host, self.proxy.port)
        again._server = await asyncio.start_server(again._serve, "127.0.0.1", port)
        self.proxy = again


@pytest.fixture
async def network(neo4j_settings: Neo4jSettings, _schema: None) -> AsyncIterator[Network]:
    net = Network(neo4j_settings, await TcpProxy.in_front_of(neo4j_settings.uri))
    try:
        yield net
    finally:
        await net.proxy.cut()
        for driver in net.drivers:
            await driver.close()


async def _seed(store: GraphMemoryStore, scope: MemoryScope, action: str = GUARDED) -> str:
    skill = await ProceduralLayer(store).seed_authored_skill(
        scope, label="Cancel", steps=[action], source_tag="authored:test", action_tool=action, precondition=[LOOKUP])
    return skill.id


async def _first_process_reads(network: Network, scope: MemoryScope, folder: Path) -> None:
    """A process reads the scope once (the snapshot is written), then the connection is cut."""
    await TurnMemory(network.store(), snapshot_dir=folder).begin(scope)
    assert list(folder.glob("rules-*.json"))
    await network.proxy.cut()


def _script() -> Scripted:
    """Both tools asked together, then the guarded one again after the lookup's answer, then twice more."""
    return Scripted(responses=[
        ai_calls((GUARDED, "c1"), (LOOKUP, "c2")), ai_calls((GUARDED, "c3")), ai_calls((GUARDED, "c4")),
        ai_calls((GUARDED, "c5")), AIMessage("done")])


Agent = Callable[[TurnMemory, MemoryScope, Scripted, list[Any], dict[str, Any]], Awaitable[dict[str, Any]]]
ASK = {"messages": [HumanMessage("cancel my reservation")]}


async def _middleware(memory: TurnMemory, scope: MemoryScope, model: Scripted, tools: list[Any],
                      policy: dict[str, Any]) -> dict[str, Any]:
    agent = create_agent(model, tools, middleware=[MemoryMiddleware(memory, **policy)])
    return await agent.ainvoke(ASK, context=scope)


async def _graph(memory: TurnMemory, scope: MemoryScope, model: Scripted, tools: list[Any],
                 policy: dict[str, Any]) -> dict[str, Any]:
    return await build_agent_graph(model, tools, memory, **policy).ainvoke(ASK, context=scope)


AGENTS = pytest.mark.parametrize("agent", [_middleware, _graph], ids=["middleware", "agent_graph"])


async def _run(agent: Agent, network: Network, scope: MemoryScope, folder: Path | None,
               policy: dict[str, Any], **limits: float) -> tuple[Counter[str], dict[str, str]]:
    """A new process (new driver, new TurnMemory) runs the scripted agent; the tools' runs and the answers."""
    memory = TurnMemory(network.store(query_timeout=2.0), snapshot_dir=folder, **limits)
    tools, executed = recording_tools(GUARDED, LOOKUP)
    model = _script()
    out = await agent(memory, scope, model, tools, policy)
    assert_every_call_answered(model)
    answers = {m.tool_call_id: str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)}
    return Counter(executed), answers  # real invocations per tool (a parallel batch runs in any order)


@AGENTS
async def test_a_new_process_enforces_the_snapshot_rules_within_the_grace(
    agent: Agent, store: GraphMemoryStore, scope: MemoryScope, network: Network, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _seed(store, scope)
    await _first_process_reads(network, scope, tmp_path)
    with caplog.at_level(logging.WARNING, logger="symfonic_graph"):
        executed, answers = await _run(agent, network, scope, tmp_path, {})  # even strict=False: the rules hold
    assert answers["c1"].startswith(MISSING)  # same batch as the lookup: refused by the rule itself
    assert executed == {LOOKUP: 1, GUARDED: 3}  # after the lookup's answer the rule is met
    assert "enforcing the last rules read" in caplog.text


@AGENTS
async def test_past_the_grace_guarded_refuses_only_the_guarded_tool(
    agent: Agent, store: GraphMemoryStore, scope: MemoryScope, network: Network, tmp_path: Path,
) -> None:
    await _seed(store, scope)
    await _first_process_reads(network, scope, tmp_path)
    time.sleep(0.3)
    limits = {"max_age": 0.1, "outage_grace": 0.0}  # the snapshot is too old to enforce
    executed, answers = await _run(agent, network, scope, tmp_path, {"strict": "guarded"}, **limits)
    assert executed == {LOOKUP: 1}  # the unguarded lookup ran; the guarded cancel ran 0 of 4 times
    assert all(answers[c].startswith(UNAVAILABLE) for c in ("c1", "c3", "c4", "c5"))

    executed, _ = await _run(agent, network, scope, tmp_path, {}, **limits)
    assert executed == {GUARDED: 4, LOOKUP: 1}  # strict=False: the open default, no rule used
    executed, _ = await _run(agent, network, scope, tmp_path, {"strict": True}, **limits)
    assert executed == {}  # strict=True: nothing runs, not even the lookup


@AGENTS
async def test_without_a_snapshot_guarded_tools_names_what_is_refused(
    agent: Agent, scope: MemoryScope, network: Network, tmp_path: Path,
) -> None:
    await network.proxy.cut()  # the process starts during the outage and never saw the scope
    policy = {"strict": "guarded", "guarded_tools": [GUARDED]}
    for folder in (None, tmp_path):
        executed, answers = await _run(agent, network, scope, folder, policy)
        assert executed == {LOOKUP: 1}
        assert answers["c5"].startswith(UNAVAILABLE)
    executed, _ = await _run(agent, network, scope, tmp_path, {"strict": "guarded"})
    assert executed == {GUARDED: 4, LOOKUP: 1}  # nothing known to be guarded: all run


async def test_a_corrupt_snapshot_is_ignored_with_a_warning(
    store: GraphMemoryStore, scope: MemoryScope, network: Network, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    await _seed(store, scope)
    await _first_process_reads(network, scope, tmp_path)
    SnapshotDir(tmp_path).file_of(scope).write_bytes(b'{"format": 1, "tenant_id": ')
    with caplog.at_level(logging.WARNING, logger="symfonic_graph"):
        executed, _ = await _run(_graph, network, scope, tmp_path, {"strict": "guarded", "guarded_tools": [LOOKUP]})
    assert executed == {GUARDED: 4}  # the file's rules are gone; guarded_tools still hold
    assert "is unreadable" in caplog.text and "treated as absent" in caplog.text


async def test_the_snapshot_is_never_read_while_the_store_answers_and_the_newest_rule_wins(
    store: GraphMemoryStore, scope: MemoryScope, network: Network, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = await _seed(store, scope)
    await TurnMemory(network.store(), snapshot_dir=tmp_path).begin(scope)  # the snapshot: cancel is guarded
    await store.retract(scope, old)
    await _seed(store, scope, action="refund")  # the store's newest rules: refund is guarded, cancel is not
    loads: list[MemoryScope] = []
    real_load = SnapshotDir.load
    monkeypatch.setattr(SnapshotDir, "load", lambda self, s: loads.append(s) or real_load(self, s))

    await network.proxy.cut()
    down = TurnMemory(network.store(query_timeout=2.0), snapshot_dir=tmp_path)  # starts during the outage
    stale = await down.begin(scope)
    assert stale.stale and {s.action_tool for s in stale.skills} == {GUARDED}  # the rules the file holds
    assert len(loads) == 1
    await down.begin(scope)
    assert len(loads) == 1  # read once per outage

    await network.back()
    fresh = await down.begin(scope)
    assert not fresh.stale and {s.action_tool for s in fresh.skills} == {"refund"}  # the newest rule wins
    up = TurnMemory(network.store(), snapshot_dir=tmp_path)  # a new process, the store answering
    assert {s.action_tool for s in (await up.begin(scope)).skills} == {"refund"}
    assert len(loads) == 1  # never read while the store answers
    assert SnapshotDir(tmp_path).load(scope).guarded == {"refund"}  # type: ignore[union-attr]  # rewritten
