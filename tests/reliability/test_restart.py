"""Neo4j stopped and restarted under a mixed load, with the project's own server command.

The test runs a private local Neo4j (its own data folder and port, never the
shared one), drives per-turn reads, gate calls and writes against it, stops
it with ``LocalNeo4j.stop``, keeps the load going through the outage, starts
it again on the same data, and checks: every acknowledged write survives,
errors during the outage are typed and bounded by the query timeout, the gate
follows its failure mode, triggers contribute nothing, and the same process
recovers without being restarted.

No deadline is a fixed number of seconds: each one derives from what the test
measures on this machine before the outage (how long the server took to
start, how long its first query took, how long a turn's calls take), with the
previous fixed values as floors. A loaded machine gets proportionally more
time; an idle one is held to the same bounds as before.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

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
from symfonic_graph.server._local import JIT_FLAGS
from tests._ports import free_port
from tests.reliability._stats import FIGURES

pytestmark = [pytest.mark.reliability, pytest.mark.neo4j, pytest.mark.anyio]  # starts a Neo4j of its own

T = TypeVar("T")

# Floors: the fixed values this test used before its deadlines were measured. Never tighter than these.
TIMEOUT_FLOOR = 2.0  # query_timeout of the store under load (s)
CALL_SLACK_FLOOR = 2.0  # what one bounded call may take beyond query_timeout (s)
RECOVERY_FLOOR = 10.0  # first successful read after the restart (s)
START_FLOOR = 180.0  # a server start (LocalNeo4j.start's own default, s)
# Scales: a deadline is this many times the duration measured before the outage.
TIMEOUT_FACTOR = 20  # query_timeout: times the slowest call of a calibration turn
SLACK_FACTOR = 10  # slack per call: times the slowest calibration call
RECOVERY_FACTOR = 3  # recovery: times the first query of the fresh server (cold caches, like after a restart)
START_FACTOR = 5  # restart: times the first start
PATIENCE_FACTOR = 2  # a wait for N turns of the load: times N (+1 under way) turns at their bound
# Bounds that keep every derived value meaningful.
TIMEOUT_CEILING = 60.0  # far below the store's limit (the 300 s publish settle period)
SETUP_TIMEOUT = 120.0  # setup and verification calls, which are not what is measured
CALIBRATION_WARMUP, CALIBRATION_TURNS = 2, 10
TURNS_BEFORE, TURNS_OUTAGE, TURNS_AFTER = 5, 1, 3  # an outage turn makes 4 calls, each within query_timeout
CALLS_PER_TURN = 4  # gate, strict gate, trigger read, trigger write: each bounded by query_timeout
PAUSE = 0.05  # between two turns of the load


@dataclass(frozen=True)
class Budget:
    """The deadlines of one run, derived from what was measured before the outage."""

    query_timeout: float
    call_slack: float
    recovery: float
    start: float

    @classmethod
    def measure(cls, *, slowest_call: float, first_start: float, cold_query: float) -> Budget:
        timeout = min(TIMEOUT_CEILING, max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * slowest_call))
        return cls(
            query_timeout=timeout,
            call_slack=max(CALL_SLACK_FLOOR, SLACK_FACTOR * slowest_call),
            recovery=max(RECOVERY_FLOOR, RECOVERY_FACTOR * cold_query + timeout),
            start=max(START_FLOOR, START_FACTOR * first_start),
        )

    @property
    def turn(self) -> float:
        """The longest a turn may take: each of its calls within query_timeout plus slack."""
        return CALLS_PER_TURN * (self.query_timeout + self.call_slack)

    def turns(self, count: int) -> float:
        """How long to wait for ``count`` whole turns of the load (one may be under way when the wait starts)."""
        return PATIENCE_FACTOR * (count + 1) * (self.turn + PAUSE)


class Load:
    """Turns and writes in a loop; records what happened while ``phase`` says where we are."""

    def __init__(self, store: GraphMemoryStore, scope: MemoryScope) -> None:
        self.store, self.scope = store, scope
        self.memory = TurnMemory(store, max_age=0.0)
        self.gate = create_precondition_gate_node(self.memory.get_active_skills)
        self.strict = create_precondition_gate_node(self.memory.get_active_skills, strict=True)
        self.phase = "before"
        self.acked: list[tuple[str, str]] = []  # (phase, trigger id) of every write acknowledged to the caller
        self.calls: list[float] = []  # durations of the calls of turns run wholly before the outage (s)
        self.outage_turns: list[float] = []
        self.outage_results: list[tuple[dict[str, Any], dict[str, Any], list[Any]]] = []
        self.errors: list[tuple[str, BaseException]] = []
        self.stop = False

    def acked_in(self, phase: str) -> int:
        return sum(1 for p, _ in self.acked if p == phase)

    async def one_turn(self, n: int) -> None:
        call = {"name": "deliver", "args": {}, "id": f"c{n}"}
        state = {"memory_scope": self.scope, "messages": [AIMessage("", tool_calls=[call])]}
        cue = SimpleNamespace(prompt="invoice")
        capability = ProspectiveTriggerCapability(self.memory_snapshot_source(), lambda c, q: c in q, self.scope)
        started, phase = time.monotonic(), self.phase
        durations: list[float] = []

        async def timed(work: Callable[[], Awaitable[T]]) -> T:
            begun = time.monotonic()
            try:
                return await work()
            finally:
                durations.append(time.monotonic() - begun)

        gate_out = await timed(lambda: self.gate(state))
        strict_out = await timed(lambda: self.strict(state))
        contributions = await timed(lambda: capability.contribute(cue))
        try:
            trigger_id = await timed(lambda: ProspectiveLayer(self.store).set_trigger(
                self.scope, condition="invoice", task=f"task {n}"))
            self.acked.append((phase, trigger_id))
        except StoreUnavailableError as exc:
            self.errors.append((phase, exc))
        except Exception as exc:  # anything else is untyped: the test fails on it
            self.errors.append((phase, exc))
        if phase == self.phase and phase in ("calibration", "before"):
            self.calls.extend(durations)
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
            FIGURES["restart.operations"] += CALLS_PER_TURN
            await anyio.sleep(PAUSE)


async def _until(done: Callable[[], bool], within: float, what: str) -> float:
    """Wait until ``done()``; fail naming ``what`` after ``within`` seconds. Returns the time it took."""
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > within:
            raise AssertionError(f"{what}: not within {within:.1f} s")
        await anyio.sleep(PAUSE)
    return time.monotonic() - started


async def _timed_thread(work: Callable[[], T]) -> tuple[T, float]:
    started = time.monotonic()
    result = await anyio.to_thread.run_sync(work)
    return result, time.monotonic() - started


async def _two_processes_apply_the_schema(uri: str, user: str, password: str) -> None:
    """On the private server's empty database: two CLI processes race the first migration."""
    env = {**os.environ, "NEO4J_URI": uri, "NEO4J_USER": user, "NEO4J_PASSWORD": password}
    command = [sys.executable, "-m", "symfonic_graph.cli", "schema", "apply"]
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [await anyio.to_thread.run_sync(p.communicate, 2 * SETUP_TIMEOUT) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs


@pytest.mark.slow
async def test_stop_and_restart_under_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYMFONIC_NEO4J_MIN_REPLAN_SECONDS", "3600")  # as `./dev test` starts the test server
    server = LocalNeo4j(home=tmp_path / "neo4j-home")
    port = free_port()
    state, first_start = await _timed_thread(lambda: server.start(port=port))
    driver = neo4j.AsyncGraphDatabase.driver(state.uri, auth=(state.user, state.password))
    # Setup and verification are not what is measured: they get a generous ceiling, not a deadline.
    patient = GraphMemoryStore(driver, query_timeout=SETUP_TIMEOUT)
    scope = MemoryScope("restart-tenant")
    try:
        # The server waits for no quiet period when stopped (Neo4j's default made every stop ~10 s longer).
        assert re.search(r"^bolt shutdown quiet period: (0|PT0S)$", server.log_file.read_text(), re.M), (
            f"see {server.log_file}")
        # It runs with the local server's JIT limits (with the defaults, C2 costs as much CPU as the queries).
        argv = Path(f"/proc/{state.pid}/cmdline").read_bytes().decode().split("\0")
        assert set(JIT_FLAGS) <= set(argv), argv
        # Asked to, it re-plans a query at most once an hour (the test server's database grows from empty).
        assert re.search(r"^cypher min replan interval: PT1H$", server.log_file.read_text(), re.M), (
            f"see {server.log_file}")
        # The first query of a fresh server (cold caches, nothing planned yet), as after the restart.
        cold_started = time.monotonic()
        await patient.read("catalog_version", tenant_id=scope.tenant_id)
        cold_query = time.monotonic() - cold_started
        await _two_processes_apply_the_schema(state.uri, state.user, state.password)
        assert await patient.apply_schema() == [], "both processes applied it; nothing is left"
        await ProceduralLayer(patient).seed_authored_skill(
            scope, label="Deliver", steps=["deliver"], source_tag="authored:test", action_tool="deliver",
            precondition=["get_integration_status"])

        # Calibration: the same turns as the load, on this machine, before anything goes wrong.
        calibration = Load(patient, scope)
        calibration.phase = "calibration"
        for n in range(CALIBRATION_WARMUP):
            await calibration.one_turn(-1 - n)
        calibration.calls.clear()
        for n in range(CALIBRATION_TURNS):
            await calibration.one_turn(-10 - n)
        assert not calibration.errors, f"calibration turns failed on a healthy server: {calibration.errors[:3]}"
        slowest = max(calibration.calls)
        budget = Budget.measure(slowest_call=slowest, first_start=first_start, cold_query=cold_query)

        store = GraphMemoryStore(driver, query_timeout=budget.query_timeout)
        load = Load(store, scope)
        load.acked.extend(calibration.acked)
        async with anyio.create_task_group() as tg:
            tg.start_soon(load.run)
            await _until(lambda: load.acked_in("before") >= TURNS_BEFORE, budget.turns(TURNS_BEFORE),
                         f"{TURNS_BEFORE} acknowledged writes before the outage")
            load.phase = "stopping"
            _, stopped_in = await _timed_thread(server.stop)
            load.phase = "outage"
            # A whole turn inside the outage, however slow the machine.
            await _until(lambda: len(load.outage_results) >= TURNS_OUTAGE, budget.turns(TURNS_OUTAGE),
                         f"{TURNS_OUTAGE} whole turn(s) during the outage")
            load.phase = "restarting"
            _, restarted_in = await _timed_thread(lambda: server.start(port=port, timeout=budget.start))
            restarted = time.monotonic()
            load.phase = "after"
            while True:  # the same store and driver recover by themselves
                try:
                    await store.read("catalog_version", tenant_id=scope.tenant_id)
                    break
                except StoreUnavailableError:
                    assert time.monotonic() - restarted < 3 * budget.recovery, (
                        f"did not recover within {3 * budget.recovery:.1f} s of the restart")
                    await anyio.sleep(PAUSE)
            recovery = time.monotonic() - restarted
            await _until(lambda: load.acked_in("after") >= TURNS_AFTER, budget.turns(TURNS_AFTER),
                         f"{TURNS_AFTER} acknowledged writes after the restart")
            load.stop = True

        pending = {t.id for t in await ProspectiveLayer(patient).get_pending(scope)}
        lost = [t for _, t in load.acked if t not in pending]
        untyped = [e for _, e in load.errors if not isinstance(e, SymfonicGraphError)]
        during = [e for phase, e in load.errors if phase in ("stopping", "outage", "restarting")]
        FIGURES["restart.acknowledged_writes"] += len(load.acked)
        FIGURES["restart.lost_writes"] += len(lost)
        FIGURES["restart.outage_errors"] += len([e for e in during if isinstance(e, SymfonicGraphError)])
        FIGURES["restart.untyped_errors"] += len(untyped)
        FIGURES["restart.longest_outage_turn_ms"] = int(max(load.outage_turns, default=0) * 1000)
        FIGURES["restart.recovery_ms"] = int(recovery * 1000)
        FIGURES["restart.first_start_ms"] = int(first_start * 1000)
        FIGURES["restart.cold_query_ms"] = int(cold_query * 1000)
        FIGURES["restart.slowest_calibration_call_ms"] = int(slowest * 1000)
        FIGURES["restart.stop_ms"] = int(stopped_in * 1000)
        FIGURES["restart.restart_ms"] = int(restarted_in * 1000)
        FIGURES["restart.query_timeout_ms"] = int(budget.query_timeout * 1000)
        FIGURES["restart.recovery_budget_ms"] = int(budget.recovery * 1000)

        assert not lost, f"{len(lost)} acknowledged writes are missing after the restart"
        assert not untyped, f"untyped errors: {untyped[:3]}"
        assert load.outage_results, "no turn ran during the outage"
        for gate_out, strict_out, contributions in load.outage_results:
            # An outage keeps the last rules: those read before the outage are still enforced
            # (within outage_grace), by default and in strict mode alike; pass-through is only for a scope
            # without a recent catalog.
            for out in (gate_out, strict_out):
                [blocked] = out["messages"]
                assert blocked.status == "error" and str(blocked.content).startswith(
                    "Missing precondition: call get_integration_status before deliver")
            assert contributions == []
        # Each turn makes up to three bounded calls (gate, strict gate, trigger read) and one write.
        assert max(load.outage_turns) < budget.turn, (
            f"a turn took {max(load.outage_turns):.1f} s during the outage; bound {budget.turn:.1f} s ({budget})")
        assert recovery < budget.recovery, f"recovered only after {recovery:.1f} s ({budget})"
        assert load.acked_in("before") >= TURNS_BEFORE and load.acked_in("after") >= TURNS_AFTER, (
            "the load wrote before and after the outage")
    finally:
        await driver.close()
        await anyio.to_thread.run_sync(server.stop)
