"""Rules checked against the agent's tools, on the real graph, through every wiring and the CLI."""

from __future__ import annotations

import json
import logging

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.cli import main
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.langgraph import build_agent_graph
from tests._fakes import Scripted, recording_tools
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio
TOOLS = ("lookup_order", "issue_refund", "verify_identity", "delete_account")


async def _seed(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    await layer.seed_authored_skill(scope, label="Close account", steps=["close"], source_tag="authored:t",
                                    action_tool="delete_acount", precondition=["verify_identity"])
    await layer.seed_authored_skill(scope, label="Refunds", steps=["refund"], source_tag="authored:t",
                                    action_tool="issue_refund",
                                    precondition=["lookup_order", "request_manager_approval"])


def _lint_logs(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage().split(": ", 1)[1]) for r in caplog.records if r.name == "symfonic_graph.lint"]


async def test_the_middleware_reports_once_and_leaves_out_rules_for_tools_the_agent_lacks(
    store: GraphMemoryStore, scope: MemoryScope, caplog: pytest.LogCaptureFixture
) -> None:
    await _seed(store, scope)
    tools, _ = recording_tools(*TOOLS)
    model = Scripted(responses=[AIMessage("one"), AIMessage("two")])
    agent = create_agent(model, tools, system_prompt="You help.", middleware=[MemoryMiddleware(TurnMemory(store))])
    with caplog.at_level(logging.DEBUG, logger="symfonic_graph.lint"):
        for _ in range(2):
            await agent.ainvoke({"messages": [HumanMessage("hi")]}, context=scope)
    logs = _lint_logs(caplog)
    assert [level for level, _ in logs] == ["DEBUG", "ERROR"]  # once, not once per turn
    assert logs[0][1].startswith("Close account: action tool `delete_acount`")
    assert "precondition tool `request_manager_approval`" in logs[1][1]
    system = str(model.seen[0][0].content)
    assert "delete_acount" not in system  # a rule that never applies is not shown
    assert "`request_manager_approval` BEFORE calling `issue_refund`" in system


async def test_build_agent_graph_reports_once_and_leaves_out_rules_for_tools_the_agent_lacks(
    store: GraphMemoryStore, scope: MemoryScope, caplog: pytest.LogCaptureFixture
) -> None:
    await _seed(store, scope)
    tools, _ = recording_tools(*TOOLS)
    model = Scripted(responses=[AIMessage("one"), AIMessage("two")])
    graph = build_agent_graph(model, tools, TurnMemory(store))
    with caplog.at_level(logging.DEBUG, logger="symfonic_graph.lint"):
        for _ in range(2):
            await graph.ainvoke({"messages": [HumanMessage("hi")]}, context=scope)
    assert [level for level, _ in _lint_logs(caplog)] == ["DEBUG", "ERROR"]
    system = str(model.seen[0][0].content)
    assert "delete_acount" not in system and "BEFORE calling `issue_refund`" in system


async def test_agents_sharing_a_tenants_catalog_log_no_warning_about_each_others_tools(
    store: GraphMemoryStore, scope: MemoryScope, caplog: pytest.LogCaptureFixture
) -> None:
    layer = ProceduralLayer(store)
    await layer.seed_authored_skill(scope, label="Refunds", steps=["issue_refund"], source_tag="authored:t",
                                    action_tool="issue_refund", precondition=["lookup_order"])
    await layer.seed_authored_skill(scope, label="Deploys", steps=["deploy"], source_tag="authored:t",
                                    action_tool="deploy", precondition=["run_tests"])
    await layer.seed_authored_skill(scope, label="Rollbacks", steps=["rollback"], source_tag="authored:t",
                                    action_tool="rollback", precondition=["page_oncall"])  # ops lacks page_oncall
    memory = TurnMemory(store)
    support, _ = recording_tools("lookup_order", "issue_refund")
    ops, _ = recording_tools("deploy", "run_tests", "rollback")
    agents = [build_agent_graph(Scripted(responses=[AIMessage("a"), AIMessage("b")]), support, memory),
              create_agent(Scripted(responses=[AIMessage("a"), AIMessage("b")]), ops, system_prompt="You help.",
                           middleware=[MemoryMiddleware(memory)])]
    with caplog.at_level(logging.DEBUG, logger="symfonic_graph.lint"):
        for _ in range(2):
            for agent in agents:
                await agent.ainvoke({"messages": [HumanMessage("hi")]}, context=scope)
    logs = _lint_logs(caplog)
    loud = [text for level, text in logs if level != "DEBUG"]
    assert len(loud) == 1 and "precondition tool `page_oncall`" in loud[0]  # the ops agent's own rule, ERROR
    quiet = sorted(text.split(":")[0] for level, text in logs if level == "DEBUG")
    # each agent once for the other's rules (support lacks deploy and rollback, ops lacks issue_refund)
    assert quiet == ["Deploys", "Refunds", "Rollbacks"]
    assert not any("WARNING" in text for level, text in logs if level == "DEBUG")


def test_rules_lint_prints_the_findings_and_exits_1(
    neo4j_settings: Neo4jSettings, _schema: None, tenant: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import anyio

    async def seed() -> None:
        async with GraphMemoryStore.connect(neo4j_settings.uri, neo4j_settings.user, neo4j_settings.password,
                                            database=neo4j_settings.database) as store:
            await _seed(store, MemoryScope(tenant))

    anyio.run(seed)
    monkeypatch.setenv("NEO4J_URI", neo4j_settings.uri)
    monkeypatch.setenv("NEO4J_USER", neo4j_settings.user)
    monkeypatch.setenv("NEO4J_PASSWORD", neo4j_settings.password)
    try:
        assert main(["rules", "lint", "--tenant", tenant, "--tools", ",".join(TOOLS)]) == 1
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith("WARNING Close account: action tool `delete_acount`")
        assert out[1].startswith("ERROR Refunds: precondition tool `request_manager_approval`")
        assert main(["rules", "lint", "--tenant", tenant, "--json", "--tools",
                     ",".join([*TOOLS, "delete_acount", "request_manager_approval"])]) == 0
        assert json.loads(capsys.readouterr().out) == []
        assert main(["rules", "lint", "--tenant", tenant, "--tools", " "]) == 2  # bad usage: one line, exit 2
        assert capsys.readouterr().err.startswith("error: --tools")
    finally:
        async def forget() -> None:
            async with GraphMemoryStore.connect(neo4j_settings.uri, neo4j_settings.user, neo4j_settings.password,
                                                database=neo4j_settings.database) as store:
                await store.driver.execute_query("MATCH (n {tenant_id: $t}) DETACH DELETE n", t=tenant)

        anyio.run(forget)
