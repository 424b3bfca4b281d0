"""Isolation, model-based: random write/read sequences checked against a plain Python model.

A Hypothesis ``RuleBasedStateMachine`` seeds skills (with and without an
identifier, staged or live), sets triggers, adds facts, publishes, discards,
retracts, restores and resolves, across 24 tenant ids (several of them
prefixes or near-spellings of one another) and the namespaces None, "n1" and
"n2". Every read (``query_skills``, ``get_pending``, ``list_facts``, with and
without a ``write_id``) is compared with what the model says the scope may
see: a row it should not see is a *leak*, a row it should see but does not is
*over-filtering*. Every write aimed at another scope's node must fail with
``NotFoundError`` (a success is counted as a leak too).

Each state-machine run uses fresh tenant ids (a random per-session prefix plus
a run counter), so runs never see each other's data and a failing run replays
deterministically. Set ``SYMFONIC_RELIABILITY_SEED`` to replay a whole session.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

import neo4j
import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    NotFoundError,
    ProceduralLayer,
    ProspectiveLayer,
    SemanticLayer,
)
from tests.reliability._stats import FIGURES

pytestmark = pytest.mark.reliability

MIN_OPERATIONS = 2_000
RUN_PREFIX = f"rel-{uuid.uuid4().hex[:8]}-"

# Tenant-id suffixes: prefixes of one another, case and unicode near-spellings,
# LIKE/regex/Lucene metacharacters, quotes. Each run prepends its own prefix.
TENANT_SUFFIXES: tuple[str, ...] = (
    "p-a", "p-a2", "p-a22", "p-aa", "p-A", "p-", "p", "p-a ", "p-a%", "p-a_", "p-a.*",
    "p-a'", 'p-a"', "p-a\\", "p-é", "p-e\u0301", "p-\uff41", "p-a\u200b", "p-a2b", "p-b",
    "p-a\u2063", "p-a:Skill", "P-A", "p-a$",
)
HOT_SUFFIXES: tuple[str, ...] = ("p-a", "p-a2", "p-A", "p-aa")
NAMESPACES: tuple[str | None, ...] = (None, "n1", "n2")
IDENTIFIERS: tuple[str, ...] = ("deliver", "deliver2", "Deliver")
WRITE_ID_POOL = 4  # write ids are shared strings across tenants: "w0".."w3", then fresh ones

assert len(TENANT_SUFFIXES) >= 20

_run_counter = itertools.count()


@dataclass
class Node:
    id: str
    kind: str  # "skill" | "trigger" | "fact"
    tenant: str
    namespace: str | None
    write_id: str | None
    staged: bool
    identifier: str | None = None
    retracted: bool = False
    resolved: bool = False

    def in_scope(self, scope: MemoryScope) -> bool:
        return self.tenant == scope.tenant_id and (self.namespace is None or self.namespace == scope.namespace)

    def visible(self, scope: MemoryScope, write_id: str | None) -> bool:
        if not self.in_scope(scope) or self.retracted:
            return False
        if self.staged and (write_id is None or self.write_id != write_id):
            return False
        return not (self.kind == "trigger" and self.resolved)


class IsolationMachine(RuleBasedStateMachine):
    """The graph as seen through the public API, against a dictionary model."""

    neo4j_uri: ClassVar[str] = ""
    neo4j_auth: ClassVar[tuple[str, str]] = ("neo4j", "")
    neo4j_database: ClassVar[str | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.driver = neo4j.AsyncGraphDatabase.driver(self.neo4j_uri, auth=self.neo4j_auth)
        self.store = GraphMemoryStore(self.driver, database=self.neo4j_database)
        self.skills = ProceduralLayer(self.store)
        self.triggers = ProspectiveLayer(self.store)
        self.facts = SemanticLayer(self.store)
        prefix = f"{RUN_PREFIX}{next(_run_counter)}-"
        self.tenants = [prefix + s for s in TENANT_SUFFIXES]
        self.hot = [prefix + s for s in HOT_SUFFIXES]
        self.prefix = prefix
        self.nodes: dict[str, Node] = {}
        self.live_keys: dict[tuple[str, str | None, str], str] = {}
        self.staged_keys: dict[tuple[str, str | None, str, str], str] = {}
        self.open_writes: dict[str, set[str]] = {t: set() for t in self.tenants}
        self.closed_writes: dict[str, set[str]] = {t: set() for t in self.tenants}
        self.fresh = itertools.count(WRITE_ID_POOL)
        self.labels = itertools.count()
        FIGURES["isolation.examples"] += 1

    def teardown(self) -> None:
        try:
            self.final_sweep()
        finally:
            try:
                self.loop.run_until_complete(self.driver.close())
            finally:
                self.loop.close()

    def final_sweep(self) -> None:
        """Read every scope that holds data (and the hot tenants) with every write id it used."""
        tenants = sorted({n.tenant for n in self.nodes.values()} | set(self.hot))
        for tenant in tenants:
            write_ids: list[str | None] = [None, *sorted(self.open_writes[tenant] | self.closed_writes[tenant])]
            for namespace in NAMESPACES:
                scope = MemoryScope(tenant, namespace)
                for write_id in write_ids:
                    self._check_read("query_skills", scope, write_id, "skill",
                                     self.run(self.skills.query_skills(scope, write_id=write_id)))
                    self._check_read("get_pending", scope, write_id, "trigger",
                                     self.run(self.triggers.get_pending(scope, write_id=write_id)))
                    self._check_read("list_facts", scope, write_id, "fact",
                                     self.run(self.facts.list_facts(scope, write_id=write_id)))

    # -- helpers ----------------------------------------------------------

    def run(self, coro: Any) -> Any:
        FIGURES["isolation.operations"] += 1
        return self.loop.run_until_complete(coro)

    def _scope(self, data: st.DataObject) -> MemoryScope:
        # Mostly the hot tenants (prefixes of one another), so reads find rows; sometimes any tenant.
        tenant = data.draw(st.sampled_from(self.hot * 8 + self.tenants), label="tenant")
        namespace = data.draw(st.sampled_from(NAMESPACES), label="namespace")
        return MemoryScope(tenant, namespace)

    def _write_id_to_stage(self, data: st.DataObject, tenant: str) -> str:
        """An open write of the tenant, or a pool id it never used, or a fresh one."""
        closed = self.closed_writes[tenant]
        pool = [f"{self.prefix}w{i}" for i in range(WRITE_ID_POOL)]
        candidates = sorted(self.open_writes[tenant]) + [w for w in pool if w not in closed]
        if candidates and data.draw(st.booleans(), label="reuse write id"):
            return data.draw(st.sampled_from(candidates), label="write_id")
        return f"{self.prefix}w{next(self.fresh)}"

    def _read_write_id(self, data: st.DataObject, tenant: str) -> str | None:
        """None, one of the tenant's write ids, or one used only by other tenants."""
        own = sorted(self.open_writes[tenant] | self.closed_writes[tenant])
        foreign = sorted(
            {w for t, ws in self.open_writes.items() if t != tenant for w in ws} - set(own)
        )
        choices: list[str | None] = [None, *own, *foreign]
        return data.draw(st.sampled_from(choices), label="read write_id")

    def _target(self, data: st.DataObject, kinds: tuple[str, ...]) -> tuple[str, Node | None]:
        ids = [i for i, n in self.nodes.items() if n.kind in kinds]  # insertion order: replays draw the same
        if ids and data.draw(st.integers(0, 9), label="real id?") > 0:
            node_id = data.draw(st.sampled_from(ids), label="node_id")
            return node_id, self.nodes[node_id]
        return str(uuid.uuid4()), None

    def _leak(self, what: str) -> None:
        FIGURES["isolation.leaks"] += 1
        raise AssertionError(f"isolation leak: {what}")

    def _check_read(self, what: str, scope: MemoryScope, write_id: str | None, kind: str, rows: list[Any]) -> None:
        FIGURES["isolation.reads"] += 1
        FIGURES["isolation.rows_seen"] += len(rows)
        expected = {i for i, n in self.nodes.items() if n.kind == kind and n.visible(scope, write_id)}
        got: dict[str, Any] = {r.id: r for r in rows}
        leaked = set(got) - expected
        missing = expected - set(got)
        foreign = [r.id for r in rows if not scope.owns(r.tenant_id, r.namespace)]
        if len(got) != len(rows):
            FIGURES["isolation.leaks"] += 1
            raise AssertionError(f"{what} {scope} write_id={write_id!r} returned duplicate rows")
        if leaked or foreign:
            FIGURES["isolation.leaks"] += len(leaked | set(foreign))
            details = {i: self.nodes.get(i, "unknown to the model") for i in leaked}
            raise AssertionError(f"{what} {scope} write_id={write_id!r} leaked {details} foreign={foreign}")
        if missing:
            FIGURES["isolation.overfiltered"] += 1
            raise AssertionError(
                f"{what} {scope} write_id={write_id!r} over-filtered {[self.nodes[i] for i in missing]}"
            )

    def _expect_not_found(self, what: str, call: Any) -> None:
        try:
            self.run(call)
        except NotFoundError:
            return
        self._leak(f"{what} succeeded on a node outside the scope")

    def _drop(self, node_id: str) -> None:
        self.nodes.pop(node_id, None)

    # -- writes -----------------------------------------------------------

    @rule(data=st.data())
    def seed_skill(self, data: st.DataObject) -> None:
        self._seed(data, staged=data.draw(st.booleans(), label="staged"))

    @rule(data=st.data())
    def seed_live_skill(self, data: st.DataObject) -> None:
        self._seed(data, staged=False)

    def _seed(self, data: st.DataObject, *, staged: bool) -> None:
        scope = self._scope(data)
        identifier = data.draw(st.none() | st.sampled_from(IDENTIFIERS), label="identifier")
        write_id = self._write_id_to_stage(data, scope.tenant_id) if staged else None
        label = f"skill {next(self.labels)}"
        skill = self.run(
            self.skills.seed_authored_skill(
                scope, label=label, steps=["deliver"], source_tag="authored:reliability",
                identifier=identifier, write_id=write_id,
            )
        )
        assert (skill.tenant_id, skill.namespace, skill.label, skill.identifier) == (
            scope.tenant_id, scope.namespace, label, identifier,
        ), skill
        node = Node(skill.id, "skill", scope.tenant_id, scope.namespace, write_id, write_id is not None, identifier)
        if identifier is not None and write_id is None:
            key = (scope.tenant_id, scope.namespace, identifier)
            old = self.live_keys.get(key)
            if old is not None:
                self._drop(old)
            self.live_keys[key] = skill.id
        elif identifier is not None and write_id is not None:
            skey = (scope.tenant_id, scope.namespace, identifier, write_id)
            old = self.staged_keys.get(skey)
            if old is not None:
                self._drop(old)
            self.staged_keys[skey] = skill.id
        if write_id is not None:
            self.open_writes[scope.tenant_id].add(write_id)
        self.nodes[skill.id] = node

    @rule(data=st.data())
    def set_trigger(self, data: st.DataObject) -> None:
        scope = self._scope(data)
        staged = data.draw(st.integers(0, 2), label="staged") == 2
        write_id = self._write_id_to_stage(data, scope.tenant_id) if staged else None
        n = next(self.labels)
        trigger_id = self.run(
            self.triggers.set_trigger(scope, condition=f"condition {n}", task=f"task {n}", write_id=write_id)
        )
        if write_id is not None:
            self.open_writes[scope.tenant_id].add(write_id)
        self.nodes[trigger_id] = Node(trigger_id, "trigger", scope.tenant_id, scope.namespace, write_id,
                                      write_id is not None)

    @rule(data=st.data())
    def add_fact(self, data: st.DataObject) -> None:
        scope = self._scope(data)
        staged = data.draw(st.integers(0, 2), label="staged") == 2
        write_id = self._write_id_to_stage(data, scope.tenant_id) if staged else None
        fact_id = self.run(self.facts.add_fact(scope, f"fact {next(self.labels)}", write_id=write_id))
        if write_id is not None:
            self.open_writes[scope.tenant_id].add(write_id)
        self.nodes[fact_id] = Node(fact_id, "fact", scope.tenant_id, scope.namespace, write_id, write_id is not None)

    def _staged_of(self, scope: MemoryScope, write_id: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.staged and n.write_id == write_id and n.in_scope(scope)]

    def _closing_write_id(self, data: st.DataObject, tenant: str) -> str:
        """Usually an open write of the tenant; sometimes one only other tenants use, or an unused one."""
        own = sorted(self.open_writes[tenant])
        used_here = self.open_writes[tenant] | self.closed_writes[tenant]
        others = sorted({w for t, ws in self.open_writes.items() if t != tenant for w in ws} - used_here)
        pick = data.draw(st.integers(0, 9), label="which write")
        if own and pick < 7:
            return data.draw(st.sampled_from(own), label="write_id")
        if others and pick < 9:
            return data.draw(st.sampled_from(others), label="foreign write_id")
        return f"{self.prefix}unused-{next(self.fresh)}"

    @rule(data=st.data())
    def publish(self, data: st.DataObject) -> None:
        scope = self._scope(data)
        write_id = self._closing_write_id(data, scope.tenant_id)
        staged = self._staged_of(scope, write_id)
        published = self.run(self.store.publish(scope, write_id))
        if published > len(staged):
            self._leak(f"publish({scope}, {write_id!r}) published {published} nodes, expected {len(staged)}")
        assert published == len(staged), (scope, write_id, published, staged)
        for node in staged:
            node.staged = False
            if node.kind == "skill" and node.identifier is not None:
                key = (node.tenant, node.namespace, node.identifier)
                old = self.live_keys.get(key)
                if old is not None and old != node.id:
                    self._drop(old)
                self.live_keys[key] = node.id
                self.staged_keys.pop((*key, write_id), None)
        self.open_writes[scope.tenant_id].discard(write_id)
        self.closed_writes[scope.tenant_id].add(write_id)

    @rule(data=st.data())
    def discard(self, data: st.DataObject) -> None:
        scope = self._scope(data)
        write_id = self._closing_write_id(data, scope.tenant_id)
        staged = self._staged_of(scope, write_id)
        discarded = self.run(self.store.discard(scope, write_id))
        if discarded > len(staged):
            self._leak(f"discard({scope}, {write_id!r}) deleted {discarded} nodes, expected {len(staged)}")
        assert discarded == len(staged), (scope, write_id, discarded, staged)
        for node in staged:
            self._drop(node.id)
            if node.identifier is not None:
                self.staged_keys.pop((node.tenant, node.namespace, node.identifier, write_id), None)
        self.open_writes[scope.tenant_id].discard(write_id)
        self.closed_writes[scope.tenant_id].add(write_id)

    @rule(data=st.data())
    def retract(self, data: st.DataObject) -> None:
        scope = self._scope(data)
        node_id, node = self._target(data, ("skill", "trigger", "fact"))
        if node is None or not node.in_scope(scope):
            self._expect_not_found(f"retract({scope}, {node})", self.store.retract(scope, node_id, reason="fuzz"))
            return
        if node.staged:
            return  # retracting an unpublished node: not specified, not exercised here
        self.run(self.store.retract(scope, node_id, reason="fuzz"))
        node.retracted = True

    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        scope = self._scope(data)
        node_id, node = self._target(data, ("skill", "trigger", "fact"))
        if node is None or not node.in_scope(scope):
            self._expect_not_found(f"restore({scope}, {node})", self.store.restore(scope, node_id))
            return
        if node.staged:
            return
        self.run(self.store.restore(scope, node_id))
        node.retracted = False

    @precondition(lambda self: any(n.kind == "trigger" for n in self.nodes.values()))
    @rule(data=st.data())
    def resolve_trigger(self, data: st.DataObject) -> None:
        node_id, node = self._target(data, ("trigger",))
        scope = self._scope(data)
        if node is not None and data.draw(st.booleans(), label="own scope"):
            scope = MemoryScope(node.tenant, node.namespace)
        if node is None or not node.in_scope(scope):
            self._expect_not_found(f"resolve_trigger({scope}, {node})", self.triggers.resolve_trigger(scope, node_id))
            return
        if node.staged or node.retracted or node.resolved:
            return  # not specified for those states
        self.run(self.triggers.resolve_trigger(scope, node_id))
        node.resolved = True

    # -- reads ------------------------------------------------------------

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        scope = self._scope(data)
        write_id = self._read_write_id(data, scope.tenant_id)
        rows = self.run(self.skills.query_skills(scope, write_id=write_id))
        self._check_read("query_skills", scope, write_id, "skill", rows)
        pending = self.run(self.triggers.get_pending(scope, write_id=write_id))
        self._check_read("get_pending", scope, write_id, "trigger", pending)
        facts = self.run(self.facts.list_facts(scope, write_id=write_id))
        self._check_read("list_facts", scope, write_id, "fact", facts)

    @rule(data=st.data())
    def read_neighbours(self, data: st.DataObject) -> None:
        """Read every hot tenant (prefixes of one another) in one namespace."""
        namespace = data.draw(st.sampled_from(NAMESPACES), label="namespace")
        for tenant in self.hot:
            scope = MemoryScope(tenant, namespace)
            write_id = self._read_write_id(data, tenant)
            rows = self.run(self.skills.query_skills(scope, write_id=write_id))
            self._check_read("query_skills", scope, write_id, "skill", rows)
            pending = self.run(self.triggers.get_pending(scope, write_id=write_id))
            self._check_read("get_pending", scope, write_id, "trigger", pending)

    @invariant()
    def count_step(self) -> None:  # runs after every step: counts them for the summary
        FIGURES["isolation.steps"] += 1


