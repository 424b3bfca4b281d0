"""The packed tenant-wide rows a library write leaves on the catalog node, and the first reads that take them.

A first read (or a read of a catalog that moved) may ship the tenant-wide skills as one text the last library
write stored under the catalog version, instead of every row. What a turn enforces must not depend on which:
the same hand-seeded shapes read the same both ways; a plain-Cypher bump, a text of another version, an
unreadable text or a value JSON cannot hold all make the turn read the rows; a text that lies is trusted for
at most ``max_age``, after which a full read replaces it.
"""

from __future__ import annotations

import operator
import random
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph

from bench.turn_bench import skill_specs
from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.gate import explain_tool_call
from symfonic_graph.langgraph import create_guarded_tool_node
from tests._fakes import Clock
from tests.integration.test_one_read_model import _seed_by_hand
from tests.integration.test_packed_skill_row import _ODD

pytestmark = pytest.mark.anyio

BUMP = ("MERGE (c:SymfonicCatalog {tenant_id: $t}) ON CREATE SET c.version = 0 "
        "SET c.version = c.version + 1")


class _State(TypedDict):
    messages: Annotated[list[AnyMessage], operator.add]
    memory_scope: MemoryScope


class Recording(GraphMemoryStore):
    """The real store on the same driver, recording how each turn row shipped its skills."""

    def __init__(self, store: GraphMemoryStore) -> None:
        super().__init__(store.driver, database=store.database)
        self.shipped: list[str] = []  # "packed", "rows" or "none", per turn row

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        rows = await super().read(name, **params)
        if name.startswith("turn_snapshot"):
            self.shipped += ["packed" if row.get("packed") else "rows" if row["skills"] else "none" for row in rows]
        return rows


async def _guard(store: GraphMemoryStore, scope: MemoryScope, label: str, pre: str, action: str = "deploy") -> str:
    skill = await ProceduralLayer(store).seed_authored_skill(
        scope, label=label, steps=[action], source_tag="authored:test", action_tool=action, precondition=[pre],
        identifier=label.lower())
    return skill.id


def _blocked(snapshot: Any, called: list[str]) -> bool:
    return explain_tool_call(snapshot.skills, "deploy", state={}, called=called, call_id="c1").verdict == "blocked"


async def _held(store: GraphMemoryStore, tenant: str) -> tuple[Any, Any]:
    records, _, _ = await store.driver.execute_query(
        "MATCH (c:SymfonicCatalog {tenant_id: $t}) RETURN c.version AS v, c.symfonic_packed_version AS p",
        t=tenant, database_=store.database)
    return records[0]["v"], records[0]["p"]


async def test_hand_seeded_shapes_read_the_same_packed_or_row_by_row(store: GraphMemoryStore, tenant: str) -> None:
    await _seed_by_hand(store, tenant)
    await store.driver.execute_query(_ODD.replace("datetime() + duration({seconds: 60})", "datetime()"),
                                     t=tenant, long="x" * 500, database_=store.database)
    await ProceduralLayer(store).seed_skills(MemoryScope(tenant), skill_specs(random.Random(5), 3))  # packs
    version, packed_version = await _held(store, tenant)
    assert packed_version == version
    for scope in (MemoryScope(tenant), MemoryScope(tenant, "user-2"), MemoryScope(tenant, "user-1")):
        recording = Recording(store)
        packed = await TurnMemory(recording).begin(scope)
        rows = await TurnMemory(store, max_age=0).begin(scope)  # max_age 0: every read ships the rows
        assert list(packed.skills) == list(rows.skills) and len(rows.skills) >= 3
        assert packed.preflight({"channel": "a"}) == rows.preflight({"channel": "a"})
        for tool in ("deploy", "o_act", "refund", "anything"):
            for called in ([], ["o_pre"], ["auth", "get_status"]):
                assert (explain_tool_call(packed.skills, tool, state={}, called=called, call_id="c")
                        == explain_tool_call(rows.skills, tool, state={}, called=called, call_id="c"))
        # user-1 holds skills of its own (seeded by hand): it reads its rows, in catalog order
        assert recording.shipped == ["rows" if scope.namespace == "user-1" else "packed"]


