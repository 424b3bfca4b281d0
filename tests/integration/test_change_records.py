"""Changes are records: every lifecycle change writes who, why, when and old -> new with the change itself.

Through the in-process CLI and a real Neo4j: approve, shadow, enforce, reject,
retract and restore each leave one record that ``skills history --json`` lists
oldest first; a refused change leaves none (its record rolled back with it);
an erase leaves a receipt ``tenants erasures`` lists, which a later erase
keeps; another tenant's or namespace's history is never shown.
"""

from __future__ import annotations

import getpass
import json
import random
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer
from symfonic_graph.errors import ValidationError
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio


def _cli(settings: Neo4jSettings, *argv: str) -> Any:
    result = run_cli_on(settings, *argv)
    assert result.returncode == 0, (argv, result.stderr)
    return json.loads(result.stdout) if "--json" in argv else result.stdout


async def _draft(layer: ProceduralLayer, scope: MemoryScope, name: str) -> str:
    skill = await layer.propose_skill(scope, label=name, steps=["check"], source_tag="mined:test",
                                      action_tool="refund", precondition="lookup_order", identifier=name)
    return skill.id


async def test_each_lifecycle_change_is_recorded_oldest_first_with_from_and_to(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProceduralLayer(store)
    sid = await _draft(layer, scope, "refund-rule")
    flags = ["--tenant", tenant, "--namespace", "u1"]
    plan = [("skills", "approve", "draft", "approved"), ("skills", "shadow", "enforce", "shadow"),
            ("skills", "enforce", "shadow", "enforce"), ("retract", None, "live", "retracted"),
            ("restore", None, "retracted", "live"), ("skills", "reject", "approved", "rejected")]
    for i, (cmd, action, _, _) in enumerate(plan):
        argv = [cmd, *([action] if action else []), sid, *flags, "--actor", f"op{i}", "--reason", f"why {i}"]
        _cli(neo4j_settings, *argv)
    history = _cli(neo4j_settings, "skills", "history", sid, *flags, "--json")
    assert [(h["change"], h["from"], h["to"], h["actor"], h["reason"]) for h in history] == [
        (action or cmd, old, new, f"op{i}", f"why {i}") for i, (cmd, action, old, new) in enumerate(plan)]
    assert [h["at"] for h in history] == sorted(h["at"] for h in history)
    assert set(history[0]) == {"at", "actor", "reason", "change", "from", "to"}
    # by identifier too, and the text form names actor and reason
    assert _cli(neo4j_settings, "skills", "history", "refund-rule", *flags, "--json") == history
    assert "approve  draft -> approved  by op0: why 0" in _cli(neo4j_settings, "skills", "history", sid, *flags)
    # the default actor is the OS user
    _cli(neo4j_settings, "skills", "shadow", sid, *flags)
    last = _cli(neo4j_settings, "skills", "history", sid, *flags, "--json")[-1]
    assert (last["actor"], last["reason"], last["from"], last["to"]) == (getpass.getuser(), None, "enforce", "shadow")


async def test_a_refused_change_writes_no_record(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    layer = ProceduralLayer(store)
    wide = await _draft(layer, MemoryScope(tenant), "wide-rule")
    flags = ["--tenant", tenant, "--namespace", "u1", "--actor", "mallory", "--reason", "no"]
    for argv in (["skills", "approve", wide], ["skills", "shadow", wide], ["skills", "reject", wide],
                 ["retract", wide], ["skills", "approve", "no-such-skill"], ["restore", "no-such-node"]):
        result = run_cli_on(neo4j_settings, *argv, *flags)
        assert result.returncode != 0, argv  # the namespace sees the tenant-wide draft but cannot change it
    assert _cli(neo4j_settings, "skills", "history", wide, "--tenant", tenant, "--json") == []
    # refused after its record was written, in the same transaction: a node of another tenant holds the key the
    # draft would take over (copied by hand); the record rolls back with the refused approve
    other = f"{tenant}-held"
    forget.append(other)
    await store.driver.execute_query(
        "MATCH (d:Skill {tenant_id: $t, id: $id}) CREATE (:Skill {tenant_id: $o, id: 'x', symfonic_key: "
        "d.symfonic_base_key, status: 'approved', label: 'x', steps: ['x']})", {"t": tenant, "id": wide, "o": other})
    refused = run_cli_on(neo4j_settings, "skills", "approve", wide, "--tenant", tenant, "--actor", "ana")
    assert refused.returncode != 0 and "holds the key this write would use" in refused.stderr, refused.stderr
    assert _cli(neo4j_settings, "skills", "history", wide, "--tenant", tenant, "--json") == []
    await store.driver.execute_query("MATCH (n:Skill {tenant_id: $o}) DETACH DELETE n", {"o": other})
    assert (await layer.get_skill(MemoryScope(tenant), wide)).status == "draft"
    with pytest.raises(ValidationError):  # an unbounded reason is refused before anything changes
        await layer.approve(MemoryScope(tenant), wide, reason="x" * 5000)
    assert await store.history(MemoryScope(tenant), wide) == []
    await layer.approve(MemoryScope(tenant), wide)  # the library's default actor: unknown
    [only] = await store.history(MemoryScope(tenant), wide)
    assert (only["actor"], only["from"], only["to"]) == (None, "draft", "approved")


async def test_history_never_shows_another_tenant_or_namespace(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    other = f"{tenant}-other"
    forget.append(other)
    layer = ProceduralLayer(store)
    rng = random.Random(11)
    scopes = [MemoryScope(tenant), MemoryScope(tenant, "a"), MemoryScope(tenant, "b"), MemoryScope(other),
              MemoryScope(other, "a")]
    made: dict[MemoryScope, int] = {}
    for scope in scopes:  # one identifier everywhere, a different number of changes in each scope
        sid = await _draft(layer, scope, "same-name")
        n = rng.randrange(1, 4)
        await layer.approve(scope, sid, actor=f"{scope.tenant_id}/{scope.namespace}")
        for _ in range(n - 1):
            await store.retract(scope, sid, actor=f"{scope.tenant_id}/{scope.namespace}")
            await store.restore(scope, sid, actor=f"{scope.tenant_id}/{scope.namespace}")
        made[scope] = 1 + 2 * (n - 1)
    for scope in scopes:
        argv = ["skills", "history", "same-name", "--tenant", scope.tenant_id, "--json",
                *(["--namespace", scope.namespace] if scope.namespace else [])]
        history = _cli(neo4j_settings, *argv)
        assert len(history) == made[scope]
        assert {h["actor"] for h in history} == {f"{scope.tenant_id}/{scope.namespace}"}


async def test_an_erase_leaves_a_receipt_that_survives_and_erases_the_scope_records(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    layer = ProceduralLayer(store)
    user = MemoryScope(tenant, "u7")
    sid = await _draft(layer, user, "user-rule")
    await layer.approve(user, sid, actor="ana")
    await layer.seed_authored_skill(MemoryScope(tenant), label="W", steps=["w"], source_tag="authored:x")
    erased = _cli(neo4j_settings, "tenants", "erase", "--tenant", tenant, "--namespace", "u7", "--yes",
                  "--actor", "dpo", "--reason", "GDPR request 12", "--json")
    assert erased["counts"]["Skill"] == 1 and erased["counts"]["SymfonicChange"] == 1
    assert await store.history(user, sid) == []  # the scope's records were its data
    [receipt] = _cli(neo4j_settings, "tenants", "erasures", "--tenant", tenant, "--json")
    assert (receipt["tenant_id"], receipt["namespace"], receipt["actor"], receipt["reason"]) == (
        tenant, "u7", "dpo", "GDPR request 12")
    assert receipt["counts"] == erased["counts"] and receipt["at"]
    # the whole tenant's erase keeps the earlier receipt and adds its own
    _cli(neo4j_settings, "tenants", "erase", "--tenant", tenant, "--yes", "--actor", "ops")
    receipts = _cli(neo4j_settings, "tenants", "erasures", "--tenant", tenant, "--json")
    assert [(r["namespace"], r["actor"]) for r in receipts] == [("u7", "dpo"), (None, "ops")]
    assert receipts[1]["counts"]["Skill"] == 1
    assert any(r["tenant_id"] == tenant for r in _cli(neo4j_settings, "tenants", "erasures", "--json"))
    assert f"{tenant}/u7  " in _cli(neo4j_settings, "tenants", "erasures", "--tenant", tenant)
    # an erase that found nothing leaves no receipt (it creates nothing)
    _cli(neo4j_settings, "tenants", "erase", "--tenant", tenant, "--yes")
    assert len(_cli(neo4j_settings, "tenants", "erasures", "--tenant", tenant, "--json")) == 2


async def test_publishing_a_staged_seed_file_is_recorded_once_under_its_write_id(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str, forget: list[str], tmp_path: Any
) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"skills": [{"label": "Look up before refund", "steps": ["lookup"],
                                            "source_tag": "authored:test", "action_tool": "refund",
                                            "precondition": "lookup_order"}]}))
    _cli(neo4j_settings, "seed", str(path), "--tenant", tenant, "--write-id", "release-1")
    flags = ["--tenant", tenant]
    published = _cli(neo4j_settings, "publish", "release-1", *flags, "--actor", "rel", "--reason", "q3", "--json")
    assert published["nodes"] >= 1
    again = run_cli_on(neo4j_settings, "publish", "release-1", *flags, "--actor", "rel")  # nothing left to publish
    assert again.returncode == 1
    history = _cli(neo4j_settings, "skills", "history", "release-1", *flags, "--json")
    assert [(h["change"], h["from"], h["to"], h["actor"], h["reason"]) for h in history] == [
        ("publish", "staged", "published", "rel", "q3")]
    assert _cli(neo4j_settings, "skills", "history", "release-1", *flags, "--namespace", "u1", "--json") == []
