"""An unchanged catalog is never shipped twice within ``recheck_every``; an edit is seen within its bound.

A plain-Cypher edit that bumps the catalog version is seen on the next turn;
one that does not bump it within ``recheck_every`` (300 s by default), with a
WARNING naming the skill. Past ``max_age`` an unchanged catalog costs a warm
turn: what the server returned shows it (no skills shipped), and a warm read
confirms the rules for an outage's grace. A fake clock stands for the time;
every query reaches a real Neo4j.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.errors import StoreUnavailableError, ValidationError
from tests._fakes import Clock
from tests._proxy import TcpProxy, proxied_store
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio


class ShippedRows(GraphMemoryStore):
    """The real store on the same driver, recording for each turn row what the server returned.

    Its turns read without coalescing (one query per turn): a caller that stops waiting for a slow batch
    reads alone while the batch runs to its end, and both rows would be counted.
    """

    def __init__(self, store: GraphMemoryStore) -> None:
        super().__init__(store.driver, database=store.database)
        self.rows: list[tuple[str, bool, int]] = []  # (query, skills_fresh, skills shipped)

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        rows = await super().read(name, **params)
        if name.startswith("turn_snapshot"):
            # the skills shipped as rows, or as the one packed text (counted as one) a first read may get
            self.rows.extend((name, bool(row["skills_fresh"]), len(row["skills"]) or bool(row.get("packed")))
                             for row in rows)
        return rows

    def shipped(self) -> int:
        return sum(1 for _, fresh, n in self.rows if fresh and n)


@pytest.fixture
async def proxied(neo4j_settings: Neo4jSettings, _schema: None) -> AsyncIterator[tuple[GraphMemoryStore, TcpProxy]]:
    """A store reaching the test server through a TCP proxy the test can cut (an outage)."""
    async with proxied_store(neo4j_settings, query_timeout=5.0) as pair:
        yield pair


async def _seed(store: GraphMemoryStore, scope: MemoryScope, label: str = "Deliver") -> None:
    await ProceduralLayer(store).seed_authored_skill(
        scope, label=label, steps=["deliver"], source_tag="authored:test", action_tool="deliver",
        precondition=["get_status"], identifier=label.lower())


async def _labels(memory: TurnMemory, scope: MemoryScope) -> list[str]:
    return sorted(s.label for s in (await memory.begin(scope)).skills)


async def test_an_unchanged_catalog_past_max_age_is_not_shipped_again(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await _seed(store, scope)
    counting, clock = ShippedRows(store), Clock()
    memory = TurnMemory(counting, clock=clock, coalesce_window=None)  # max_age 10 s, recheck_every 300 s
    user = MemoryScope(scope.tenant_id, "user-1")
    for _ in range(20):  # 20 turns 11 s apart: each one past max_age, 220 s in all
        assert await _labels(memory, scope) == ["Deliver"]
        assert await _labels(memory, user) == ["Deliver"]
        clock.now += 11
    # The server shipped each scope's skills on its first read, and once more past max_age to confirm the
    # version (a first read may meet a write half applied); every later row carried none.
    assert counting.shipped() == 4
    assert [n > 0 for _, _, n in counting.rows[:4]] == [True, True, True, True]
    assert len(counting.rows) == 40 and all(n == 0 for _, _, n in counting.rows[4:])
    assert all(name == "turn_snapshot_warm" for name, _, _ in counting.rows[4:])

    clock.now += memory.recheck_every  # past the recheck: shipped once more each (rows identical: no warning)
    before = (await memory.begin(scope)).skills
    await memory.begin(user)
    assert counting.shipped() == 6
    assert (await memory.begin(scope)).skills is before  # identical rows kept the compiled rules
    assert counting.shipped() == 6


async def test_an_edit_that_bumps_the_version_is_seen_on_the_next_turn(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await _seed(store, scope)
    clock = Clock()
    memory = TurnMemory(store, clock=clock)
    assert await _labels(memory, scope) == ["Deliver"]
    clock.now += 0.001
    # The documented plain-Cypher pattern: the edit, then the bump.
    await store.driver.execute_query(
        "MATCH (s:Skill {tenant_id: $t}) SET s.label = 'Deliver (bumped)' "
        "WITH count(*) AS n MERGE (c:SymfonicCatalog {tenant_id: $t}) ON CREATE SET c.version = 0 "
        "SET c.version = c.version + 1", t=scope.tenant_id)
    assert await _labels(memory, scope) == ["Deliver (bumped)"]


async def test_an_edit_without_a_bump_is_seen_within_recheck_every_and_named(
    store: GraphMemoryStore, scope: MemoryScope, caplog: pytest.LogCaptureFixture
) -> None:
    await _seed(store, scope)
    counting, clock = ShippedRows(store), Clock()
    memory = TurnMemory(counting, clock=clock, recheck_every=120, coalesce_window=None)
    users = [MemoryScope(scope.tenant_id, f"user-{i}") for i in range(3)]
    for each in (scope, *users):
        assert await _labels(memory, each) == ["Deliver"]
    clock.now += 11  # past max_age: each scope's version confirmed by a second read
    for each in (scope, *users):
        assert await _labels(memory, each) == ["Deliver"]
    [skill_id] = [s.id for s in (await memory.begin(scope)).skills]
    await store.driver.execute_query(  # forgot the bump
        "MATCH (s:Skill {tenant_id: $t}) SET s.label = 'Deliver (not bumped)'", t=scope.tenant_id)

    clock.now += 60  # past max_age, before the earliest recheck (three quarters of 120 s): still the cached rules
    for each in (scope, *users):
        assert await _labels(memory, each) == ["Deliver"]
    shipped = counting.shipped()

    clock.now += 60  # recheck_every after the last ship: the next turn of a scope ships the skills again
    with caplog.at_level(logging.WARNING, logger="symfonic_graph.turn"):
        assert await _labels(memory, scope) == ["Deliver (not bumped)"]
    [record] = [r for r in caplog.records if "without a catalog version bump" in r.getMessage()]
    assert skill_id in record.getMessage() and scope.tenant_id in record.getMessage()
    # A tenant-wide skill changed: the tenant's other cached scopes read it on their next turn.
    for each in users:
        assert await _labels(memory, each) == ["Deliver (not bumped)"]
    assert counting.shipped() == shipped + 4


async def test_a_version_read_once_is_read_again_past_max_age_before_it_is_trusted(
    store: GraphMemoryStore, scope: MemoryScope, caplog: pytest.LogCaptureFixture
) -> None:
    """A first read may meet a write half applied (the new version, then old skills): past max_age it is read again.

    Standing for the half-applied write: the skills change without a bump right after the first read. Before
    this second read, such a read kept the old skills for recheck_every (300 s).
    """
    await _seed(store, scope)
    counting, clock = ShippedRows(store), Clock()
    memory = TurnMemory(counting, clock=clock, coalesce_window=None)
    assert await _labels(memory, scope) == ["Deliver"]
    await store.driver.execute_query(
        "MATCH (s:Skill {tenant_id: $t}) SET s.label = 'Deliver (what the write left)'", t=scope.tenant_id)
    clock.now += 5  # within max_age: the cached rules
    assert await _labels(memory, scope) == ["Deliver"]
    clock.now += 6  # past max_age: read again, and no WARNING of a forgotten bump (the first read was unconfirmed)
    with caplog.at_level(logging.INFO, logger="symfonic_graph.turn"):
        assert await _labels(memory, scope) == ["Deliver (what the write left)"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r for r in caplog.records if "differ from the first read" in r.getMessage()]
    shipped = counting.shipped()
    clock.now += 11  # confirmed now: past max_age a warm read, nothing shipped
    assert await _labels(memory, scope) == ["Deliver (what the write left)"]
    assert counting.shipped() == shipped


async def test_a_namespace_edit_without_a_bump_stays_with_its_scope(
    store: GraphMemoryStore, scope: MemoryScope, caplog: pytest.LogCaptureFixture
) -> None:
    await _seed(store, scope)
    mine, other = MemoryScope(scope.tenant_id, "mine"), MemoryScope(scope.tenant_id, "other")
    await _seed(store, mine, label="Mine")
    counting, clock = ShippedRows(store), Clock()
    memory = TurnMemory(counting, clock=clock, recheck_every=100, coalesce_window=None)
    assert await _labels(memory, mine) == ["Deliver", "Mine"]
    clock.now += 11
    assert await _labels(memory, mine) == ["Deliver", "Mine"]  # past max_age: the version confirmed (t = 11)
    clock.now += 39
    assert await _labels(memory, other) == ["Deliver"]  # first read 50 s after `mine`'s
    clock.now += 11
    assert await _labels(memory, other) == ["Deliver"]  # confirmed (t = 61)
    await store.driver.execute_query(
        "MATCH (s:Skill {tenant_id: $t, namespace: 'mine'}) SET s.label = 'Mine (not bumped)'", t=scope.tenant_id)
    clock.now += 50  # `mine` is due (100 s since its ship), `other` not (50 s; its recheck comes after 75 s at least)
    with caplog.at_level(logging.WARNING, logger="symfonic_graph.turn"):
        assert await _labels(memory, mine) == ["Deliver", "Mine (not bumped)"]
    assert any("without a catalog version bump" in r.getMessage() for r in caplog.records)
    shipped = counting.shipped()
    assert await _labels(memory, other) == ["Deliver"]
    assert counting.shipped() == shipped  # only the edited scope's own skills changed: `other` stays warm


async def test_recheck_every_defaults_and_bad_values(store: GraphMemoryStore) -> None:
    assert TurnMemory(store).recheck_every == 300.0
    assert TurnMemory(store, max_age=0).recheck_every == 0.0  # max_age 0 still reads the skills on every call
    assert TurnMemory(store, recheck_every=30).recheck_every == 30.0
    for bad in (-1, float("inf"), True, "5"):
        with pytest.raises(ValidationError, match="recheck_every"):
            TurnMemory(store, recheck_every=bad)  # type: ignore[arg-type]


async def test_an_outage_grace_counts_from_the_last_warm_read(
    store: GraphMemoryStore, scope: MemoryScope, proxied: tuple[GraphMemoryStore, TcpProxy]
) -> None:
    """A warm read confirmed the version the cached rules were shipped at: the grace counts from it."""
    await _seed(store, scope)
    through, proxy = proxied
    clock = Clock()
    memory = TurnMemory(through, clock=clock, outage_grace=60, recheck_every=1000)
    await memory.begin(scope)  # ships the skills
    clock.now += 500
    assert not (await memory.begin(scope)).stale  # a warm read: the version did not move
    await proxy.cut()
    clock.now += 65  # 565 s after the ship, 65 s after the warm read: within max_age + outage_grace (70 s)
    snapshot = await memory.begin(scope)
    assert snapshot.stale and [s.label for s in snapshot.skills] == ["Deliver"]
    clock.now += 10  # 75 s after the warm read: past the grace
    with pytest.raises(StoreUnavailableError):
        await memory.begin(scope)
