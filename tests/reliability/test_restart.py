"""Neo4j stopped and restarted under a mixed load, with the project's own server command.

The test runs a private local Neo4j (its own data folder and port, never the
shared one), drives per-turn reads, gate calls and writes against it, stops
it with ``LocalNeo4j.stop``, keeps the load going through the outage, starts
it again on the same data, and checks: every acknowledged write survives,
errors during the outage are typed and bounded by the query timeout, the gate
follows its failure mode, triggers contribute nothing, and the same process
recovers without being restarted.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import neo4j
import pytest
from langchain_core.messages import AIMessage

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    ProspectiveLayer,
    ProspectiveTriggerCapability,
    StoreUnavailableError,
    SymfonicGraphError,
    TurnMemory,
    create_precondition_gate_node,
)
from symfonic_graph.server import LocalNeo4j
from tests.reliability._stats import FIGURES

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]
TIMEOUT = 2.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Load:
    """Turns and writes in a loop; records what happened while ``phase`` says where we are."""

    def __init__(self, store: GraphMemoryStore, scope: MemoryScope) -> None:
        self.store, self.scope = store, scope
        self.memory = TurnMemory(store, max_age=0.0)
        self.gate = create_precondition_gate_node(self.memory.get_active_skills)
        self.strict = create_precondition_gate_node(self.memory.get_active_skills, strict=True)
        self.phase = "before"
        self.acked: list[str] = []
        self.outage_turns: list[float] = []
        self.outage_results: list[tuple[dict[str, Any], dict[str, Any], list[Any]]] = []
        self.errors: list[BaseException] = []
        self.stop = False

    async def one_turn(self, n: int) -> None:
        call = {"name": "deliver", "args": {}, "id": f"c{n}"}
        state = {"memory_scope": self.scope, "messages": [AIMessage("", tool_calls=[call])]}
        cue = SimpleNamespace(prompt="invoice")
        capability = ProspectiveTriggerCapability(self.memory_snapshot_source(), lambda c, q: c in q, self.scope)
        started, phase = time.monotonic(), self.phase
        gate_out, strict_out = await self.gate(state), await self.strict(state)
        contributions = await capability.contribute(cue)
        try:
            trigger_id = await ProspectiveLayer(self.store).set_trigger(
                self.scope, condition="invoice", task=f"task {n}")
            self.acked.append(trigger_id)
        except StoreUnavailableError as exc:
            self.errors.append(exc)
        except Exception as exc:  # anything else is untyped: the test fails on it
            self.errors.append(exc)
        if phase == self.phase == "outage":  # the whole turn ran while the server was down
            self.outage_turns.append(time.monotonic() - started)
            self.outage_results.append((gate_out, strict_out, contributions))

    def memory_snapshot_source(self) -> Any:
        memory, scope = self.memory, self.scope

        class Source:
            async def pending(self, _scope: MemoryScope) -> Any:
                return (await memory.begin(scope)).triggers

        return Source()

    async def run(self) -> None:
        n = 0
        while not self.stop:
            await self.one_turn(n)
            n += 1
            FIGURES["restart.operations"] += 4
            await anyio.sleep(0.05)


async def _two_processes_apply_the_schema(uri: str, user: str, password: str) -> None:
    """On the private server's empty database: two CLI processes race the first migration."""
    env = {**os.environ, "NEO4J_URI": uri, "NEO4J_USER": user, "NEO4J_PASSWORD": password}
    command = [sys.executable, "-m", "symfonic_graph.cli", "schema", "apply"]
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [await anyio.to_thread.run_sync(p.communicate, 120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs


async def test_stop_and_restart_under_load(tmp_path: Path) -> None:
    server = LocalNeo4j(home=tmp_path / "neo4j-home")
    port = _free_port()
    state = await anyio.to_thread.run_sync(lambda: server.start(port=port))
    driver = neo4j.AsyncGraphDatabase.driver(state.uri, auth=(state.user, state.password))
    store = GraphMemoryStore(driver, query_timeout=TIMEOUT)
    scope = MemoryScope("restart-tenant")
    try:
        await _two_processes_apply_the_schema(state.uri, state.user, state.password)
        assert await store.apply_schema() == [], "both processes applied it; nothing is left"
        await ProceduralLayer(store).seed_authored_skill(
            scope, label="Deliver", steps=["deliver"], source_tag="authored:test", action_tool="deliver",
            precondition=["get_integration_status"])
        load = Load(store, scope)
        async with anyio.create_task_group() as tg:
            tg.start_soon(load.run)
            await anyio.sleep(2)
            await anyio.to_thread.run_sync(server.stop)
            load.phase = "outage"
            with anyio.fail_after(120):  # a few whole turns inside the outage, however slow the machine
                while len(load.outage_results) < 2:
                    await anyio.sleep(0.1)
            load.phase = "restarting"
            await anyio.to_thread.run_sync(lambda: server.start(port=port))
            restarted = time.monotonic()
            load.phase = "after"
            while True:  # the same store and driver recover by themselves
                try:
                    await store.read("catalog_version", tenant_id=scope.tenant_id)
                    break
                except StoreUnavailableError:
                    assert time.monotonic() - restarted < 30, "did not recover within 30 s of the restart"
                    await anyio.sleep(0.1)
            recovery = time.monotonic() - restarted
            await anyio.sleep(1)
            load.stop = True

        pending = {t.id for t in await ProspectiveLayer(store).get_pending(scope)}
        lost = [t for t in load.acked if t not in pending]
        untyped = [e for e in load.errors if not isinstance(e, SymfonicGraphError)]
        FIGURES["restart.acknowledged_writes"] += len(load.acked)
        FIGURES["restart.lost_writes"] += len(lost)
        FIGURES["restart.outage_errors"] += len(load.errors) - len(untyped)
        FIGURES["restart.untyped_errors"] += len(untyped)
        FIGURES["restart.longest_outage_turn_ms"] = int(max(load.outage_turns, default=0) * 1000)
        FIGURES["restart.recovery_ms"] = int(recovery * 1000)

        assert not lost, f"{len(lost)} acknowledged writes are missing after the restart"
        assert not untyped, f"untyped errors: {untyped[:3]}"
        assert load.outage_results, "no turn ran during the outage"
        for gate_out, strict_out, contributions in load.outage_results:
            assert gate_out == {}, "default mode passes through while the store is down"
            [blocked] = strict_out["messages"]
            assert blocked.status == "error" and "deliver" in str(blocked.content)
            assert contributions == []
        # Each turn makes up to three bounded calls (gate, strict gate, trigger read) and one write.
        assert max(load.outage_turns) < 4 * (TIMEOUT + 2)
        assert recovery < 10, f"recovered only after {recovery:.1f} s"
        assert len(load.acked) >= 3, "the load wrote before and after the outage"
    finally:
        await driver.close()
        await anyio.to_thread.run_sync(server.stop)