async def test_a_plain_cypher_bump_leaves_the_packed_rows_behind_and_turns_read_the_rows(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope = MemoryScope(tenant)
    await _guard(store, scope, "Deploy", "run_tests")
    await store.driver.execute_query(  # the documented pattern: the edit, then the bump
        "MATCH (:Skill {tenant_id: $t})-[:REQUIRES]->(p:Precondition) SET p.tool = 'security_review' "
        "WITH count(*) AS n " + BUMP, t=tenant, database_=store.database)
    recording = Recording(store)
    snapshot = await TurnMemory(recording).begin(scope)
    assert recording.shipped == ["rows"]
    assert _blocked(snapshot, ["run_tests"]) and not _blocked(snapshot, ["security_review"])
    # the next library write packs the graph as it is, the hand edit included
    await _guard(store, scope, "Ship", "lint", action="ship")
    version, packed_version = await _held(store, tenant)
    assert packed_version == version
    recording = Recording(store)
    snapshot = await TurnMemory(recording).begin(scope)
    assert recording.shipped == ["packed"]
    assert _blocked(snapshot, ["run_tests"]) and not _blocked(snapshot, ["security_review"])


@pytest.mark.parametrize("text", [
    pytest.param("[{v},[]]", id="claims the version, holds nothing"),
    pytest.param("[{w},[]]", id="another version"),
    pytest.param("not json", id="unreadable"),
    pytest.param("[{v},[[1,2,3]]]", id="a row that is not a skill"),
    pytest.param("[{v},{{}}]", id="rows that are not a list"),
])
async def test_a_packed_text_is_never_trusted_beyond_max_age(store: GraphMemoryStore, tenant: str, text: str) -> None:
    """Written by hand over the library's (or left by a bug): the rule is enforced again within max_age."""
    scope = MemoryScope(tenant, "user-9")
    await _guard(store, MemoryScope(tenant), "Deploy", "run_tests")
    version, _ = await _held(store, tenant)
    await store.driver.execute_query(
        "MATCH (c:SymfonicCatalog {tenant_id: $t}) SET c.symfonic_packed = $text, c.symfonic_packed_version = $v",
        t=tenant, text=text.format(v=version, w=version + 1), v=version, database_=store.database)
    clock = Clock()
    memory = TurnMemory(store, clock=clock)
    first = await memory.begin(scope)
    if not text.startswith("[{v},[]]"):  # anything but a readable text of this version: the rows are read at once
        assert _blocked(first, [])
    clock.now += memory.max_age + 1
    assert _blocked(await memory.begin(scope), [])  # past max_age: read again in full, and enforced
    assert not _blocked(await memory.begin(scope), ["run_tests"])


async def test_another_tenants_packed_rows_never_reach_a_turn(store: GraphMemoryStore, tenant: str) -> None:
    """A catalog node given another tenant's text (a copied node): its rows are dropped, their text never shown."""
    other = f"{tenant}-other"
    await _guard(store, MemoryScope(other), "Secret", "other_tenant_tool")
    await _guard(store, MemoryScope(tenant), "Deploy", "run_tests")
    await store.driver.execute_query(
        "MATCH (o:SymfonicCatalog {tenant_id: $o}), (c:SymfonicCatalog {tenant_id: $t}) "
        "SET c.symfonic_packed = replace(o.symfonic_packed, '[' + toString(o.version) + ',', "
        "'[' + toString(c.version) + ','), c.symfonic_packed_version = c.version",
        t=tenant, o=other, database_=store.database)
    snapshot = await TurnMemory(store).begin(MemoryScope(tenant))
    assert "other_tenant_tool" not in repr(list(snapshot.skills))
    block = snapshot.preflight({})
    assert block is None or "other_tenant_tool" not in block.content
    await store.driver.execute_query("MATCH (n) WHERE n.tenant_id = $o DETACH DELETE n", o=other,
                                     database_=store.database)


async def test_an_edit_without_a_bump_is_enforced_within_max_age_of_a_packed_first_read(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope = MemoryScope(tenant)
    await _guard(store, scope, "Deploy", "run_tests")
    await store.driver.execute_query(  # a documented mistake: no bump
        "MATCH (:Skill {tenant_id: $t})-[:REQUIRES]->(p:Precondition) SET p.tool = 'security_review'",
        t=tenant, database_=store.database)
    clock = Clock()
    recording = Recording(store)
    memory = TurnMemory(recording, clock=clock, coalesce_window=None)
    await memory.begin(scope)
    clock.now += memory.max_age + 1
    snapshot = await memory.begin(scope)
    assert recording.shipped == ["packed", "rows"]
    assert _blocked(snapshot, ["run_tests"]) and not _blocked(snapshot, ["security_review"])


async def test_a_value_json_cannot_hold_leaves_nothing_packed(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    await _guard(store, scope, "Deploy", "run_tests")
    await store.driver.execute_query(  # a date where a precondition value goes: the read model decides it
        "MATCH (:Skill {tenant_id: $t})-[:REQUIRES]->(p:Precondition) SET p.value = datetime()",
        t=tenant, database_=store.database)
    await _guard(store, scope, "Ship", "lint", action="ship")
    version, packed_version = await _held(store, tenant)
    assert packed_version is None and isinstance(version, int)
    recording = Recording(store)
    rows = await TurnMemory(recording).begin(scope)
    assert recording.shipped == ["rows"]
    assert list(rows.skills) == list((await TurnMemory(store, max_age=0).begin(scope)).skills)


async def test_invalidate_and_max_age_zero_read_the_rows(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    await _guard(store, scope, "Deploy", "run_tests")
    recording = Recording(store)
    memory = TurnMemory(recording)
    memory.invalidate(scope)  # an edit the version does not show: even scopes not read yet read the rows
    await memory.begin(MemoryScope(tenant, "user-3"))
    everything = TurnMemory(recording)
    everything.invalidate()
    await everything.begin(scope)
    await TurnMemory(recording, max_age=0).begin(scope)
    await TurnMemory(recording).begin(scope)
    assert recording.shipped == ["rows", "rows", "rows", "packed"]


async def test_a_moved_catalog_is_read_packed_and_confirmed_past_max_age(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    await _guard(store, scope, "Deploy", "run_tests")
    clock = Clock()
    recording = Recording(store)
    memory = TurnMemory(recording, clock=clock, coalesce_window=None)
    await memory.begin(scope)  # packed
    await _guard(store, scope, "Ship", "lint", action="ship")  # the catalog moves
    clock.now += 1
    moved = await memory.begin(scope)
    assert [s.label for s in moved.skills] == ["Deploy", "Ship"]
    clock.now += memory.max_age + 1
    await memory.begin(scope)
    # warm read, then the moved catalog packed; past max_age the new version is shipped again in full
    assert recording.shipped == ["packed", "none", "packed", "rows"]


async def test_packing_never_creates_a_catalog_an_erase_removed(store: GraphMemoryStore, tenant: str) -> None:
    """The packing transaction runs after its write: a whole-tenant erase in between leaves nothing behind."""
    from symfonic_graph._store.packed import refresh_packed

    await _guard(store, MemoryScope(tenant), "Deploy", "run_tests")
    await store.erase(MemoryScope(tenant))
    async with store.driver.session(database=store.database) as session:
        await session.execute_write(refresh_packed, [tenant])
    records, _, _ = await store.driver.execute_query(
        "MATCH (n:SymfonicCatalog {tenant_id: $t}) RETURN count(n) AS n", t=tenant, database_=store.database)
    assert records[0]["n"] == 0


async def test_staging_publish_and_fold_each_leave_the_text_a_reader_reads(
    store: GraphMemoryStore, tenant: str
) -> None:
    """A staged write changes no row a turn reads; its publish shows the new skill and its fold drops the
    staged mark the rows show: each repacks, and a packed first read equals a read of the rows after each."""
    scope = MemoryScope(tenant)
    await _guard(store, scope, "Deploy", "run_tests")

    async def text() -> str:
        records, _, _ = await store.driver.execute_query(
            "MATCH (c:SymfonicCatalog {tenant_id: $t}) RETURN c.symfonic_packed AS p", t=tenant,
            database_=store.database)
        return str(records[0]["p"])

    async def same_both_ways() -> None:
        recording = Recording(store)
        packed = await TurnMemory(recording).begin(scope)
        assert recording.shipped == ["packed"]
        assert list(packed.skills) == list((await TurnMemory(store, max_age=0).begin(scope)).skills)

    before = await text()
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Ship", steps=["ship"], source_tag="authored:test", action_tool="ship", precondition=["lint"],
        identifier="ship", write_id="w-1")
    staged = await text()  # the staged write bumps the version; the rows a turn reads did not change
    assert staged.split(",", 1)[1] == before.split(",", 1)[1] and staged != before
    await same_both_ways()
    await store.publish(scope, "w-1")
    published = await text()
    assert published != before and '"Ship"' in published
    await same_both_ways()
    await store.fold_published(scope, settle_seconds=0)
    assert await text() != published  # the staged mark is gone from the rows
    await same_both_ways()


async def test_a_guarded_tool_never_runs_on_a_packed_first_read(store: GraphMemoryStore, tenant: str) -> None:
    """What the user sees: a new process's first turn reads the packed text, and the guarded tool does not run
    until its precondition ran; after a plain-Cypher edit with a bump (rows read), the edited rule holds too."""
    scope = MemoryScope(tenant, "user-1")
    await _guard(store, MemoryScope(tenant), "Deploy", "run_tests")
    ran: list[str] = []

    def make(name: str) -> StructuredTool:
        def run() -> str:
            ran.append(name)
            return f"{name} done"
        return StructuredTool.from_function(run, name=name, description=f"The {name} tool.")

    async def turn(calls: list[str]) -> dict[str, ToolMessage]:
        recording = Recording(store)
        builder = StateGraph(_State)
        builder.add_node("tools", create_guarded_tool_node([make(n) for n in ("deploy", "run_tests",
                                                                                "security_review")],
                                                           TurnMemory(recording)))
        builder.add_edge(START, "tools")
        builder.add_edge("tools", END)
        asked = AIMessage("", tool_calls=[{"name": n, "args": {}, "id": f"c{i}", "type": "tool_call"}
                                          for i, n in enumerate(calls)])
        out = await builder.compile().ainvoke({"messages": [HumanMessage("ship it"), asked], "memory_scope": scope})
        turn.shipped = recording.shipped  # type: ignore[attr-defined]
        return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}

    answers = await turn(["deploy"])
    assert turn.shipped == ["packed"]  # type: ignore[attr-defined]
    assert ran == [] and answers["c0"].status == "error" and "run_tests" in str(answers["c0"].content)
    await store.driver.execute_query(  # the documented plain-Cypher edit: then the bump
        "MATCH (:Skill {tenant_id: $t})-[:REQUIRES]->(p:Precondition) SET p.tool = 'security_review' "
        "WITH count(*) AS n " + BUMP, t=tenant, database_=store.database)
    answers = await turn(["run_tests", "deploy"])
    assert turn.shipped == ["rows"]  # type: ignore[attr-defined]
    assert ran == ["run_tests"] and answers["c1"].status == "error" and "security_review" in str(answers["c1"].content)
