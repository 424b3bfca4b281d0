"""Rules an operator can trust, on the real graph.

Conversations of a scripted agent (real LangGraph/LangChain loop, real tools
recording what ran, real Neo4j; only the chat model is scripted) are recorded,
mined, proposed as drafts, replayed, approved, and the next turn enforces the
approved rule. Shadow rules never block and are reported, through the LangChain
middleware and ``build_agent_graph``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import neo4j
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, messages_to_dict

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    Trace,
    TurnMemory,
    load_traces,
    mine_rules,
    replay,
)
from symfonic_graph.cli._rules_trust import set_enforcement
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.langgraph import build_agent_graph
from tests._cli import run_cli_on
from tests._fakes import Scripted, ai_calls, assert_every_call_answered, recording_tools
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio
MISSING = "Missing precondition: call get_status before deliver (skill: Call get_status before deliver)."


async def _record(store: GraphMemoryStore, scope: MemoryScope, n: int, *, careful: bool) -> list[Any]:
    """One conversation of the scripted agent: careful ones check the status before delivering."""
    tools, _ = recording_tools("get_status", "deliver", "lookup")
    steps = [ai_calls(("lookup", f"c{n}a"))]
    if careful:
        steps.append(ai_calls(("get_status", f"c{n}b")))
    steps += [ai_calls(("deliver", f"c{n}c")), AIMessage("done")]
    graph = build_agent_graph(Scripted(responses=steps), tools, TurnMemory(store))
    out = await graph.ainvoke({"messages": [HumanMessage("deliver the weekly report")]}, context=scope)
    return list(out["messages"])


async def _recorded_file(store: GraphMemoryStore, scope: MemoryScope, path: Path) -> Path:
    """Six careful, successful conversations and two careless, failed ones, as a JSONL file."""
    with path.open("w", encoding="utf-8") as out:
        for n in range(8):
            careful = n < 6
            messages = await _record(store, scope, n, careful=careful)
            entry = {"id": f"conv-{n}", "messages": messages_to_dict(messages),
                     "outcome": "success" if careful else "failure"}
            out.write(json.dumps(entry) + "\n")
    return path


async def test_record_mine_propose_replay_approve_and_the_next_turn_enforces(
    store: GraphMemoryStore, scope: MemoryScope, forget: list[str], tmp_path: Path, driver: neo4j.AsyncDriver
) -> None:
    path = await _recorded_file(store, scope, tmp_path / "conversations.jsonl")
    layer = ProceduralLayer(store)

    proposals = mine_rules(load_traces(path), actions=["deliver"])
    assert [(p.precondition, p.action, p.support, p.confidence, p.failures_without) for p in proposals] == [
        ("get_status", "deliver", 6, 1.0, 2), ("lookup", "deliver", 6, 1.0, 0)]
    assert proposals == mine_rules(load_traces(path), actions=["deliver"])  # mining twice: the same

    first = await layer.propose_mined(scope, proposals)
    again = await layer.propose_mined(scope, proposals)  # proposing twice: the same drafts, evidence updated
    assert [o["outcome"] for o in first] == ["created", "created"]
    assert [o["outcome"] for o in again] == ["updated", "updated"]
    assert [o["ids"] for o in again] == [o["ids"] for o in first]
    drafts = await layer.query_skills(scope, include_drafts=True)
    assert sorted((d.identifier, d.status, d.source) for d in drafts) == [
        ("mined:deliver:get_status", "draft", "mined"), ("mined:deliver:lookup", "draft", "mined")]
    assert await layer.query_skills(scope) == []  # drafts never reach a turn
    records, _, _ = await driver.execute_query(
        "MATCH (s:Skill {id: $id}) RETURN s.support AS support, s.confidence AS confidence, "
        "s.failures_without AS failures_without, s.examples AS examples", {"id": first[0]["ids"][0]})
    [row] = records
    assert (row["support"], row["confidence"], row["failures_without"]) == (6, 1.0, 2)
    assert row["examples"] == [f"conv-{i}" for i in range(5)]

    # replay the drafts: the status rule would have blocked both failed conversations, no successful one
    report = replay(load_traces(path), drafts)
    by_id = {r.skill_id: r for r in report.rules}
    status_rule = by_id[first[0]["ids"][0]]
    assert (report.traces, status_rule.checked, status_rule.blocked) == (8, 8, 2)
    assert (status_rule.blocked_in_success, status_rule.blocked_in_failure) == (0, 2)
    assert status_rule.trace_ids == ("conv-6", "conv-7")

    # approve one, reject the other; mining again neither demotes nor resurrects them
    await layer.approve(scope, first[0]["ids"][0])
    await layer.reject(scope, first[1]["ids"][0])
    third = await layer.propose_mined(scope, proposals)
    assert [(o["outcome"], o["statuses"]) for o in third] == [("kept", ["approved"]), ("kept", ["rejected"])]
    [live] = await layer.query_skills(scope)
    assert (live.identifier, live.status) == ("mined:deliver:get_status", "approved")

    # the next turn enforces the approved rule: a careless deliver does not run
    tools, executed = recording_tools("get_status", "deliver", "lookup")
    model = Scripted(responses=[ai_calls(("deliver", "x1")), AIMessage("sorry")])
    graph = build_agent_graph(model, tools, TurnMemory(store))
    out = await graph.ainvoke({"messages": [HumanMessage("deliver it")]}, context=scope)
    assert executed == []
    [blocked] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert blocked.status == "error" and str(blocked.content).startswith(MISSING)
    assert_every_call_answered(model)


async def _shadow_rule(store: GraphMemoryStore, scope: MemoryScope) -> str:
    skill = await ProceduralLayer(store).seed_authored_skill(
        scope, label="Deliver", steps=["deliver"], source_tag="authored:test", action_tool="deliver",
        precondition=["get_status"])
    await set_enforcement(store, scope, skill.id, "shadow")
    return skill.id


def _would_block(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "would have blocked deliver" in r.getMessage()]


async def test_a_shadow_rule_never_blocks_and_is_reported_through_the_middleware(
    store: GraphMemoryStore, scope: MemoryScope, forget: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    skill_id = await _shadow_rule(store, scope)
    memory = TurnMemory(store)
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[ai_calls(("deliver", "c1")), AIMessage("delivered")])
    agent = create_agent(model, tools, system_prompt="You deliver.", middleware=[MemoryMiddleware(memory)])
    with caplog.at_level(logging.INFO, logger="symfonic_graph"):
        await agent.ainvoke({"messages": [HumanMessage("deliver it")]}, context=scope)
    assert executed == ["deliver"]  # the shadow rule did not block
    assert len(_would_block(caplog)) == 1  # and said it would have
    assert all("`deliver`" not in str(shown[0].content) for shown in model.seen if isinstance(shown[0], SystemMessage))

    # `skills enforce` bumps the catalog: the same TurnMemory enforces it on the next turn
    await set_enforcement(store, scope, skill_id, "enforce")
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[ai_calls(("deliver", "c2")), AIMessage("sorry")])
    agent = create_agent(model, tools, system_prompt="You deliver.", middleware=[MemoryMiddleware(memory)])
    await agent.ainvoke({"messages": [HumanMessage("deliver it")]}, context=scope)
    assert executed == []


async def test_a_shadow_rule_never_blocks_and_is_reported_through_build_agent_graph(
    store: GraphMemoryStore, scope: MemoryScope, forget: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    await _shadow_rule(store, scope)
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[ai_calls(("deliver", "c1")), AIMessage("delivered")])
    graph = build_agent_graph(model, tools, TurnMemory(store))
    with caplog.at_level(logging.INFO, logger="symfonic_graph"):
        out = await graph.ainvoke({"messages": [HumanMessage("deliver it")]}, context=scope)
    assert executed == ["deliver"]
    assert len(_would_block(caplog)) == 1
    assert not any(isinstance(m, ToolMessage) and m.status == "error" for m in out["messages"])
    # replay still counts what it would block once enforced
    [rule] = replay([Trace("live", out["messages"])], await ProceduralLayer(store).query_skills(scope)).rules
    assert (rule.enforcement, rule.blocked) == ("shadow", 1)


async def test_the_cli_mines_proposes_approves_replays_and_shadows(
    store: GraphMemoryStore, scope: MemoryScope, forget: list[str], neo4j_settings: Neo4jSettings, tmp_path: Path
) -> None:
    path = await _recorded_file(store, scope, tmp_path / "conversations.jsonl")
    t = ["--tenant", scope.tenant_id]

    table = run_cli_on(neo4j_settings, "rules", "mine", str(path), *t, "--actions", "deliver")
    assert table.returncode == 0, table.stderr
    assert "get_status -> deliver" in table.stdout and "lookup -> deliver" in table.stdout
    for _ in range(2):
        proposed = run_cli_on(neo4j_settings, "rules", "mine", str(path), *t, "--actions", "deliver", "--propose",
                              "--json")
        assert proposed.returncode == 0, proposed.stderr
    drafts = json.loads(run_cli_on(neo4j_settings, "skills", "list", *t, "--drafts", "--json").stdout)
    assert sorted(d["identifier"] for d in drafts) == ["mined:deliver:get_status", "mined:deliver:lookup"]
    assert [d["draft"]["outcome"] for d in json.loads(proposed.stdout)["proposals"]] == ["updated", "updated"]

    approved = run_cli_on(neo4j_settings, "skills", "approve", "mined:deliver:get_status", *t)  # by identifier
    assert approved.returncode == 0, approved.stderr
    report = json.loads(run_cli_on(neo4j_settings, "rules", "replay", str(path), *t, "--json").stdout)
    [rule] = report["rules"]
    assert (report["traces"], rule["action"], rule["blocked"], rule["blocked_in_failure"]) == (8, "deliver", 2, 2)
    with_drafts = run_cli_on(neo4j_settings, "rules", "replay", str(path), *t, "--include-drafts")
    assert with_drafts.returncode == 0 and "conv-6, conv-7" in with_drafts.stdout

    shadowed = run_cli_on(neo4j_settings, "skills", "shadow", rule["skill_id"], *t)
    assert shadowed.returncode == 0, shadowed.stderr
    [skill] = await ProceduralLayer(store).query_skills(scope)
    assert skill.enforcement == "shadow"
    missing = run_cli_on(neo4j_settings, "skills", "enforce", "no-such-skill", *t)
    assert missing.returncode == 2 and missing.stderr.startswith("error:")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "messages": {}}\n')
    broken = run_cli_on(neo4j_settings, "rules", "replay", str(bad), *t)
    assert broken.returncode == 2 and "line 1: messages: must be a list" in broken.stderr
