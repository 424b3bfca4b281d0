"""What an operator lists: `tenants list` counts approved, draft and rejected rules apart; `skills list` shows
each rule's mode (enforce or shadow) and the evidence a mined rule carries. On the real graph, through the CLI."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer
from symfonic_graph.learning.mining import RuleProposal
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio


def _row(settings: Neo4jSettings, tenant: str) -> dict[str, Any]:
    proc = run_cli_on(settings, "tenants", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    [row] = [r for r in json.loads(proc.stdout) if r["tenant_id"] == tenant]
    return dict(row)


async def test_tenants_list_counts_approved_draft_and_rejected_rules_apart(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    layer = ProceduralLayer(store)
    rng = random.Random(11)
    expected = {"skills": 0, "drafts": 0, "rejected": 0}
    for round_ in range(3):
        for i in range(rng.randrange(1, 5)):
            scope = MemoryScope(tenant, rng.choice([None, "u1", "u2"]))
            write = layer.seed_authored_skill if rng.random() < 0.5 else layer.propose_skill
            skill = await write(scope, label=f"r{round_}-{i}", steps=[f"tool_{round_}_{i}"], source_tag="authored:x")
            fate = rng.choice(["keep", "keep", "reject", "retract"])
            if fate == "reject":
                await layer.reject(scope, skill.id)
                expected["rejected"] += 1
            elif fate == "retract":
                await store.retract(scope, skill.id, reason="test")  # retracted: counted nowhere
            else:
                expected["skills" if skill.status == "approved" else "drafts"] += 1
        row = _row(neo4j_settings, tenant)
        assert {k: row[k] for k in expected} == expected, round_
    text = run_cli_on(neo4j_settings, "tenants", "list").stdout
    assert (f"{tenant}  namespaces={len(row['namespaces'])}  skills={expected['skills']}  "
            f"drafts={expected['drafts']}  rejected={expected['rejected']}  ") in text


async def test_skills_list_shows_each_rules_mode_and_a_mined_drafts_evidence(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, scope: MemoryScope, forget: list[str]
) -> None:
    layer = ProceduralLayer(store)
    live = await layer.seed_authored_skill(scope, label="Deploy", steps=["deploy"], source_tag="authored:x",
                                           precondition=["run_tests"])
    quiet = await layer.seed_authored_skill(scope, label="Refund", steps=["refund"], source_tag="authored:x",
                                            precondition=["lookup"])
    await layer.propose_mined(scope, [RuleProposal("deliver", "get_status", 12, 0.95, 3, ("c-1", "c-2"))])
    t = ["--tenant", scope.tenant_id]
    assert run_cli_on(neo4j_settings, "skills", "shadow", quiet.id, *t).returncode == 0

    listed = json.loads(run_cli_on(neo4j_settings, "skills", "list", *t, "--drafts", "--json").stdout)
    by_label = {s["label"]: s for s in listed}
    assert by_label["Deploy"]["mode"] == "enforce" and by_label["Deploy"]["evidence"] is None
    assert by_label["Refund"]["mode"] == "shadow" and by_label["Refund"]["enforcement"] == "shadow"
    mined = by_label["Call get_status before deliver"]
    assert (mined["status"], mined["mode"]) == ("draft", "enforce")
    assert mined["evidence"] == {"support": 12, "confidence": 0.95, "failures_without": 3, "examples": ["c-1", "c-2"]}
    assert {"id", "status", "guards", "precondition", "enforcement"} <= set(mined)  # the fields it had stay

    lines = run_cli_on(neo4j_settings, "skills", "list", *t, "--drafts").stdout.splitlines()
    [deploy] = [line for line in lines if line.startswith(live.id)]
    [refund] = [line for line in lines if line.startswith(quiet.id)]
    [draft] = [line for line in lines if "get_status before deliver" in line]
    assert "approved enforce Deploy" in deploy and "support=" not in deploy
    assert "approved shadow  Refund" in refund
    assert "draft    enforce Call get_status before deliver" in draft
    assert draft.endswith("support=12  confidence=0.950  failures_without=3  examples=c-1,c-2")
