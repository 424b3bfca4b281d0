"""Operator mistakes in plain-Cypher seeding: each is named, and none lets the guarded action run.

Every case starts from one rule (``refund`` needs ``lookup_order`` with the
same ``order_id`` and one of ``sso_login``/``verify_identity``), seeded by
hand with ``cypher run`` (or, for the library-written cases, with ``seed``),
and a live agent (``build_agent_graph`` over a ``TurnMemory`` whose cache
lives an hour) that has already run a turn, so the rule is cached. Then the
case's mistake runs through ``symfonic-graph cypher run`` (in process), the
way an operator makes it. Each case checks:

- what names the mistake: ``cypher run``'s own output (its follow-up doctor
  run for the tenants it touched), ``doctor``, or a constraint refusing the
  script;
- through the live agent, whose model calls ``lookup_order(order_id=2)``
  (and ``verify_identity`` where the case says ``full``: the rule as first
  seeded is then met, so only a precondition that fails closed or one the
  mistake added can block) and then ``refund(order_id=2)``: the guarded
  ``refund`` never runs (the tool counts its real invocations).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import neo4j
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from symfonic_graph import GraphMemoryStore, MemoryScope, TurnMemory
from symfonic_graph.doctor import Finding, diagnose
from symfonic_graph.langgraph import build_agent_graph
from tests._cli import CliResult, neo4j_env, run_cli
from tests._fakes import Scripted
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

_SKILL = """MERGE (s:Skill {tenant_id: 'T', id: 'T-refund'})
SET s.namespace = null, s.identifier = 'refund',
    s.symfonic_key = '["skill", "' + s.tenant_id + '", null, "refund"]',
    s.label = 'Refund', s.steps = ['lookup_order', 'refund'], s.action_tool = 'refund', s.context = '',
    s.status = 'approved', s.active = true, s.source = 'authored:ops',
    s.created_at = coalesce(s.created_at, datetime());
MATCH (:Skill {tenant_id: 'T', id: 'T-refund'})-[:REQUIRES]->(p:Precondition) DETACH DELETE p;
MATCH (s:Skill {tenant_id: 'T', id: 'T-refund'})
CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: 'T', kind: 'tool', tool: 'lookup_order',
                                                      same_args: ['order_id']}),
       (s)-[:REQUIRES {position: 1}]->(:Precondition {tenant_id: 'T', kind: 'any',
                                                      tools: ['sso_login', 'verify_identity']});
"""
_BUMP = "MERGE (c:SymfonicCatalog {tenant_id: 'T'}) ON CREATE SET c.version = 0 SET c.version = c.version + 1;\n"
_SEED_FILE = """tenant: T
skills:
  - label: Refund
    identifier: refund
    steps: [lookup_order, refund]
    action_tool: refund
    source_tag: authored:ops
    precondition:
      - {tool: lookup_order, same_args: [order_id]}
      - {any: [sso_login, verify_identity]}
