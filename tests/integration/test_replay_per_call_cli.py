"""``rules replay --json`` lists every blocked call and each rule's blocks on its own, from a .gz file too."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio


def _conv(*batches: list[tuple[str, str]]) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for batch in batches:
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}
                                        for cid, name in batch]})
        messages += [{"role": "tool", "tool_call_id": cid, "content": "ok"} for cid, _ in batch]
    return messages


TRACES = [
    {"id": "none", "messages": _conv([("c1", "search")], [("c1", "buy")]), "outcome": "failure"},
    {"id": "login", "messages": _conv([("c1", "login")], [("c1", "buy")]), "outcome": "success"},
    {"id": "both", "messages": _conv([("c1", "login"), ("c2", "view_cart")], [("c3", "buy")]), "outcome": "success"},
]


async def test_replay_json_lists_blocked_calls_and_blocks_alone_from_a_gzip_file(
    store: GraphMemoryStore, scope: MemoryScope, forget: list[str], neo4j_settings: Neo4jSettings, tmp_path: Path
) -> None:
    layer = ProceduralLayer(store)
    login = await layer.seed_authored_skill(scope, label="Login first", steps=["login", "buy"], source_tag="authored:t",
                                            action_tool="buy", precondition=["login"], identifier="login-first")
    cart = await layer.seed_authored_skill(scope, label="Cart first", steps=["view_cart", "buy"],
                                           source_tag="authored:t", action_tool="buy", precondition=["view_cart"],
                                           identifier="cart-first", enforcement="shadow")
    path = tmp_path / "recorded.bin"  # gzip, known by its bytes, not its name
    path.write_bytes(gzip.compress("".join(json.dumps(t) + "\n" for t in TRACES).encode()))
    t = ["--tenant", scope.tenant_id]

    result = run_cli_on(neo4j_settings, "rules", "replay", str(path), *t, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rules = {r["skill_id"]: r for r in report["rules"]}
    assert (rules[login.id]["blocked"], rules[login.id]["blocked_alone"]) == (1, 1)
    assert (rules[cart.id]["blocked"], rules[cart.id]["blocked_alone"]) == (1, 2)
    order = [r["skill_id"] for r in report["rules"]]
    assert report["decisions"] == [
        {"trace": "none", "call_id": "c1", "index": 1, "tool": "buy",
         "rules": [i for i in order if i in (login.id, cart.id)], "mode": "enforce",
         "reason": "Missing precondition: call login before buy (skill: Login first)."},
        {"trace": "login", "call_id": "c1", "index": 1, "tool": "buy", "rules": [cart.id], "mode": "shadow",
         "reason": "Missing precondition: call view_cart before buy (skill: Cart first)."},
    ]

    table = run_cli_on(neo4j_settings, "rules", "replay", str(path), *t)
    assert table.returncode == 0, table.stderr
    assert "alone" in table.stdout and "blocked calls (2 of 2" in table.stdout

    bad_now = run_cli_on(neo4j_settings, "rules", "replay", str(path), *t, "--now", "yesterday")
    assert bad_now.returncode == 2 and "--now" in bad_now.stderr
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(path.read_bytes()[:20])
    for command in (["rules", "replay"], ["rules", "mine"]):
        refused = run_cli_on(neo4j_settings, *command, str(broken), *t)
        assert refused.returncode == 2 and "broken.jsonl.gz: not a valid gzip file" in refused.stderr


async def test_replay_now_is_the_time_the_rules_see(
    store: GraphMemoryStore, scope: MemoryScope, forget: list[str], neo4j_settings: Neo4jSettings, tmp_path: Path
) -> None:
    season = await ProceduralLayer(store).seed_authored_skill(
        scope, label="Season", steps=["buy"], source_tag="authored:t", action_tool="buy",
        precondition=[{"check": {"where": 'now < timestamp("2026-06-01T00:00:00Z")',
                                 "message": "Sales close at the end of May. Tell the customer."}}])
    path = tmp_path / "one.json"
    path.write_text(json.dumps([{"id": "late", "messages": _conv([("c1", "buy")])}]))
    t = ["--tenant", scope.tenant_id, "--json"]

    def decisions(now: str) -> list[Any]:
        result = run_cli_on(neo4j_settings, "rules", "replay", str(path), *t, "--now", now)
        assert result.returncode == 0, result.stderr
        return list(json.loads(result.stdout)["decisions"])

    assert decisions("2026-05-31T23:59:59Z") == []
    blocked = [{"trace": "late", "call_id": "c1", "index": 0, "tool": "buy", "rules": [season.id], "mode": "enforce",
                "reason": "Not allowed: Sales close at the end of May."}]
    assert decisions("2026-06-01T00:00:00") == blocked  # zone-less: UTC
    assert decisions("2026-06-01T01:30:00+02:00") == []  # 23:30 UTC on May 31
