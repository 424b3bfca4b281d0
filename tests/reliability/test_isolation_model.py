"""Isolation and write authority, model-based: random write/read sequences checked against a plain Python model.

A Hypothesis ``RuleBasedStateMachine`` seeds skills (with and without an
identifier, staged or live, approved or proposed as drafts, each with its own
preconditions), sets triggers (with and without an identifier), adds facts,
publishes, discards, folds, retracts, restores, prunes, approves, rejects and
resolves, across 24 tenant ids (several of them prefixes or near-spellings of
one another) and the namespaces None, "n1" and "n2". Every read
(``query_skills`` with and without drafts, ``get_pending``, ``list_facts``,
with and without a ``write_id``) is compared with what the model says the
scope may see, content and preconditions included: a row it should not see is
a *leak*, a row it should see but does not is *over-filtering*.

Write authority is part of the model:

- a write aimed at a node the scope does not see fails with ``NotFoundError``;
- a write from a namespace scope aimed at a tenant-wide node it sees
  (retract, restore, approve, reject, resolve) fails with ``AuthorityError``
  naming the owning scope, and changes nothing (read back at once);
- ``publish``/``discard``/``prune`` touch only what was staged or retracted in
  exactly their scope: the other scopes of the tenant keep theirs;
- hand-seeded foreign edges (plain Cypher: a ``REQUIRES`` edge from one
  tenant's skill to another tenant's precondition) change no read except that
  the skill shows one unreadable entry per such edge, which blocks its action
  and carries none of the other tenant's content; the
  other tenant's precondition survives every delete path (re-seed, prune,
  discard, fold, approve of a draft): after each write the preconditions of
  the tenants involved are counted against the model;
- hand-seeded foreign keys (a ``symfonic_key`` naming another scope, copied
  onto a skill or trigger of another tenant, or of another namespace of the
  same tenant): a write of that key by the scope it names fails with
  ``AuthorityError`` and writes nothing, on every path (live seed at once;
  staged seed at staging or at publish; draft at proposal or at approval);
  the node holding the key is unchanged.

Each state-machine run uses fresh tenant ids (a random per-session prefix plus
a run counter), so runs never see each other's data and a failing run replays
deterministically; teardown deletes the run's nodes. Set
``SYMFONIC_RELIABILITY_SEED`` to replay a whole session.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace
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
    TurnMemory,
)
from symfonic_graph.errors import AuthorityError
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.shape.scope import describe_scope
from tests.reliability._stats import FIGURES, SCALE

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
HOT_SUFFIXES: tuple[str, ...] = ("p-a", "p-a2", "p-A", "p-aa", "p-é")
NAMESPACES: tuple[str | None, ...] = (None, "n1", "n2")
IDENTIFIERS: tuple[str, ...] = ("deliver", "deliver2", "Deliver")
WRITE_ID_POOL = 4  # write ids are shared strings across tenants: "w0".."w3", then fresh ones

assert len(TENANT_SUFFIXES) >= 20

COUNTERS = (
    "isolation.operations", "isolation.reads", "isolation.leaks", "isolation.overfiltered",
    "isolation.namespace_writes", "isolation.cross_scope_closes", "isolation.authority_refusals",
    "isolation.foreign_edges", "isolation.precondition_censuses", "isolation.foreign_keys",
    "isolation.foreign_key_writes", "isolation.coalesced_turns",
)

_run_counter = itertools.count()

Key = tuple[str, str, str | None, str]  # (kind, tenant, namespace, identifier): one symfonic_key


@dataclass
class Node:
    id: str
    kind: str  # "skill" | "trigger" | "fact"
    tenant: str
    namespace: str | None
    write_id: str | None
    staged: bool  # staged and not yet published: hidden from readers without its write id
    identifier: str | None = None
    retracted: bool = False
    resolved: bool = False
    status: str = "approved"  # skills: "approved" | "draft" | "rejected"
    content: str = ""  # skill label, trigger task, fact text
    preconditions: tuple[str, ...] = ()  # skills: the precondition tools, in position order
    draft_key: bool = False  # a draft of an identifier, waiting beside its live skill until approved
    foreign_key: Key | None = None  # the hand-copied symfonic_key this node holds, naming another scope

    @property
    def owner(self) -> MemoryScope:
        return MemoryScope(self.tenant, self.namespace)

    def in_scope(self, scope: MemoryScope) -> bool:
        return self.tenant == scope.tenant_id and (self.namespace is None or self.namespace == scope.namespace)

    def owned_by(self, scope: MemoryScope) -> bool:
        return self.tenant == scope.tenant_id and self.namespace == scope.namespace

    def visible(self, scope: MemoryScope, write_id: str | None, drafts: bool = False) -> bool:
        if not self.in_scope(scope) or self.retracted:
            return False
        if self.staged and (write_id is None or self.write_id != write_id):
            return False
        if self.kind == "skill":
            return self.status == "approved" or (drafts and self.status == "draft")
        return not (self.kind == "trigger" and self.resolved)


@dataclass
class Refusal:
    """What a refused write must raise: ``AuthorityError`` (optionally naming something), else ``NotFoundError``."""

    authority: bool
    names: tuple[str, ...] = ()
    not_found_ok: bool = False  # the node is also hidden from writes (staged or retracted): either error will do


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
        # One long-lived TurnMemory, as a fleet process holds: coalescing on (the default), catalogs cached by
        # version, warm reads, stale re-reads that reuse identical rows. Every library write bumps the version,
        # so its snapshots must match the model exactly, like the layer reads.
        self.memory = TurnMemory(self.store)
        prefix = f"{RUN_PREFIX}{next(_run_counter)}-"
        self.tenants = [prefix + s for s in TENANT_SUFFIXES]
        self.hot = [prefix + s for s in HOT_SUFFIXES]
        self.prefix = prefix
        self.nodes: dict[str, Node] = {}
        # Nodes a publish replaced: hidden from every read, deleted by the fold (or a prune, when retracted).
        self.ghosts: dict[str, Node] = {}
        self.live_keys: dict[Key, str] = {}  # identifier key -> the node holding it
        self.staged_keys: dict[tuple[Key, str], str] = {}  # (key, write id) -> the staged node
        self.foreign_keys: dict[Key, str] = {}  # key -> the node of another scope it was copied onto
        self.open_writes: dict[MemoryScope, set[str]] = {}  # write ids with staged nodes, by exact scope
        self.published: set[tuple[str, str | None, str]] = set()  # listed (tenant, namespace, write id), until folded
        self.used_writes: dict[str, set[str]] = {t: set() for t in self.tenants}
        self.edge_tenants: set[str] = set()  # tenants at either end of a hand-seeded foreign edge
        self.edge_sources: set[str] = set()  # skills given a hand-seeded edge to another tenant's precondition
        self.fresh = itertools.count(WRITE_ID_POOL)
        self.labels = itertools.count()
        FIGURES["isolation.examples"] += 1

    def teardown(self) -> None:
        try:
            self.final_sweep()
        finally:
            try:
                self.loop.run_until_complete(self._delete_run())
                self.loop.run_until_complete(self.driver.close())
            finally:
                self.loop.close()

    def final_sweep(self) -> None:
        """Read every scope that holds data (and the hot tenants) with every write id it used; count preconditions."""
        tenants = sorted({n.tenant for n in self.nodes.values()} | set(self.hot))
        for tenant in tenants:
            write_ids: list[str | None] = [None, *sorted(self.used_writes[tenant])]
            for namespace in NAMESPACES:
                scope = MemoryScope(tenant, namespace)
                for write_id in write_ids:
                    self._read_all(scope, write_id, drafts=write_id is None)
        for tenant in sorted({n.tenant for n in [*self.nodes.values(), *self.ghosts.values()]} | self.edge_tenants):
            self._census(tenant)

    async def _delete_run(self) -> None:
        """Leave nothing behind: the run's tenants are its own (fresh prefix)."""
        for label in ("Skill", "Precondition", "Trigger", "Fact", "SymfonicCatalog"):
            await self.driver.execute_query(
                f"MATCH (n:{label}) WHERE n.tenant_id STARTS WITH $prefix DETACH DELETE n",
                prefix=self.prefix, database_=self.neo4j_database,
            )

    # -- helpers ----------------------------------------------------------

    def run(self, coro: Any) -> Any:
        FIGURES["isolation.operations"] += 1
        return self.loop.run_until_complete(coro)

    def cypher(self, text: str, **params: Any) -> list[dict[str, Any]]:
        FIGURES["isolation.operations"] += 1
        records, _, _ = self.loop.run_until_complete(
            self.driver.execute_query(text, params, database_=self.neo4j_database)
        )
        return [r.data() for r in records]

    def _scope(self, data: st.DataObject) -> MemoryScope:
        # Mostly the hot tenants (prefixes of one another), so reads find rows; sometimes any tenant.
        tenant = data.draw(st.sampled_from(self.hot * 8 + self.tenants), label="tenant")
        namespace = data.draw(st.sampled_from(NAMESPACES), label="namespace")
        return MemoryScope(tenant, namespace)

    def _scope_near(self, data: st.DataObject, node: Node | None) -> MemoryScope:
        """A scope for a write aimed at ``node``: its owner, another namespace of its tenant, or any scope."""
        pick = data.draw(st.sampled_from(("sibling", "owner", "any", "sibling")), label="scope near the node")
        if node is None or pick == "any":
            return self._scope(data)
        if pick == "owner":
            return node.owner
        siblings = [ns for ns in NAMESPACES if ns != node.namespace]
        return MemoryScope(node.tenant, data.draw(st.sampled_from(siblings), label="sibling namespace"))

    def _blocked(self, scope: MemoryScope, write_id: str) -> bool:
        """Staging under ``write_id`` is refused while this scope's, or the tenant-wide, publication is listed."""
        t = scope.tenant_id
        return (t, scope.namespace, write_id) in self.published or (t, None, write_id) in self.published

    def _write_id_to_stage(self, data: st.DataObject, scope: MemoryScope) -> str:
        """An open write of the scope, or a pool id it may stage under, or a fresh one."""
        pool = [f"{self.prefix}w{i}" for i in range(WRITE_ID_POOL)]
        candidates = sorted(self.open_writes.get(scope, set()) | set(pool))
        candidates = [w for w in candidates if not self._blocked(scope, w)]
        if candidates and data.draw(st.booleans(), label="reuse write id"):
            return data.draw(st.sampled_from(candidates), label="write_id")
        return f"{self.prefix}w{next(self.fresh)}"

    def _staging(self, scope: MemoryScope, write_id: str | None) -> None:
        if write_id is not None:
            self.open_writes.setdefault(scope, set()).add(write_id)
            self.used_writes[scope.tenant_id].add(write_id)

    def _read_write_id(self, data: st.DataObject, tenant: str) -> str | None:
        """None, one of the tenant's write ids, or one used only by other tenants."""
        own = sorted(self.used_writes[tenant])
        foreign = sorted({w for t, ws in self.used_writes.items() if t != tenant for w in ws} - set(own))
        choices: list[str | None] = [None, *own, *foreign]
        return data.draw(st.sampled_from(choices), label="read write_id")

    def _target(self, data: st.DataObject, kinds: tuple[str, ...]) -> tuple[str, Node | None]:
        """A node of the model (often a tenant-wide one, the target of namespace writes), or an unknown id."""
        ids = [i for i, n in self.nodes.items() if n.kind in kinds]  # insertion order: replays draw the same
        wide = [i for i in ids if self.nodes[i].namespace is None]
        if not ids or data.draw(st.integers(0, 9), label="unknown id?") == 9:
            return str(uuid.uuid4()), None
        pool = wide if wide and data.draw(st.booleans(), label="a tenant-wide node?") else ids
        node_id = data.draw(st.sampled_from(pool), label="node_id")
        return node_id, self.nodes[node_id]

    def _leak(self, what: str) -> None:
        FIGURES["isolation.leaks"] += 1
        raise AssertionError(f"isolation leak: {what}")

    def _holder(self, key: Key) -> str | None:
        """The node that holds ``key`` in the graph, by the model."""
        if key in self.foreign_keys:
            return self.foreign_keys[key]
        node_id = self.live_keys.get(key)
        return node_id if node_id in self.nodes else None

    @staticmethod
    def _key_of(node: Node) -> Key | None:
        if node.identifier is None or node.kind == "fact":
            return None
        return (node.kind, node.tenant, node.namespace, node.identifier)

    # -- checks -----------------------------------------------------------

    def _check_read(
        self, what: str, scope: MemoryScope, write_id: str | None, kind: str, rows: list[Any], drafts: bool = False
    ) -> None:
        FIGURES["isolation.reads"] += 1
        FIGURES["isolation.rows_seen"] += len(rows)
        expected = {i for i, n in self.nodes.items() if n.kind == kind and n.visible(scope, write_id, drafts)}
        got: dict[str, Any] = {r.id: r for r in rows}
        leaked = set(got) - expected
        missing = expected - set(got)
        foreign = [r.id for r in rows if not scope.sees(r.tenant_id, r.namespace)]
        context = f"{what} {scope} write_id={write_id!r}" + (" include_drafts" if drafts else "")
        if len(got) != len(rows):
            FIGURES["isolation.leaks"] += 1
            raise AssertionError(f"{context} returned duplicate rows")
        if leaked or foreign:
            FIGURES["isolation.leaks"] += len(leaked | set(foreign))
            details = {i: self.nodes.get(i) or self.ghosts.get(i) or "unknown to the model" for i in leaked}
            raise AssertionError(f"{context} leaked {details} foreign={foreign}")
        if missing:
            FIGURES["isolation.overfiltered"] += 1
            raise AssertionError(f"{context} over-filtered {[self.nodes[i] for i in missing]}")
        for row in rows:
            node = self.nodes[row.id]
            if kind == "skill":
                items = tuple(row.precondition or ())
                # a foreign edge fails closed: one unreadable entry that carries none of the other tenant's content
                blind = [item for item in items if isinstance(item, dict) and set(item) == {"unreadable"}]
                if blind and row.id not in self.edge_sources:
                    raise AssertionError(f"{context}: {row.id} reads unreadable entries {blind} with no foreign edge")
                for item in blind:
                    if "pre_" in str(item["unreadable"]):
                        FIGURES["isolation.leaks"] += 1
                        raise AssertionError(f"{context}: {row.id} shows another tenant's precondition: {item}")
                items = tuple(item for item in items if item not in blind)
                seen = (row.tenant_id, row.namespace, row.label, row.status, items)
                want = (node.tenant, node.namespace, node.content, node.status, node.preconditions)
            elif kind == "trigger":
                seen, want = (row.tenant_id, row.namespace, row.task), (node.tenant, node.namespace, node.content)
            else:
                seen, want = (row.tenant_id, row.namespace, row.text), (node.tenant, node.namespace, node.content)
            if seen != want:
                if kind == "skill" and set(seen[4]) - set(want[4]):
                    FIGURES["isolation.leaks"] += 1  # a precondition the skill does not own (a foreign edge)
                raise AssertionError(f"{context}: {row.id} reads {seen}, the model says {want}")

    def _read_all(self, scope: MemoryScope, write_id: str | None, *, drafts: bool = False) -> None:
        self._check_read("query_skills", scope, write_id, "skill",
                         self.run(self.skills.query_skills(scope, write_id=write_id, include_drafts=drafts)), drafts)
        self._check_read("get_pending", scope, write_id, "trigger",
                         self.run(self.triggers.get_pending(scope, write_id=write_id)))
        self._check_read("list_facts", scope, write_id, "fact",
                         self.run(self.facts.list_facts(scope, write_id=write_id)))

    def _read_back(self, node: Node) -> None:
        """Read the node's own scope at once (with its write id while staged): a refused write changed nothing."""
        write_id = node.write_id if node.staged else None
        scope = node.owner
        if node.kind == "skill":
            rows = self.run(self.skills.query_skills(scope, write_id=write_id, include_drafts=True))
            self._check_read("query_skills", scope, write_id, "skill", rows, True)
        elif node.kind == "trigger":
            self._check_read("get_pending", scope, write_id, "trigger",
                             self.run(self.triggers.get_pending(scope, write_id=write_id)))
        else:
            self._check_read("list_facts", scope, write_id, "fact",
                             self.run(self.facts.list_facts(scope, write_id=write_id)))

    def _census(self, tenant: str) -> None:
        """Each precondition of the tenant's skills (live, staged, draft, or replaced, not yet folded) exists, once."""
        FIGURES["isolation.precondition_censuses"] += 1
        want = Counter(tool for n in [*self.nodes.values(), *self.ghosts.values()]
                       if n.kind == "skill" and n.tenant == tenant for tool in n.preconditions)
        rows = self.cypher("MATCH (p:Precondition) WHERE p.tenant_id = $t RETURN p.tool AS tool", t=tenant)
        got = Counter(r["tool"] for r in rows)
        if got != want:
            raise AssertionError(
                f"preconditions of tenant {tenant!r}: missing {dict(want - got)}, unexpected {dict(got - want)}"
            )

    def _after_write(self) -> None:
        """Foreign edges must not let any write delete or orphan a precondition: count them for the tenants involved."""
        for tenant in sorted(self.edge_tenants):
            self._census(tenant)

    def _expect_refusal(self, what: str, call: Callable[[], Awaitable[Any]], refusal: Refusal) -> None:
        """Run a write that must be refused as ``refusal`` says."""
        try:
            self.run(call())
        except AuthorityError as exc:
            if not refusal.authority:
                raise AssertionError(f"{what}: AuthorityError, expected NotFoundError: {exc}") from exc
            missing = [name for name in refusal.names if name not in str(exc)]
            assert not missing, f"{what}: the AuthorityError does not name {missing}: {exc}"
            FIGURES["isolation.authority_refusals"] += 1
            return
        except NotFoundError as exc:
            if refusal.authority and not refusal.not_found_ok:
                raise AssertionError(f"{what}: NotFoundError, expected AuthorityError: {exc}") from exc
            return
        except Exception as exc:
            expected = "AuthorityError" if refusal.authority else "NotFoundError"
            raise AssertionError(f"{what}: {type(exc).__name__}, expected {expected}: {exc}") from exc
        self._leak(f"{what} succeeded on a node the scope does not own")

    def _refusal_for(self, node: Node | None, scope: MemoryScope, *, hidden_from_writes: bool) -> Refusal | None:
        """How a write of ``scope`` aimed at ``node`` must be refused, or None when the scope owns the node."""
        if node is None or not node.in_scope(scope):
            return Refusal(authority=False)
        if node.owned_by(scope):
            return None
        FIGURES["isolation.namespace_writes"] += 1
        return Refusal(authority=True, names=(describe_scope(node.owner), "Nothing changed"),
                       not_found_ok=hidden_from_writes)

    def _drop(self, node_id: str) -> Node | None:
        node = self.nodes.pop(node_id, None) or self.ghosts.pop(node_id, None)
        if node is not None and node.foreign_key is not None:
            self.foreign_keys.pop(node.foreign_key, None)
        return node

    def _replace_holder(self, key: Key, new_id: str, *, ghost: bool) -> None:
        """``new_id`` takes ``key`` over from the node of the same scope that held it (made a ghost, or deleted)."""
        old = self._holder(key)
        if old is not None and old != new_id:
            node = self._drop(old)
            if ghost and node is not None:
                self.ghosts[old] = node
        self.live_keys[key] = new_id

    # -- writes -----------------------------------------------------------

    @rule(data=st.data())
    def seed_skill(self, data: st.DataObject) -> None:
        self._seed(data, staged=data.draw(st.booleans(), label="staged"))

    @rule(data=st.data())
    def seed_live_skill(self, data: st.DataObject) -> None:
        self._seed(data, staged=False)

    @rule(data=st.data())
    def propose_skill(self, data: st.DataObject) -> None:
        self._seed(data, staged=False, draft=True)

    def _seed(
        self, data: st.DataObject, *, staged: bool, draft: bool = False, target: tuple[MemoryScope, str] | None = None
    ) -> Node | None:
        """Seed (or propose) one skill, in a drawn scope or in ``target`` (a scope and an identifier)."""
        if target is None:
            scope = self._scope(data)
            identifier = data.draw(st.none() | st.sampled_from(IDENTIFIERS), label="identifier")
        else:
            scope, identifier = target
        write_id = self._write_id_to_stage(data, scope) if staged else None
        n = next(self.labels)
        label = f"skill {n}"
        tools = tuple(f"pre_{n}_{i}" for i in range(data.draw(st.integers(0, 2), label="preconditions")))
        key: Key | None = None if identifier is None else ("skill", scope.tenant_id, scope.namespace, identifier)
        held = key is not None and key in self.foreign_keys
        kwargs: dict[str, Any] = dict(label=label, steps=["deliver"], identifier=identifier,
                                      precondition=list(tools) or None)
        if draft:
            call = partial(self.skills.propose_skill, scope, source_tag="reliability", **kwargs)
        else:
            call = partial(self.skills.seed_authored_skill, scope, source_tag="authored:reliability",
                           write_id=write_id, **kwargs)
        if held:
            FIGURES["isolation.foreign_key_writes"] += 1
            assert key is not None
            holder = self.nodes[self.foreign_keys[key]]
            if not draft and write_id is None:  # takes the key at once: refused at once
                self._expect_refusal(f"seed {key} held by {holder}", call,
                                     Refusal(authority=True, names=(holder.id, repr(holder.tenant))))
                self._read_back(holder)
                self._after_write()
                return None
            try:  # a staged write or a draft may be refused now, or when it takes the key (publish, approve)
                skill = self.run(call())
            except AuthorityError:
                FIGURES["isolation.authority_refusals"] += 1
                self._read_back(holder)
                self._after_write()
                return None
        else:
            skill = self.run(call())
        status = "draft" if draft else "approved"
        assert (skill.tenant_id, skill.namespace, skill.label, skill.identifier, skill.status) == (
            scope.tenant_id, scope.namespace, label, identifier, status,
        ), skill
        node = Node(skill.id, "skill", scope.tenant_id, scope.namespace, write_id, write_id is not None, identifier,
                    status=status, content=label, preconditions=tools, draft_key=draft and identifier is not None)
        self._place(node, key)
        self._staging(scope, write_id)
        self._after_write()
        return node

    def _place(self, node: Node, key: Key | None) -> None:
        """Record a written skill or trigger: a key the scope already holds is replaced in place (same id)."""
        if key is not None and node.write_id is None and not node.draft_key:
            old = self._holder(key)
            assert old is None or old == node.id, f"{key} replaced {old}, but the write returned {node.id}"
            self.live_keys[key] = node.id
        elif key is not None and node.write_id is not None:
            old_staged = self.staged_keys.get((key, node.write_id))
            assert old_staged is None or old_staged == node.id, (key, node.write_id, old_staged, node.id)
            self.staged_keys[(key, node.write_id)] = node.id
        self.nodes[node.id] = node

    @rule(data=st.data())
    def set_trigger(self, data: st.DataObject) -> None:
        self._set_trigger(data, staged=data.draw(st.integers(0, 2), label="staged") == 2)

    def _set_trigger(
        self, data: st.DataObject, *, staged: bool, target: tuple[MemoryScope, str] | None = None
    ) -> Node | None:
        """Set one trigger, in a drawn scope or in ``target`` (a scope and an identifier)."""
        if target is None:
            scope = self._scope(data)
            identifier = data.draw(st.none() | st.sampled_from(IDENTIFIERS), label="identifier")
        else:
            scope, identifier = target
        write_id = self._write_id_to_stage(data, scope) if staged else None
        key: Key | None = None if identifier is None else ("trigger", scope.tenant_id, scope.namespace, identifier)
        n = next(self.labels)
        call = partial(self.triggers.set_trigger, scope, condition=f"condition {n}", task=f"task {n}",
                       identifier=identifier, write_id=write_id)
        if key is not None and key in self.foreign_keys:
            FIGURES["isolation.foreign_key_writes"] += 1
            holder = self.nodes[self.foreign_keys[key]]
            if write_id is None:
                self._expect_refusal(f"set_trigger {key} held by {holder}", call,
                                     Refusal(authority=True, names=(holder.id, repr(holder.tenant))))
                self._read_back(holder)
                return None
            try:  # a staged write may be refused now, or when it takes the key (publish)
                trigger_id = self.run(call())
            except AuthorityError:
                FIGURES["isolation.authority_refusals"] += 1
                self._read_back(holder)
                return None
        else:
            trigger_id = self.run(call())
        node = Node(trigger_id, "trigger", scope.tenant_id, scope.namespace, write_id, write_id is not None,
                    identifier, content=f"task {n}")
        self._place(node, key)
        self._staging(scope, write_id)
        return node

    @rule(data=st.data())
    def add_fact(self, data: st.DataObject) -> None:
        scope = self._scope(data)
        staged = data.draw(st.integers(0, 2), label="staged") == 2
        write_id = self._write_id_to_stage(data, scope) if staged else None
        text = f"fact {next(self.labels)}"
        fact_id = self.run(self.facts.add_fact(scope, text, write_id=write_id))
        self.nodes[fact_id] = Node(fact_id, "fact", scope.tenant_id, scope.namespace, write_id, write_id is not None,
                                   content=text)
        self._staging(scope, write_id)

    def _staged_of(self, scope: MemoryScope, write_id: str) -> list[Node]:
        """What ``publish``/``discard(scope, write_id)`` act on: staged in exactly that scope."""
        return [n for n in self.nodes.values() if n.staged and n.write_id == write_id and n.owned_by(scope)]

    def _count_cross_scope(self, scope: MemoryScope, matches: list[Node]) -> None:
        """A close or prune while another scope of the tenant has matching nodes: those must stay as they are."""
        if any(not n.owned_by(scope) and n.tenant == scope.tenant_id for n in matches):
            FIGURES["isolation.cross_scope_closes"] += 1

    def _closing_write_id(self, data: st.DataObject, scope: MemoryScope) -> str:
        """Usually an open write of the scope or of a sibling scope; sometimes another tenant's, or an unused one."""
        own = sorted(self.open_writes.get(scope, set()))
        siblings = sorted({w for s, ws in self.open_writes.items()
                           if s.tenant_id == scope.tenant_id and s != scope for w in ws} - set(own))
        others = sorted({w for s, ws in self.open_writes.items() if s.tenant_id != scope.tenant_id for w in ws})
        pick = data.draw(st.integers(0, 9), label="which write")
        if own and pick < 5:
            return data.draw(st.sampled_from(own), label="write_id")
        if siblings and pick < 8:
            return data.draw(st.sampled_from(siblings), label="sibling write_id")
        if others and pick < 9:
            return data.draw(st.sampled_from(others), label="foreign write_id")
        return f"{self.prefix}unused-{next(self.fresh)}"

    def _closing(self, data: st.DataObject) -> tuple[MemoryScope, str]:
        """A scope and write id to publish or discard: often an open write, from its own scope or a sibling one."""
        opened = sorted((s.tenant_id, s.namespace or "", w) for s, ws in self.open_writes.items() for w in ws)
        if opened and data.draw(st.booleans(), label="close an open write"):
            tenant, _, write_id = data.draw(st.sampled_from(opened), label="open write")
            return MemoryScope(tenant, data.draw(st.sampled_from(NAMESPACES), label="namespace")), write_id
        scope = self._scope(data)
        return scope, self._closing_write_id(data, scope)

    @rule(data=st.data())
    def publish(self, data: st.DataObject) -> None:
        self._publish(*self._closing(data))

    def _publish(self, scope: MemoryScope, write_id: str) -> None:
        staged = self._staged_of(scope, write_id)
        self._count_cross_scope(scope, [n for n in self.nodes.values() if n.staged and n.write_id == write_id])
        takes = [(n, k) for n in staged if (k := self._key_of(n)) is not None]
        held = [(n, k) for n, k in takes if k in self.foreign_keys]
        if held:  # the write would take a key another scope's node holds: refused whole, nothing published
            FIGURES["isolation.foreign_key_writes"] += 1
            node, key = held[0]
            holder = self.nodes[self.foreign_keys[key]]
            self._expect_refusal(f"publish({scope}, {write_id!r}) of {node}, whose key {holder} holds",
                                 partial(self.store.publish, scope, write_id), Refusal(authority=True))
            self._read_back(holder)
            self._read_back(node)
            self._after_write()
            return
        published = self.run(self.store.publish(scope, write_id))
        if published > len(staged):
            self._leak(f"publish({scope}, {write_id!r}) published {published} nodes, expected {len(staged)}")
        assert published == len(staged), (scope, write_id, published, staged)
        for node, key in takes:
            self._replace_holder(key, node.id, ghost=True)
            self.staged_keys.pop((key, write_id), None)
        for node in staged:
            node.staged = False
        if staged:
            self.published.add((scope.tenant_id, scope.namespace, write_id))
        self.open_writes.get(scope, set()).discard(write_id)
        self._after_write()

    @rule(data=st.data())
    def discard(self, data: st.DataObject) -> None:
        scope, write_id = self._closing(data)
        staged = self._staged_of(scope, write_id)
        self._count_cross_scope(scope, [n for n in self.nodes.values() if n.staged and n.write_id == write_id])
        discarded = self.run(self.store.discard(scope, write_id))
        if discarded > len(staged):
            self._leak(f"discard({scope}, {write_id!r}) deleted {discarded} nodes, expected {len(staged)}")
        assert discarded == len(staged), (scope, write_id, discarded, staged)
        for node in staged:
            self._drop(node.id)
            if (key := self._key_of(node)) is not None:
                self.staged_keys.pop((key, write_id), None)
        self.open_writes.get(scope, set()).discard(write_id)
        self._after_write()

    @rule(data=st.data())
    def fold(self, data: st.DataObject) -> None:
        """Fold the tenant's publications now: replaced nodes go, with their preconditions (of the same tenant only)."""
        scope = self._scope(data)
        self.run(self.store.fold_published(scope, settle_seconds=0))
        for node_id in [i for i, n in self.ghosts.items() if n.tenant == scope.tenant_id]:
            self._drop(node_id)
        self.published = {p for p in self.published if p[0] != scope.tenant_id}
        self._after_write()

    @rule(data=st.data())
    def prune(self, data: st.DataObject) -> None:
        retracted = [n for n in [*self.nodes.values(), *self.ghosts.values()] if n.retracted]
        if retracted and data.draw(st.booleans(), label="near a retracted node"):
            tenant = data.draw(st.sampled_from(sorted({n.tenant for n in retracted})), label="tenant")
            scope = MemoryScope(tenant, data.draw(st.sampled_from(NAMESPACES), label="namespace"))
        else:
            scope = self._scope(data)
        mine = [n for n in retracted if n.owned_by(scope)]
        self._count_cross_scope(scope, retracted)
        pruned = self.run(self.store.prune(scope, older_than_seconds=0))
        if pruned > len(mine):
            self._leak(f"prune({scope}) deleted {pruned} nodes, expected {len(mine)}")
        assert pruned == len(mine), (scope, pruned, mine)
        for node in mine:
            self._drop(node.id)
        self._after_write()

    @rule(data=st.data())
    def retract(self, data: st.DataObject) -> None:
        self._marker(data, retract=True)

    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        self._marker(data, retract=False)

    def _marker(self, data: st.DataObject, *, retract: bool) -> None:
        node_id, node = self._target(data, ("skill", "trigger", "fact"))
        scope = self._scope_near(data, node)
        call = partial(self.store.retract, scope, node_id, reason="fuzz") if retract else partial(
            self.store.restore, scope, node_id)
        what = f"{'retract' if retract else 'restore'}({scope}, {node})"
        refusal = self._refusal_for(node, scope, hidden_from_writes=False)
        if refusal is not None:
            self._expect_refusal(what, call, refusal)
            if node is not None:
                self._read_back(node)
            return
        assert node is not None
        if node.staged:
            return  # retracting an unpublished node: not specified, not exercised here
        self.run(call())
        node.retracted = retract

    @precondition(lambda self: any(n.kind == "trigger" for n in self.nodes.values()))
    @rule(data=st.data())
    def resolve_trigger(self, data: st.DataObject) -> None:
        node_id, node = self._target(data, ("trigger",))
        scope = self._scope_near(data, node)
        hidden = node is not None and (node.staged or node.retracted)
        refusal = self._refusal_for(node, scope, hidden_from_writes=hidden)
        if refusal is not None:
            self._expect_refusal(f"resolve_trigger({scope}, {node})",
                                 partial(self.triggers.resolve_trigger, scope, node_id), refusal)
            if node is not None:
                self._read_back(node)
            return
        assert node is not None
        if node.staged or node.retracted or node.resolved:
            return  # not specified for those states
        self.run(self.triggers.resolve_trigger(scope, node_id))
        node.resolved = True

    @precondition(lambda self: any(n.kind == "skill" for n in self.nodes.values()))
    @rule(data=st.data())
    def approve_or_reject(self, data: st.DataObject) -> None:
        approve = data.draw(st.booleans(), label="approve")
        node_id, node = self._target(data, ("skill",))
        scope = self._scope_near(data, node)
        call = partial(self.skills.approve if approve else self.skills.reject, scope, node_id)
        what = f"{'approve' if approve else 'reject'}({scope}, {node})"
        hidden = node is not None and (node.staged or node.retracted)
        refusal = self._refusal_for(node, scope, hidden_from_writes=hidden)
        if refusal is not None:
            self._expect_refusal(what, call, refusal)
            if node is not None:
                self._read_back(node)
            return
        assert node is not None
        if node.staged or node.retracted:
            return  # not specified for those states
        self._set_status(scope, node, approve=approve)

    def _set_status(self, scope: MemoryScope, node: Node, *, approve: bool) -> None:
        """Approve or reject a skill its scope owns (a draft of an identifier, approved, replaces the live skill)."""
        call = partial(self.skills.approve if approve else self.skills.reject, scope, node.id)
        what = f"{'approve' if approve else 'reject'}({scope}, {node})"
        key = self._key_of(node)
        if approve and node.draft_key and key in self.foreign_keys:
            FIGURES["isolation.foreign_key_writes"] += 1
            assert key is not None
            holder = self.nodes[self.foreign_keys[key]]
            self._expect_refusal(f"{what}, whose key {holder} holds", call, Refusal(authority=True))
            self._read_back(holder)
            self._read_back(node)
            self._after_write()
            return
        self.run(call())
        node.status = "approved" if approve else "rejected"
        if approve and node.draft_key:
            assert key is not None
            self._replace_holder(key, node.id, ghost=False)  # the live skill of the identifier is deleted
            node.draft_key = False
        self._after_write()

    # -- hand-seeded anomalies ----------------------------------------------

    @precondition(lambda self: len({n.tenant for n in self.nodes.values() if n.kind == "skill"}) >= 2)
    @rule(data=st.data())
    def seed_foreign_edge(self, data: st.DataObject) -> None:
        """Plain Cypher: an edge from one tenant's skill to a precondition of another tenant's skill."""
        skills = [n for n in self.nodes.values() if n.kind == "skill"]
        source = data.draw(st.sampled_from(skills), label="edge from")
        targets = [(n, tool) for n in [*skills, *self.ghosts.values()]
                   if n.kind == "skill" and n.tenant != source.tenant for tool in n.preconditions]
        if not targets:
            return
        target, tool = data.draw(st.sampled_from(targets), label="edge to")
        position = data.draw(st.integers(0, 2), label="position")
        rows = self.cypher(
            "MATCH (s:Skill {id: $source}), (:Skill {id: $target})-[:REQUIRES]->(p:Precondition {tool: $tool}) "
            "WHERE p.tenant_id = $tenant CREATE (s)-[:REQUIRES {position: $position}]->(p) RETURN count(*) AS n",
            source=source.id, target=target.id, tool=tool, tenant=target.tenant, position=position,
        )
        assert rows == [{"n": 1}], f"precondition {tool} of {target} is not in the graph: {rows}"
        FIGURES["isolation.foreign_edges"] += 1
        self.edge_tenants |= {source.tenant, target.tenant}
        self.edge_sources.add(source.id)
        for node in (source, target):
            if node.id in self.nodes:
                self._read_back(node)

    @precondition(lambda self: any(n.kind in ("skill", "trigger") for n in self.nodes.values()))
    @rule(data=st.data())
    def copy_foreign_key(self, data: st.DataObject) -> None:
        """Plain Cypher: copy onto a node a ``symfonic_key`` naming another scope, then write that key from there."""
        candidates = [n for n in self.nodes.values() if n.kind in ("skill", "trigger") and not n.staged
                      and not n.draft_key and n.foreign_key is None]
        if not candidates:
            return
        holder = data.draw(st.sampled_from(candidates), label="key holder")
        if data.draw(st.integers(0, 2), label="same tenant?") == 0:  # another namespace of the holder's tenant
            tenant = holder.tenant
            namespace = data.draw(st.sampled_from([ns for ns in NAMESPACES if ns != holder.namespace]),
                                  label="named namespace")
        else:
            tenant = data.draw(st.sampled_from([t for t in self.hot if t != holder.tenant]), label="named tenant")
            namespace = data.draw(st.sampled_from(NAMESPACES), label="named namespace")
        identifier = data.draw(st.sampled_from(IDENTIFIERS), label="named identifier")
        key: Key = (holder.kind, tenant, namespace, identifier)
        if self._holder(key) is not None:
            return  # the named scope holds the key itself: the unique constraint forbids the copy
        text = json.dumps([holder.kind, tenant, namespace, identifier], ensure_ascii=False)
        label = "Skill" if holder.kind == "skill" else "Trigger"
        rows = self.cypher(
            f"MATCH (n:{label} {{id: $id}}) WHERE NOT EXISTS {{ MATCH (:{label} {{symfonic_key: $key}}) }} "
            "SET n.symfonic_key = $key RETURN count(n) AS n",
            id=holder.id, key=text,
        )
        assert rows == [{"n": 1}], f"{text} is held in the graph, though the model says it is free: {rows}"
        FIGURES["isolation.foreign_keys"] += 1
        own = self._key_of(holder)
        if own is not None and self.live_keys.get(own) == holder.id:
            del self.live_keys[own]  # the holder lost its own key: its scope's next write of it makes a new node
        holder.foreign_key = key
        self.foreign_keys[key] = holder.id
        # The scope the key names writes it now, live, staged then published, or as a draft then approved:
        # refused (at once, or when the write would take the key), and the holder is unchanged.
        writer = MemoryScope(tenant, namespace)
        paths = ["live", "staged", "draft"] if holder.kind == "skill" else ["live", "staged"]
        path = data.draw(st.sampled_from(paths), label="write path")
        target = (writer, identifier)
        if holder.kind == "trigger":
            written = self._set_trigger(data, staged=path == "staged", target=target)
        else:
            written = self._seed(data, staged=path == "staged", draft=path == "draft", target=target)
        if written is not None and written.write_id is not None:
            self._publish(writer, written.write_id)
        elif written is not None:
            self._set_status(writer, written, approve=True)
        self._read_back(holder)
        self._read_all(writer, None, drafts=True)

    # -- reads ------------------------------------------------------------

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        scope = self._scope(data)
        write_id = self._read_write_id(data, scope.tenant_id)
        self._read_all(scope, write_id, drafts=data.draw(st.booleans(), label="include_drafts"))

    @rule(data=st.data())
    def read_neighbours(self, data: st.DataObject) -> None:
        """Read every hot tenant (prefixes and near-spellings of one another) in one namespace."""
        namespace = data.draw(st.sampled_from(NAMESPACES), label="namespace")
        drafts = data.draw(st.booleans(), label="include_drafts")
        for tenant in self.hot:
            scope = MemoryScope(tenant, namespace)
            write_id = self._read_write_id(data, tenant)
            rows = self.run(self.skills.query_skills(scope, write_id=write_id, include_drafts=drafts))
            self._check_read("query_skills", scope, write_id, "skill", rows, drafts)
            pending = self.run(self.triggers.get_pending(scope, write_id=write_id))
            self._check_read("get_pending", scope, write_id, "trigger", pending)

    @rule(data=st.data())
    def turns_of_neighbours_at_once(self, data: st.DataObject) -> None:
        """Every hot tenant begins a turn concurrently: the coalesced reads must not cross tenants or namespaces."""
        namespace = data.draw(st.sampled_from(NAMESPACES), label="namespace")
        scopes = [MemoryScope(tenant, namespace) for tenant in self.hot]
        if data.draw(st.booleans(), label="stale"):
            self.memory.invalidate()  # as if max_age had passed: ship the skills again (identical rows reuse)

        async def turns() -> list[Any]:
            return list(await asyncio.gather(*(self.memory.begin(scope) for scope in scopes)))

        for scope, snapshot in zip(scopes, self.run(turns()), strict=True):
            FIGURES["isolation.coalesced_turns"] += 1
            self._check_read("TurnMemory.begin", scope, None, "skill", list(snapshot.skills))
            pending = [SimpleNamespace(id=t.trigger_id, tenant_id=scope.tenant_id, task=t.task,
                                       namespace=self.nodes[t.trigger_id].namespace
                                       if t.trigger_id in self.nodes else "not in the model")
                       for t in snapshot.triggers]
            self._check_read("TurnMemory.begin", scope, None, "trigger", pending)

    @invariant()
    def count_step(self) -> None:  # runs after every step: counts them for the summary
        FIGURES["isolation.steps"] += 1