"""
_REFUND = "MATCH (s:Skill {tenant_id: 'T', identifier: 'refund'})"
_P0 = _REFUND + "-[:REQUIRES {position: 0}]->(p:Precondition)"
_P1 = _REFUND + "-[:REQUIRES {position: 1}]->(p:Precondition)"


@dataclass(frozen=True)
class Mistake:
    """One operator mistake: the script that makes it, and what must name it."""

    name: str
    script: str
    check: str | None  # doctor's check that names it (None: a constraint refuses the script)
    fragment: str = ""  # in that finding's problem
    base: str = "cypher"  # how the rule was seeded: "cypher", "seed" (the library) or "none"
    in_run_output: bool = True  # cypher run's follow-up doctor prints the finding
    every_tenant: bool = False  # named by doctor across tenants only (a node of no tenant)
    # What the model calls before refund(order_id=2): "full" meets the rule as first seeded (so only a
    # precondition that fails closed, or one the mistake added, blocks); "partial" leaves the any-of group out.
    calls: str = "partial"


MISTAKES = [
    # -- named before: doctor or a constraint said so ----------------------------------------------------------
    Mistake("precondition tenant_id misspelt", f"{_P1} REMOVE p.tenant_id SET p.tenantid = 'T';\n" + _BUMP,
            "foreign_preconditions", "fails closed", calls="full"),
    Mistake("unknown kind", f"{_P1} SET p.kind = 'tol';\n" + _BUMP, "bad_preconditions", "unknown kind 'tol'",
            calls="full"),
    Mistake("unknown state op", _REFUND + " CREATE (s)-[:REQUIRES {position: 2}]->(:Precondition {tenant_id: 'T', "
            "kind: 'state', path: 'messages', op: 'gt', value: 1});\n" + _BUMP, "bad_preconditions", "op",
            calls="full"),
    Mistake("tool is a sentence", f"{_P0} SET p.tool = 'Look the order up first';\n" + _BUMP,
            "bad_preconditions", "tool", calls="full"),
    Mistake("REQUIRES without position", f"{_REFUND}-[r:REQUIRES {{position: 1}}]->(:Precondition) "
            "REMOVE r.position;\n" + _BUMP, "bad_preconditions", "position"),
    Mistake("key copied from another tenant", f"{_REFUND} SET s.symfonic_key = '[\"skill\", \"acme\", null, "
            "\"refund\"]';\n" + _BUMP, "keys", "'acme'"),
    Mistake("id used twice in a tenant", "CREATE (:Skill {tenant_id: 'T', id: 'T-refund', label: 'copy', "
            "steps: ['refund'], status: 'approved'});\n" + _BUMP, None),
    Mistake("catalog version as a string", f"{_REFUND} SET s.context = 'v2';\n"
            "MATCH (c:SymfonicCatalog {tenant_id: 'T'}) SET c.version = '7';\n", "catalogs", "version 7"),
    Mistake("trigger without a task", "MERGE (t:Trigger {tenant_id: 'T', id: 'T-reminder'}) SET t.condition = "
            "'the user mentions an invoice', t.status = 'pending', t.created_at = datetime();\n",
            "bad_triggers", "task is missing"),
    Mistake("skill without tenant_id", "CREATE (:Skill {tenantid: 'T', id: 'T-lost-' + randomUUID(), label: 'lost', "
            "steps: ['refund'], status: 'approved'});\n" + _BUMP, "untenanted", "no tenant_id",
            in_run_output=False, every_tenant=True),
    # -- silent before -------------------------------------------------------------------------------------------
    Mistake("forgotten catalog bump", _SKILL, None, base="none", calls="bump"),
    Mistake("same_arg for same_args", f"{_P0} REMOVE p.same_args SET p.same_arg = ['order_id'];\n" + _BUMP,
            "misspelt_properties", "'same_arg'", calls="full"),
    Mistake("same identifier twice, second without key", "MERGE (s:Skill {tenant_id: 'T', id: 'T-refund-2'}) "
            "SET s.identifier = 'refund', s.label = 'Refund again', s.steps = ['refund'], s.status = 'approved';\n"
            "MATCH (s:Skill {tenant_id: 'T', id: 'T-refund-2'}) CREATE (s)-[:REQUIRES {position: 0}]->"
            "(:Precondition {tenant_id: 'T', kind: 'tool', tool: 'sso_login'});\n" + _BUMP,
            "shared_identifiers", "'refund'", calls="full"),
    Mistake("library skill edited in place", f"{_REFUND} SET s.context = 'edited by hand';\n" + _BUMP,
            "hand_edits", "edited by hand", base="seed"),
    Mistake("hand precondition on a library skill", _REFUND + " CREATE (s)-[:REQUIRES {position: 2}]->"
            "(:Precondition {tenant_id: 'T', kind: 'tool', tool: 'sso_login'});\n" + _BUMP,
            "hand_edits", "added by hand", base="seed", calls="full"),
    Mistake("precondition 0 deleted", _SKILL + _BUMP + f"{_P0} DETACH DELETE p;\n"
            + _REFUND + " CREATE (s)-[:REQUIRES {position: 2}]->(:Precondition {tenant_id: 'T', kind: 'text', "
            "text: 'Be kind.'});\n" + _BUMP, "positions", "[0] missing"),
    # -- near misses of a known property ---------------------------------------------------------------------------
    Mistake("if_mising", _REFUND + " CREATE (s)-[:REQUIRES {position: 2}]->(:Precondition {tenant_id: 'T', "
            "kind: 'state', path: 'messages', op: 'exists', if_mising: 'apply'});\n" + _BUMP,
            "misspelt_properties", "'if_missing'", calls="full"),
    Mistake("withn", f"{_P0} SET p.withn = 'user_turn';\n" + _BUMP, "misspelt_properties", "'within'",
            calls="full"),
    Mistake("acton_tool", f"{_REFUND} REMOVE s.action_tool SET s.acton_tool = 'refund', s.steps = ['lookup_order'];\n"
            + _BUMP, "misspelt_properties", "'action_tool'", calls="full"),
    Mistake("tenantid on a precondition", f"{_P0} SET p.tenantid = p.tenant_id REMOVE p.tenant_id;\n" + _BUMP,
            "misspelt_properties", "'tenant_id'", calls="full"),
]


def _tools() -> tuple[list[StructuredTool], list[str]]:
    ran: list[str] = []

    def make(name: str) -> StructuredTool:
        def run(order_id: str = "") -> str:
            ran.append(name)
            return f"{name} done"

        return StructuredTool.from_function(run, name=name, description=f"The {name} tool.")

    return [make(n) for n in ("lookup_order", "sso_login", "verify_identity", "refund")], ran


def _call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


async def _turn(memory: TurnMemory, scope: MemoryScope, *responses: AIMessage) -> tuple[list[str], list[Any]]:
    tools, ran = _tools()
    graph = build_agent_graph(Scripted(responses=[*responses, AIMessage("done")]), tools, memory)
    out = await graph.ainvoke({"messages": [HumanMessage("refund order 2")]}, context=scope)
    return ran, out["messages"]


@pytest.fixture
async def cleanup(driver: neo4j.AsyncDriver, tenant: str) -> AsyncIterator[None]:
    yield
    await driver.execute_query(
        "MATCH (n) WHERE (n:Skill OR n:Trigger OR n:SymfonicCatalog OR n:Precondition) "
        "AND (n.tenant_id = $t OR n.tenantid = $t) DETACH DELETE n", {"t": tenant})


def _run(settings: Neo4jSettings, tmp_path: Path, tenant: str, script: str) -> CliResult:
    path = tmp_path / f"{uuid.uuid4().hex}.cypher"
    path.write_text(script.replace("'T'", f"'{tenant}'").replace("'T-", f"'{tenant}-"), encoding="utf-8")
    return run_cli("cypher", "run", str(path), env=neo4j_env(settings))


def _seed(settings: Neo4jSettings, tmp_path: Path, tenant: str) -> CliResult:
    path = tmp_path / "refund.yaml"
    path.write_text(_SEED_FILE.replace("tenant: T", f"tenant: {tenant}"), encoding="utf-8")
    return run_cli("seed", str(path), env=neo4j_env(settings))


def _named(findings: list[Finding], mistake: Mistake) -> list[Finding]:
    return [f for f in findings if f.check == mistake.check and mistake.fragment in f.problem]


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
async def test_each_mistake_is_named_and_the_guarded_action_never_runs(
    store: GraphMemoryStore, neo4j_settings: Neo4jSettings, tmp_path: Path, tenant: str, cleanup: None,
    mistake: Mistake,
) -> None:
    scope = MemoryScope(tenant)
    if mistake.base == "cypher":
        assert _run(neo4j_settings, tmp_path, tenant, _SKILL + _BUMP).returncode == 0
    elif mistake.base == "seed":
        assert _seed(neo4j_settings, tmp_path, tenant).returncode == 0
    memory = TurnMemory(store, max_age=3600)  # the rule stays cached: only a catalog bump shows an edit
    ran, _ = await _turn(memory, scope)
    assert ran == []

    result = _run(neo4j_settings, tmp_path, tenant, mistake.script)
    if mistake.check is None and mistake.base != "none":
        assert result.returncode != 0 and "already exists" in result.stderr, result  # nothing of it written
    else:
        assert result.returncode == 0, result.stderr
    if mistake.check is not None:
        findings = await diagnose(store, None if mistake.every_tenant else tenant)
        assert _named(findings, mistake), [f.problem for f in findings]
        if mistake.in_run_output:
            assert f"[{mistake.check}]" in result.stdout and mistake.fragment in result.stdout, result.stdout
    if mistake.base == "none":
        assert f"bumped the catalog version of tenant(s) {tenant}" in result.stdout, result.stdout

    before = [_call("lookup_order", "c1", order_id="2" if mistake.calls != "bump" else "1")]
    if mistake.calls == "full":
        before.append(_call("verify_identity", "c3"))
    ran, messages = await _turn(memory, scope, *before, _call("refund", "c2", order_id="2"))
    assert "refund" not in ran, f"{mistake.name}: the guarded action ran"
    [blocked] = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "c2"]
    assert blocked.status == "error"


async def test_seed_says_it_reverted_a_hand_edit(
    store: GraphMemoryStore, neo4j_settings: Neo4jSettings, tmp_path: Path, tenant: str, cleanup: None
) -> None:
    first = _seed(neo4j_settings, tmp_path, tenant)
    assert "1 created" in first.stdout, first
    assert "unchanged" in _seed(neo4j_settings, tmp_path, tenant).stdout
    edited = _run(neo4j_settings, tmp_path, tenant, f"{_REFUND} SET s.context = 'edited by hand';\n")
    assert "[hand_edits]" in edited.stdout and "bumped the catalog version" in edited.stdout, edited.stdout
    assert "once the tenant's catalog version is bumped after it" in edited.stdout, edited.stdout
    again = _seed(neo4j_settings, tmp_path, tenant)
    assert "0 updated, 0 unchanged, 1 reverted a hand edit" in again.stdout, again.stdout
    assert not [f for f in await diagnose(store, tenant) if f.check == "hand_edits"]
    changed = _SEED_FILE.replace("label: Refund", "label: Refund v2")
    (tmp_path / "refund.yaml").write_text(changed.replace("tenant: T", f"tenant: {tenant}"), encoding="utf-8")
    updated = run_cli("seed", str(tmp_path / "refund.yaml"), env=neo4j_env(neo4j_settings))
    assert "1 updated, 0 unchanged" in updated.stdout and "reverted" not in updated.stdout, updated.stdout
