"""Readers see one version of an identifier, whatever commits while they read.

Writers publish staged re-seeds of a few identifiers and re-seed the same
identifiers live, as fast as they can; readers run turns (``TurnMemory.begin``,
a fresh cache each time) and ``query_skills`` meanwhile. Every read must hold
exactly one skill per identifier: never the old and the new node together,
never neither (a publish racing every other write).

A reader reads the catalog's list first and the nodes after, without locks,
and Neo4j applies a committed transaction's records one at a time: a reader
can see the list of a commit still being applied beside nodes not yet
changed by it. The race above catches that rarely (the window is short);
``test_a_transaction_that_lists_or_unlists_a_write_changes_nothing_else_a_reader_checks``
checks every commit of a publish's life for the property that rules it out.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise

import anyio
import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer, TurnMemory
from symfonic_graph._store.cypher import cypher_root, parse_queries
from symfonic_graph._store.steps import Statement, Step, Written
from tests.reliability._stats import FIGURES, SCALE

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

IDENTIFIERS = 4
READERS = 4
MIN_READS = 2_500 * SCALE


def _skill(identifier: str, label: str) -> dict[str, object]:
    return {"label": label, "steps": ["deliver"], "source_tag": "authored:versions", "identifier": identifier,
            "precondition": ["get_status"]}


async def test_turns_racing_publishes_and_live_reseeds_see_one_version(store: GraphMemoryStore, tenant: str) -> None:
    # Eight writers queue on one tenant's catalog lock: on a loaded 2-core machine a publish may wait longer
    # than the default 10 s. What is measured here is which versions readers see, not how long writers wait.
    store = GraphMemoryStore(store.driver, database=store.database, query_timeout=60.0)
    scope = MemoryScope(tenant)
    skills = ProceduralLayer(store)
    ids = [f"x{i}" for i in range(IDENTIFIERS)]
    await skills.seed_skills(scope, [_skill(i, f"{i} v0") for i in ids])
    bad: Counter[str] = Counter()
    examples: list[str] = []
    reads = writes = 0
    stop = anyio.Event()

    def check(identifiers: list[str | None]) -> None:
        nonlocal reads
        reads += 1
        counts = Counter(identifiers)
        for ident in ids:
            if counts[ident] != 1:
                bad["two" if counts[ident] > 1 else "none"] += 1
                if len(examples) < 5:
                    examples.append(f"{ident}: {counts[ident]} versions")

    async def reader(n: int) -> None:
        while not stop.is_set():
            if n % 2:
                snapshot = await TurnMemory(store, coalesce_window=None).begin(scope)
                check([s.identifier for s in snapshot.skills])
            else:
                check([s.identifier for s in await skills.query_skills(scope)])

    async def publisher(ident: str) -> None:
        nonlocal writes
        while not stop.is_set():
            wid = f"w-{uuid.uuid4().hex}"
            await skills.seed_skills(scope, [_skill(ident, f"{ident} {wid}")], write_id=wid)
            await store.publish(scope, wid)
            writes += 1

    async def live(ident: str) -> None:
        nonlocal writes
        k = 0
        while not stop.is_set():
            k += 1
            await skills.seed_authored_skill(scope, **_skill(ident, f"{ident} live {k}"))  # type: ignore[arg-type]
            writes += 1

    async def until_enough() -> None:
        while reads < MIN_READS:
            await anyio.sleep(0.2)
        stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(until_enough)
        for n in range(READERS):
            tg.start_soon(reader, n)
        for ident in ids:
            tg.start_soon(publisher, ident)
            tg.start_soon(live, ident)

    FIGURES["versions.reads"] += reads
    FIGURES["versions.writes"] += writes
    FIGURES["versions.two_versions"] += bad["two"]
    FIGURES["versions.none"] += bad["none"]
    assert reads >= MIN_READS
    assert sum(bad.values()) == 0, (dict(bad), examples)


# A reader of the visibility rule that read the catalog's list of published writes at some earlier moment
# (``$published``) and the skill nodes now: what a turn's query sees when writes commit between its
# first read (the catalog) and its scan of the skills.
_STALE_READER = """
// name: stale_reader
// params: tenant_id, published
WITH {tenant_id: $tenant_id, namespace: null, write_id: null, include_drafts: false,
      include_retracted: false} AS sc, $published AS published
MATCH (s:Skill)
WHERE
  // include: skill_visible