def test_isolation_state_machine(neo4j_settings: Any, _schema: None) -> None:
    run_seed = int(os.environ.get("SYMFONIC_RELIABILITY_SEED") or random.randrange(2**32))
    for name in ("isolation.operations", "isolation.reads", "isolation.leaks", "isolation.overfiltered"):
        FIGURES[name] += 0

    class Machine(IsolationMachine):
        neo4j_uri = neo4j_settings.uri
        neo4j_auth = (neo4j_settings.user, neo4j_settings.password)
        neo4j_database = neo4j_settings.database

    before = FIGURES["isolation.operations"]
    print(f"isolation state machine: seed={run_seed} (replay with SYMFONIC_RELIABILITY_SEED={run_seed})")
    try:
        run_state_machine_as_test(
            seed(run_seed)(Machine),
            settings=settings(
                max_examples=40,
                stateful_step_count=60,
                deadline=None,
                database=None,
                print_blob=True,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        print(
            f"isolation summary: seed={run_seed} operations={FIGURES['isolation.operations']} "
            f"steps={FIGURES['isolation.steps']} reads={FIGURES['isolation.reads']} "
            f"leaks={FIGURES['isolation.leaks']} over-filtered={FIGURES['isolation.overfiltered']}"
        )
    assert FIGURES["isolation.operations"] - before >= MIN_OPERATIONS, (
        f"only {FIGURES['isolation.operations'] - before} operations; raise max_examples or stateful_step_count"
    )
    assert FIGURES["isolation.leaks"] == 0
    assert FIGURES["isolation.overfiltered"] == 0
