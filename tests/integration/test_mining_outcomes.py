"""Mining that fits real logs, through the CLI on a real Neo4j: --outcomes, near misses, same_args drafts,
and a draft proposed in shadow."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer
from symfonic_graph.errors import ValidationError
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio


def _conv(*calls: tuple[str, dict[str, Any]]) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "cancel my trip"}]
    for n, (name, args) in enumerate(calls):
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"id": f"c{n}", "type": "function",
                                         "function": {"name": name, "arguments": json.dumps(args)}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": "{}"})
    return messages


def _cancel(rid: str, cancelled: str | None = None) -> list[Any]:
    return _conv(("get_reservation_details", {"reservation_id": rid}),
                 ("cancel_reservation", {"reservation_id": cancelled or rid}))


def _write(path: Path, traces: list[dict[str, Any]]) -> Path:
    path.write_bytes(gzip.compress("".join(json.dumps(t) + "\n" for t in traces).encode()))
    return path


async def test_outcomes_all_proposes_what_only_failed_conversations_support_and_near_misses_are_listed(
    scope: MemoryScope, forget: list[str], neo4j_settings: Neo4jSettings, tmp_path: Path
) -> None:
    failed = [{"id": f"f{i}", "messages": _conv(("login", {}), ("buy", {})), "outcome": "failure"} for i in range(6)]
    path = _write(tmp_path / "failed.jsonl.gz", failed)
    t = ["--tenant", scope.tenant_id, "--json"]

    default = json.loads(run_cli_on(neo4j_settings, "rules", "mine", str(path), *t).stdout)
    assert (default["outcomes"], default["proposals"], default["counted"], default["traces"]) == ("success", [], 0, 6)
    every = json.loads(run_cli_on(neo4j_settings, "rules", "mine", str(path), *t, "--outcomes", "all").stdout)
    assert [(p["precondition"], p["action"], p["support"], p["failures_without"]) for p in every["proposals"]] == [
        ("login", "buy", 6, 0)]

    near = json.loads(run_cli_on(neo4j_settings, "rules", "mine", str(path), *t, "--outcomes", "all",
                                 "--min-support", "8").stdout)
    assert near["proposals"] == []
    assert near["near_misses"] == [{"action": "buy", "precondition": "login", "support": 6, "confidence": 1.0,
                                    "support_short": 2, "confidence_short": 0.0}]
    table = run_cli_on(neo4j_settings, "rules", "mine", str(path), "--tenant", scope.tenant_id, "--outcomes", "all",
                       "--min-support", "8")
    assert "near misses (not proposed)" in table.stdout and "2 more" in table.stdout
    wrong = run_cli_on(neo4j_settings, "rules", "mine", str(path), *t, "--outcomes", "failure")
    assert wrong.returncode == 2


async def test_a_same_args_proposal_becomes_a_draft_that_checks_the_argument_once_approved(
    store: GraphMemoryStore, scope: MemoryScope, forget: list[str], neo4j_settings: Neo4jSettings, tmp_path: Path
) -> None:
    traces = [{"id": f"ok{i}", "messages": _cancel(f"R{i}"), "outcome": "success"} for i in range(6)]
    path = _write(tmp_path / "cancels.jsonl.gz", traces)
    t = ["--tenant", scope.tenant_id]

    mined = run_cli_on(neo4j_settings, "rules", "mine", str(path), *t, "--actions", "cancel_reservation",
                       "--propose", "--json")
    assert mined.returncode == 0, mined.stderr
    [proposal] = json.loads(mined.stdout)["proposals"]
    assert (proposal["precondition"], proposal["same_args"], proposal["draft"]["outcome"]) == (
        "get_reservation_details", ["reservation_id"], "created")
    table = run_cli_on(neo4j_settings, "rules", "mine", str(path), *t, "--actions", "cancel_reservation")
    assert "get_reservation_details (same reservation_id) -> cancel_reservation" in table.stdout

    drafts = json.loads(run_cli_on(neo4j_settings, "skills", "list", *t, "--drafts", "--json").stdout)
    [draft] = [d for d in drafts if d["identifier"] == "mined:cancel_reservation:get_reservation_details"]
    assert draft["evidence"] == {"support": 6, "confidence": 1.0, "failures_without": 0,
                                 "examples": ["ok0", "ok1", "ok2", "ok3", "ok4"]}
    [skill] = [s for s in await ProceduralLayer(store).query_skills(scope, include_drafts=True)
               if s.id == draft["id"]]
    assert skill.precondition == ({"tool": "get_reservation_details", "same_args": ["reservation_id"]},)
    assert skill.label == "Call get_reservation_details (same reservation_id) before cancel_reservation"

    assert run_cli_on(neo4j_settings, "skills", "approve", draft["id"], *t).returncode == 0
    other = _write(tmp_path / "other.jsonl.gz", [{"id": "wrong", "messages": _cancel("R1", cancelled="R2")},
                                                 {"id": "right", "messages": _cancel("R1")}])
    report = json.loads(run_cli_on(neo4j_settings, "rules", "replay", str(other), *t, "--json").stdout)
    assert [(d["trace"], d["index"], d["mode"]) for d in report["decisions"]] == [("wrong", 1, "enforce")]


async def test_propose_skill_takes_enforcement_and_the_approved_rule_keeps_it(
    store: GraphMemoryStore, scope: MemoryScope, forget: list[str]
) -> None:
    layer = ProceduralLayer(store)
    draft = await layer.propose_skill(scope, label="Refunds", steps=["refund"], source_tag="authored:t",
                                      action_tool="refund", precondition=["lookup"], enforcement="shadow")
    plain = await layer.propose_skill(scope, label="Deploys", steps=["deploy"], source_tag="authored:t",
                                      action_tool="deploy", precondition=["test"])
    assert (draft.status, draft.shadow, plain.shadow) == ("draft", True, False)
    await layer.approve(scope, draft.id)
    [live] = [s for s in await layer.query_skills(scope) if s.id == draft.id]
    assert (live.status, live.enforcement) == ("approved", "shadow")
    with pytest.raises(ValidationError, match=r"enforcement"):
        await layer.propose_skill(scope, label="Bad", steps=["x"], source_tag="authored:t", action_tool="x",
                                  precondition=["y"], enforcement="loud")
