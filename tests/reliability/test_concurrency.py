"""Concurrency: publishes racing readers, concurrent re-seeds, concurrent schema runs, scans under deletes."""

from __future__ import annotations

import uuid

import anyio
import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer
from symfonic_graph.doctor import diagnose
from tests.reliability._stats import FIGURES

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

ROUNDS = 12
SKILLS_PER_BATCH = 10
TRIGGERS_PER_BATCH = 5
READS_BEFORE = 20  # per reader, before the publish starts
READS_AFTER = 10  # per reader, after it returned
MIN_READER_ITERATIONS = 1_000


@pytest.mark.slow
async def test_publish_under_readers_is_all_or_nothing(store: GraphMemoryStore, tenant: str) -> None:
    """Each round stages N skills and M triggers tenant-wide, then publishes them while
    three readers loop (two over skills from two namespaces, one over pending triggers).
    Around each publish, while the readers run, earlier writes published over a second
    ago are folded (``fold_published(settle_seconds=1.0)``; in the publishing task, since
    concurrent publishes are checked on their own below). Every read must
    count k*N or (k+1)*N skills (k*M or (k+1)*M triggers) after k earlier rounds."""
    for name in ("concurrency.publishes", "concurrency.reader_iterations", "concurrency.partial_reads"):
        FIGURES[name] += 0
    skills, triggers = ProceduralLayer(store), ProspectiveLayer(store)
    partial: list[tuple[int, str, int]] = []
    iterations = 0

    async def fold() -> None:
        FIGURES["concurrency.folded_nodes"] += await store.fold_published(MemoryScope(tenant), settle_seconds=1.0)

    for k in range(ROUNDS):
        wid = f"w-{uuid.uuid4().hex}"
        batch = [
            {"label": f"r{k} s{i}", "steps": ["deliver"], "source_tag": "authored:batch",
             "precondition": ["get_status"], "identifier": f"r{k}-{i}"}
            for i in range(SKILLS_PER_BATCH)
        ]
        await skills.seed_skills(MemoryScope(tenant), batch, write_id=wid)
        for i in range(TRIGGERS_PER_BATCH):
            await triggers.set_trigger(MemoryScope(tenant), condition=f"r{k} c{i}", task="t", write_id=wid)
        published = anyio.Event()
        ready = [anyio.Event() for _ in range(3)]

        async def reader(
            n: int, what: str, read: object, size: int,
            k: int = k, published: anyio.Event = published, ready: list[anyio.Event] = ready,
        ) -> None:
            nonlocal iterations
            allowed = {k * size, (k + 1) * size}
            done = after = 0
            while after < READS_AFTER:
                count = len(await read())  # type: ignore[operator]
                iterations += 1
                done += 1
                if count not in allowed:
                    partial.append((k, what, count))
                if done == READS_BEFORE:
                    ready[n].set()
                if published.is_set():
                    after += 1
            if count != (k + 1) * size:
                partial.append((k, f"{what} after publish", count))

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader, 0, "skills (t, None)", lambda: skills.query_skills(MemoryScope(tenant)),
                          SKILLS_PER_BATCH)
            tg.start_soon(reader, 1, "skills (t, n1)", lambda: skills.query_skills(MemoryScope(tenant, "n1")),
                          SKILLS_PER_BATCH)
            tg.start_soon(reader, 2, "triggers (t, n1)",
                          lambda: triggers.get_pending(MemoryScope(tenant, "n1")), TRIGGERS_PER_BATCH)
            for event in ready:
                await event.wait()
            await fold()
            count = await store.publish(MemoryScope(tenant), wid)
            published.set()
            await fold()
        assert count == SKILLS_PER_BATCH + TRIGGERS_PER_BATCH
        FIGURES["concurrency.publishes"] += 1

    FIGURES["concurrency.reader_iterations"] += iterations
    FIGURES["concurrency.partial_reads"] += len(partial)
    print(f"publish race: rounds={ROUNDS} reader_iterations={iterations} partial_reads={len(partial)}")
    assert iterations >= MIN_READER_ITERATIONS
    assert not partial, partial[:20]
    final = await skills.query_skills(MemoryScope(tenant))
    assert len(final) == ROUNDS * SKILLS_PER_BATCH
    assert all(s.precondition == ("get_status",) for s in final)


async def test_concurrent_publishes_in_one_tenant_all_become_visible(store: GraphMemoryStore, tenant: str) -> None:
    layer = ProceduralLayer(store)
    writes, per_write = 12, 3
    for round_no in range(3):
        scope = MemoryScope(f"{tenant}-{round_no}")
        for w in range(writes):
            await layer.seed_skills(
                scope, [{"label": f"w{w} s{i}", "steps": ["deliver"], "source_tag": "authored:race"}
                        for i in range(per_write)], write_id=f"w{w}",
            )
        counts: list[int] = []

        async def publish(w: int, scope: MemoryScope = scope, counts: list[int] = counts) -> None:
            counts.append(await store.publish(scope, f"w{w}"))

        async with anyio.create_task_group() as tg:
            for w in range(writes):
                tg.start_soon(publish, w)
        visible = len(await layer.query_skills(scope))
        assert (sum(counts), visible) == (writes * per_write, writes * per_write), (
            f"publish() reported {sum(counts)} nodes published, {visible} visible afterwards"
        )


