"""A rule written with `enforcement: shadow` never blocks, from its first turn, on every write path.

Seed file (one transaction, staged then published, in batches) and the layer's `seed_authored_skill`: the
first turn after the write runs the guarded tool of the shadow rule and reports it, while an enforced rule
of the same write blocks its tool. Re-seeding without the field keeps the mode; `enforcement: enforce` flips it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.langgraph import build_agent_graph
from symfonic_graph.ops.seedfile import load_seed_file
from symfonic_graph.ops.seeding import apply_seed, plan_seed
from tests._cli import run_cli_on
from tests._fakes import ai_calls, recording_tools, scripted
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

SEED = """
skills:
  - label: Deploy
    identifier: deploy
    steps: [deploy]
    source_tag: authored:ci
    precondition: [run_tests]{mode}
  - label: Refund
    steps: [refund]
    source_tag: authored:billing
    precondition: [lookup_order]
"""


def _file(tmp_path: Path, mode: str | None) -> Path:
    path = tmp_path / f"seed-{mode}.yaml"
    path.write_text(SEED.format(mode="" if mode is None else f"\n    enforcement: {mode}"), encoding="utf-8")
    return path


async def _first_turn(store: GraphMemoryStore, scope: MemoryScope) -> tuple[list[str], list[ToolMessage]]:
    """A fresh process's first turn: the model calls deploy and refund, neither precondition called."""
    tools, executed = recording_tools("deploy", "refund", "run_tests", "lookup_order")
    model = scripted(ai_calls(("deploy", "c1"), ("refund", "c2")), AIMessage("done"))
    out = await build_agent_graph(model, tools, TurnMemory(store)).ainvoke(
        {"messages": [HumanMessage("ship it and refund")]}, context=scope)
    return executed, [m for m in out["messages"] if isinstance(m, ToolMessage)]


@pytest.mark.parametrize("path", ["seed file", "staged then published", "in batches", "seed_authored_skill"])
async def test_a_rule_born_in_shadow_never_blocks_from_its_first_turn(
    path: str, neo4j_settings: Neo4jSettings, store: GraphMemoryStore, scope: MemoryScope, tmp_path: Path,
    caplog: pytest.LogCaptureFixture, forget: list[str],
) -> None:
    t = ["--tenant", scope.tenant_id]
    if path == "seed file":
        done = run_cli_on(neo4j_settings, "seed", str(_file(tmp_path, "shadow")), *t)
        assert done.returncode == 0, done.stderr
    elif path == "staged then published":
        staged = run_cli_on(neo4j_settings, "seed", str(_file(tmp_path, "shadow")), *t, "--write-id", "w1")
        assert staged.returncode == 0, staged.stderr
        assert run_cli_on(neo4j_settings, "publish", "w1", *t).returncode == 0
    elif path == "in batches":
        await apply_seed(store, plan_seed(load_seed_file(_file(tmp_path, "shadow")), scope), batch_size=1)
    else:
        layer = ProceduralLayer(store)
        await layer.seed_authored_skill(scope, label="Deploy", identifier="deploy", steps=["deploy"],
                                        source_tag="authored:ci", precondition=["run_tests"], enforcement="shadow")
        await layer.seed_authored_skill(scope, label="Refund", steps=["refund"], source_tag="authored:billing",
                                        precondition=["lookup_order"])
    with caplog.at_level(logging.INFO, logger="symfonic_graph.gate"):
        executed, answers = await _first_turn(store, scope)
    assert executed == ["deploy"]  # the shadow rule let deploy run; the enforced one kept refund from running
    assert [m.tool_call_id for m in answers if m.status == "error"] == ["c2"]
    assert any("shadow rule 'Deploy'" in r.getMessage() and "would have blocked deploy" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    explained = run_cli_on(neo4j_settings, "explain", "--tool", "deploy", *t)
    assert "verdict: allowed" in explained.stdout and "shadow skill Deploy" in explained.stdout


async def test_a_reseed_keeps_the_mode_unless_the_file_names_one(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, scope: MemoryScope, tmp_path: Path, forget: list[str]
) -> None:
    t = ["--tenant", scope.tenant_id]
    assert run_cli_on(neo4j_settings, "seed", str(_file(tmp_path, "shadow")), *t).returncode == 0
    again = run_cli_on(neo4j_settings, "seed", str(_file(tmp_path, None)), *t)  # no field: the skill keeps its mode
    assert "skills: 0 created, 0 updated, 2 unchanged" in again.stdout, again.stdout
    assert (await _first_turn(store, scope))[0] == ["deploy"]
    plan = run_cli_on(neo4j_settings, "seed", str(_file(tmp_path, "enforce")), *t, "--plan")
    assert "skills: 0 created, 1 updated, 1 unchanged" in plan.stdout, plan.stdout
    assert run_cli_on(neo4j_settings, "seed", str(_file(tmp_path, "enforce")), *t).returncode == 0
    assert (await _first_turn(store, scope))[0] == []  # enforced now: deploy waits for run_tests
    listed = run_cli_on(neo4j_settings, "skills", "list", *t).stdout
    assert "approved enforce Deploy" in listed
