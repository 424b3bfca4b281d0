"""Readers see one version of an identifier, whatever commits while they read.

Writers publish staged re-seeds of a few identifiers and re-seed the same
identifiers live, as fast as they can; readers run turns (``TurnMemory.begin``,
a fresh cache each time) and ``query_skills`` meanwhile. Every read must hold
exactly one skill per identifier: never the old and the new node together,
never neither (a publish racing every other write).
"""

from __future__ import annotations

import uuid
from collections import Counter

import anyio
import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph._store.cypher import cypher_root, parse_queries
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