@pytest.mark.slow
def test_isolation_state_machine(neo4j_settings: Any, _schema: None) -> None:
    run_seed = int(os.environ.get("SYMFONIC_RELIABILITY_SEED") or random.randrange(2**32))
    for name in COUNTERS:
        FIGURES[name] += 0

    class Machine(IsolationMachine):
        neo4j_uri = neo4j_settings.uri
        neo4j_auth = (neo4j_settings.user, neo4j_settings.password)
        neo4j_database = neo4j_settings.database

    before = Counter({name: FIGURES[name] for name in COUNTERS})
    print(f"isolation state machine: seed={run_seed} (replay with SYMFONIC_RELIABILITY_SEED={run_seed})")
    try:
        run_state_machine_as_test(
            seed(run_seed)(Machine),
            settings=settings(
                max_examples=40 * SCALE,
                stateful_step_count=40,
                deadline=None,
                database=None,
                print_blob=True,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        print(f"isolation summary: seed={run_seed} steps={FIGURES['isolation.steps']} " + " ".join(
            f"{name.split('.', 1)[1]}={FIGURES[name]}" for name in COUNTERS))
    done = Counter({name: FIGURES[name] - before[name] for name in COUNTERS})
    assert done["isolation.operations"] >= MIN_OPERATIONS, (
        f"only {done['isolation.operations']} operations; raise max_examples or stateful_step_count"
    )
    # Every new kind of attempt ran, so a quiet run cannot pass for a checked one.
    for name in ("isolation.namespace_writes", "isolation.cross_scope_closes", "isolation.authority_refusals",
                 "isolation.foreign_edges", "isolation.precondition_censuses", "isolation.foreign_keys",
                 "isolation.foreign_key_writes", "isolation.coalesced_turns"):
        assert done[name] > 0, f"{name} stayed at 0: the run never exercised it"
    assert FIGURES["isolation.leaks"] == 0
    assert FIGURES["isolation.overfiltered"] == 0