async def test_concurrent_reseeds_leave_exactly_one_skill(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str
) -> None:
    layer = ProceduralLayer(store)
    writers = 12
    for round_no, namespace in enumerate((None, "n1", None, "n2", None)):
        scope = MemoryScope(f"{tenant}-{round_no}", namespace)
        errors: list[BaseException] = []

        async def seed(i: int, scope: MemoryScope = scope, errors: list[BaseException] = errors) -> None:
            try:
                await layer.seed_authored_skill(
                    scope, label=f"v{i}", steps=["deliver"], source_tag="authored:race", identifier="deliver",
                    precondition=[f"pre_{i}", "be careful"],
                )
            except Exception as exc:  # collected: every concurrent re-seed must succeed
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for i in range(writers):
                tg.start_soon(seed, i)
        FIGURES["concurrency.reseeds"] += writers
        assert not errors, errors
        [skill] = await layer.query_skills(scope)
        i = int(skill.label[1:])
        assert skill.precondition == (f"pre_{i}", "be careful"), "preconditions of two re-seeds got mixed"
        records, _, _ = await driver.execute_query(
            "MATCH (s:Skill {tenant_id: $t}) OPTIONAL MATCH (s)-[:REQUIRES]->(p:Precondition) "
            "RETURN count(DISTINCT s) AS skills, count(p) AS preconditions",
            t=scope.tenant_id, database_=store.database,
        )
        assert (records[0]["skills"], records[0]["preconditions"]) == (1, 2)
        orphans, _, _ = await driver.execute_query(
            "MATCH (p:Precondition {tenant_id: $t}) WHERE NOT (p)<-[:REQUIRES]-() RETURN count(p) AS n",
            t=scope.tenant_id, database_=store.database,
        )
        assert orphans[0]["n"] == 0


async def test_concurrent_staged_reseeds_publish_one_skill(store: GraphMemoryStore, tenant: str) -> None:
    layer = ProceduralLayer(store)
    scope = MemoryScope(tenant)
    await layer.seed_authored_skill(scope, label="live", steps=["deliver"], source_tag="authored:race",
                                    identifier="deliver")
    wid = f"w-{uuid.uuid4().hex}"
    async with anyio.create_task_group() as tg:
        for i in range(10):
            tg.start_soon(lambda i=i: layer.seed_authored_skill(
                scope, label=f"staged{i}", steps=["deliver"], source_tag="authored:race", identifier="deliver",
                write_id=wid))
    FIGURES["concurrency.reseeds"] += 10
    assert [s.label for s in await layer.query_skills(scope)] == ["live"]
    staged = [s for s in await layer.query_skills(scope, write_id=wid) if s.label.startswith("staged")]
    assert len(staged) == 1, [s.label for s in staged]
    assert await store.publish(scope, wid) == 1
    [skill] = await layer.query_skills(scope)
    assert skill.label.startswith("staged")


async def test_concurrent_apply_schema_all_succeed(neo4j_settings: object, store: GraphMemoryStore) -> None:
    """Eight stores (own drivers) run ``apply_schema()`` at once; all succeed, none applies twice.

    On the shared development server the schema is already applied, so this is
    the concurrent no-op path; the first-run race needs an empty database.
    """
    FIGURES["concurrency.schema_runs"] += 0
    results: list[list[int]] = []

    async def apply() -> None:
        async with GraphMemoryStore.connect(
            neo4j_settings.uri, neo4j_settings.user, neo4j_settings.password,  # type: ignore[attr-defined]
            database=neo4j_settings.database,  # type: ignore[attr-defined]
        ) as s:
            results.append(await s.apply_schema())

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(apply)
    FIGURES["concurrency.schema_runs"] += len(results)
    assert len(results) == 8
    applied = [v for r in results for v in r]
    assert len(applied) == len(set(applied)), f"a migration was applied twice: {results}"
    assert await store.apply_schema() == []


async def test_scans_across_tenants_survive_another_tenants_deletes(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    """``schema apply`` (``stamp_keys``) and ``doctor`` across tenants read every tenant's triggers.

    While they run, another tenant's app deletes its own triggers, 20 per
    transaction. A scan that reaches a node deleted under it fails with
    ``EntityNotFound`` and rolls back whole; it is run again, so neither the
    operator's command nor the app sees an error, and the operator's
    plain-Cypher trigger ends up stamped.
    """
    FIGURES["concurrency.scans_under_deletes"] += 0
    neighbour = f"{tenant}-neighbour"
    forget.append(neighbour)
    scans = 0

    async def delete_the_neighbours_triggers(done: anyio.Event) -> None:
        while True:
            records, _, _ = await driver.execute_query(
                "MATCH (t:Trigger {tenant_id: $t}) WITH t LIMIT 20 DETACH DELETE t RETURN count(*) AS n",
                {"t": neighbour})
            if records[0]["n"] == 0:
                done.set()
                return

    async def scan(done: anyio.Event) -> None:
        nonlocal scans
        while not done.is_set():
            await store.stamp_keys()
            await diagnose(store)
            scans += 1

    for _ in range(3):
        await driver.execute_query(
            "UNWIND range(1, 2000) AS i CREATE (:Trigger {id: $t + '-' + i, tenant_id: $t, condition: 'c', "
            "task: 'x', status: 'pending', created_at: datetime()})", {"t": neighbour})
        await driver.execute_query(  # a plain-Cypher trigger of the operator's own: stamp_keys must stamp it
            "CREATE (:Trigger {id: $id, tenant_id: $t, condition: 'c', task: 'x', status: 'pending', "
            "created_at: datetime()})", {"id": f"plain-{uuid.uuid4().hex}", "t": tenant})
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(delete_the_neighbours_triggers, done)
            tg.start_soon(scan, done)
    FIGURES["concurrency.scans_under_deletes"] += scans
    assert scans >= 3
    records, _, _ = await driver.execute_query(
        "MATCH (t:Trigger {tenant_id: $t}) RETURN count(t) AS all, count(CASE WHEN t:SymfonicScoped THEN 1 END) AS "
        "stamped", {"t": tenant})
    assert (records[0]["all"], records[0]["stamped"]) == (3, 3)