RETURN s.identifier AS identifier
"""


async def _published(driver: neo4j.AsyncDriver, tenant: str) -> list[str]:
    records, _, _ = await driver.execute_query(
        "MATCH (c:SymfonicCatalog {tenant_id: $t}) RETURN coalesce(c.published_writes, []) AS p", {"t": tenant})
    return list(records[0]["p"]) if records else []


@pytest.mark.parametrize("order", ["publish_then_live", "live_then_publish"])
async def test_a_reader_holding_the_list_from_before_a_publish_and_a_live_reseed_sees_one_version(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, order: str
) -> None:
    """Deterministic: the list read before ``publish(W)`` of a staged re-seed of X and a live re-seed of X
    both commit, the nodes read after: exactly one X (the old one), and with the list read after, the new one."""
    scope = MemoryScope(tenant)
    skills = ProceduralLayer(store)
    projection = "\n".join((cypher_root() / "queries" / name).read_text(encoding="utf-8")
                           for name in ("skill_projection.cypher", "scope_rules.cypher"))
    [stale] = [q for q in parse_queries(projection + "\n" + _STALE_READER, "test") if q.name == "stale_reader"]
    await skills.seed_authored_skill(scope, **_skill("x", "x v0"))  # type: ignore[arg-type]
    wid = f"w-{uuid.uuid4().hex}"
    await skills.seed_skills(scope, [_skill("x", "x staged")], write_id=wid)
    before = await _published(driver, tenant)
    if order == "publish_then_live":
        await store.publish(scope, wid)
        await skills.seed_authored_skill(scope, **_skill("x", "x live"))  # type: ignore[arg-type]
    else:
        await skills.seed_authored_skill(scope, **_skill("x", "x live"))  # type: ignore[arg-type]
        await store.publish(scope, wid)
    after = await _published(driver, tenant)
    for published in (before, after):
        records, _, _ = await driver.execute_query(stale.text, {"tenant_id": tenant, "published": published})
        assert [r["identifier"] for r in records] == ["x"], (published, order)
    [now] = await skills.query_skills(scope)
    assert now.label == ("x live" if order == "publish_then_live" else "x staged")


# What the visibility rule (skill_visible, trigger_visible, visible_version) reads of a node besides the
# catalog's list: the same in the states before and after a transaction that changes the list.
_RULE_INPUTS = """
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $t})
WITH coalesce(c.published_writes, []) AS published
OPTIONAL MATCH (n) WHERE n.tenant_id = $t AND (n:Skill OR n:Trigger)
WITH published, n ORDER BY elementId(n)
RETURN published, collect([elementId(n), n {.tenant_id, .namespace, .status, .active, .symfonic_write_id,
                                           .symfonic_replaced_by, staged: n:SymfonicUnpublished,
                                           retracted: n:SymfonicRetracted, skill: n:Skill}]) AS nodes
"""


class _Commits(GraphMemoryStore):
    """The store, reading the tenant's list and what the rule reads of its nodes after each committed write."""

    def __init__(self, store: GraphMemoryStore, tenant: str) -> None:
        super().__init__(store.driver, database=store.database)
        self.tenant = tenant
        self.states: list[tuple[str, list[str], dict[str, dict[str, object]]]] = []

    async def snapshot(self, what: str) -> None:
        records, _, _ = await self.driver.execute_query(_RULE_INPUTS, {"t": self.tenant}, database_=self.database)
        self.states.append((what, list(records[0]["published"]), {k: v for k, v in records[0]["nodes"]}))

    async def write(self, steps: Sequence[Step | Statement]) -> Written:
        written = await super().write(steps)
        await self.snapshot(", ".join(s.query if isinstance(s, Step) else s[0] for s in steps))
        return written


async def test_a_transaction_that_lists_or_unlists_a_write_changes_nothing_else_a_reader_checks(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    """The flip lists a write and nothing else: the nodes it hides were marked by a transaction committed
    before. Else a reader holding the new list could read a node the flip marks still unmarked, old and new
    versions together (two skills of one identifier). Publishes small and in batches, of skills and
    triggers, a live re-seed between, a fold and a discard."""
    commits = _Commits(store, tenant)
    scope = MemoryScope(tenant)
    skills, triggers = ProceduralLayer(commits), ProspectiveLayer(commits)
    await commits.snapshot("start")
    await skills.seed_skills(scope, [_skill(i, f"{i} v0") for i in ("x", "y", "z")])
    await triggers.set_trigger(scope, task="t v0", condition="c", identifier="t")
    for n, batch in ((1, 5000), (2, 1)):  # one flip; then prepared in batches of one node before the flip
        wid = f"w{n}-{uuid.uuid4().hex}"
        await skills.seed_skills(scope, [_skill(i, f"{i} v{n}") for i in ("x", "y", "z")], write_id=wid)
        await triggers.set_trigger(scope, task=f"t v{n}", condition="c", identifier="t", write_id=wid)
        await commits.publish(scope, wid, batch_size=batch)
        await skills.seed_authored_skill(scope, **_skill("x", f"x live {n}"))  # type: ignore[arg-type]
    staged = f"w3-{uuid.uuid4().hex}"
    await skills.seed_skills(scope, [_skill("y", "y staged")], write_id=staged)
    await commits.discard(scope, staged)
    await commits.fold_published(scope, settle_seconds=0)
    assert sorted(s.label for s in await skills.query_skills(scope)) == ["x live 2", "y v2", "z v2"]
    assert [t.task for t in await triggers.get_pending(scope)] == ["t v2"]
    lists = 0
    for (_, before, nodes_before), (what, after, nodes_after) in pairwise(commits.states):
        if before == after:
            continue
        lists += 1
        changed = {k: (nodes_before.get(k), nodes_after.get(k)) for k in nodes_before.keys() | nodes_after.keys()
                   if nodes_before.get(k) != nodes_after.get(k)}
        assert not changed, f"{what} changed the list ({before} -> {after}) and nodes: {changed}"
    assert lists == 3  # two flips, then the fold unlists both
