"""A rule born in shadow from a seed file never blocks, and its promotion is a record.

Through the CLI and a live agent on a real Neo4j (only the chat model is scripted): a seed file writes
``deploy`` in shadow; turn after turn the agent deploys without running the tests and nothing is
blocked, each call a would-block; ``skills enforce --actor --reason`` promotes it; ``skills history``
shows that change (shadow -> enforce, who, why) and the next turn blocks.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, TurnMemory
from symfonic_graph.langgraph import build_agent_graph
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
    precondition: [run_tests]
    enforcement: shadow
"""


async def _turn(memory: TurnMemory, scope: MemoryScope, n: int) -> list[str]:
    """One turn: the model deploys without running the tests; the tools that really ran."""
    tools, executed = recording_tools("deploy", "run_tests")
    model = scripted(ai_calls(("deploy", f"c{n}")), AIMessage("done"))
    await build_agent_graph(model, tools, memory).ainvoke({"messages": [HumanMessage("ship it")]}, context=scope)
    return executed


async def test_a_seeded_shadow_rule_never_blocks_and_its_promotion_is_recorded_with_actor_and_reason(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, scope: MemoryScope, tmp_path: Path,
    caplog: pytest.LogCaptureFixture, forget: list[str],
) -> None:
    t = ["--tenant", scope.tenant_id]
    path = tmp_path / "rules.yaml"
    path.write_text(SEED, encoding="utf-8")
    seeded = run_cli_on(neo4j_settings, "seed", str(path), *t)
    assert seeded.returncode == 0, seeded.stderr
    memory = TurnMemory(store, max_age=0.0)  # every turn reads the catalog again
    with caplog.at_level(logging.INFO, logger="symfonic_graph.decisions"):
        for n in range(5):
            assert await _turn(memory, scope, n) == ["deploy"]  # in shadow: never blocked
    would = [r.getMessage() for r in caplog.records if r.name == "symfonic_graph.decisions"]
    assert len(would) == 5 and all(m.startswith("would_block ") and "mode=shadow" in m for m in would), would
    assert "approved shadow  Deploy" in run_cli_on(neo4j_settings, "skills", "list", *t).stdout

    promoted = run_cli_on(neo4j_settings, "skills", "enforce", "deploy", *t, "--actor", "alice",
                          "--reason", "5 would-blocks, all true")
    assert promoted.returncode == 0, promoted.stderr
    history = json.loads(run_cli_on(neo4j_settings, "skills", "history", "deploy", *t, "--json").stdout)
    assert (history[-1]["change"], history[-1]["from"], history[-1]["to"], history[-1]["actor"],
            history[-1]["reason"]) == ("enforce", "shadow", "enforce", "alice", "5 would-blocks, all true")
    text = run_cli_on(neo4j_settings, "skills", "history", "deploy", *t).stdout
    assert "enforce  shadow -> enforce  by alice: 5 would-blocks, all true" in text, text
    assert await _turn(memory, scope, 9) == []  # enforced now: deploy waits for run_tests
