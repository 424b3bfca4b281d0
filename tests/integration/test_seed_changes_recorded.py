"""A live seed records who changed which rule and why, in its own transaction.

Through the in-process CLI and a real Neo4j: a rule seeded in shadow, then
re-seeded as ``enforcement: enforce`` with ``--actor``/``--reason``, shows
``create`` then ``enforce`` (shadow -> enforce) in ``skills history``; an
identical seed records nothing; a changed step records ``replace``; another
tenant's history sees nothing; a seed refused by validation, or refused inside
its transaction, records nothing.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope
from symfonic_graph._store import skill_key
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio


def _cli(settings: Neo4jSettings, *argv: str) -> Any:
    result = run_cli_on(settings, *argv)
    assert result.returncode == 0, (argv, result.stderr)
    return json.loads(result.stdout) if "--json" in argv else result.stdout


def _file(tmp_path: Path, tenant: str, *skills: dict[str, Any], name: str = "seed.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"tenant": tenant, "skills": list(skills)}), encoding="utf-8")
    return str(path)


def _rule(enforcement: str | None = None, steps: tuple[str, ...] = ("refund",), **more: Any) -> dict[str, Any]:
    rule = {"label": "Refund after lookup", "identifier": "refund-rule", "steps": list(steps),
            "source_tag": "authored:billing", "precondition": ["lookup_order"], **more}
    return {**rule, "enforcement": enforcement} if enforcement else rule


def _history(settings: Neo4jSettings, tenant: str, target: str = "refund-rule") -> list[tuple[Any, ...]]:
    rows = _cli(settings, "skills", "history", target, "--tenant", tenant, "--json")
    return [(h["change"], h["from"], h["to"], h["actor"], h["reason"]) for h in rows]


async def test_a_rule_seeded_in_shadow_then_enforced_by_a_seed_shows_both_changes(
    neo4j_settings: Neo4jSettings, tenant: str, forget: list[str], tmp_path: Path
) -> None:
    _cli(neo4j_settings, "seed", _file(tmp_path, tenant, _rule("shadow")), "--actor", "ana", "--reason", "new policy")
    _cli(neo4j_settings, "seed", _file(tmp_path, tenant, _rule("enforce")), "--actor", "bo",
         "--reason", "40 would-blocks, all true")
    history = _history(neo4j_settings, tenant)
    assert history == [("create", "absent", "shadow", "ana", "new policy"),
                       ("enforce", "shadow", "enforce", "bo", "40 would-blocks, all true")]
    rows = _cli(neo4j_settings, "skills", "history", "refund-rule", "--tenant", tenant, "--json")
    assert [r["at"] for r in rows] == sorted(r["at"] for r in rows)
    # by the skill's id too, and the text form names the actor and reason
    [listed] = _cli(neo4j_settings, "skills", "list", "--tenant", tenant, "--json")
    assert _history(neo4j_settings, tenant, listed["id"]) == history
    text = _cli(neo4j_settings, "skills", "history", "refund-rule", "--tenant", tenant)
    assert "enforce  shadow -> enforce  by bo: 40 would-blocks, all true" in text
    # the same file again changes nothing and records nothing, whoever runs it
    _cli(neo4j_settings, "seed", _file(tmp_path, tenant, _rule("enforce")), "--actor", "cy", "--reason", "again")
    _cli(neo4j_settings, "seed", _file(tmp_path, tenant, _rule()))  # no enforcement: keeps the mode
    assert _history(neo4j_settings, tenant) == history
    # new content is a replacement, by the OS user when no --actor is given
    _cli(neo4j_settings, "seed", _file(tmp_path, tenant, _rule(steps=("refund", "notify"))))
    assert _history(neo4j_settings, tenant)[-1] == ("replace", "enforce", "enforce", getpass.getuser(), None)
    # a retracted rule seeded again comes back: recorded from retracted
    _cli(neo4j_settings, "retract", "refund-rule", "--tenant", tenant, "--actor", "dee")
    _cli(neo4j_settings, "seed", _file(tmp_path, tenant, _rule("shadow", steps=("refund", "notify"))),
         "--actor", "eve")
    assert _history(neo4j_settings, tenant)[-2:] == [("retract", "live", "retracted", "dee", None),
                                                      ("replace", "retracted", "shadow", "eve", None)]


async def test_one_record_per_changed_skill_of_a_large_file_and_none_for_the_rest(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str, forget: list[str], tmp_path: Path
) -> None:
    rules = [_rule("shadow", identifier=f"r{i}", label=f"Rule {i}") for i in range(2000)]
    _cli(neo4j_settings, "seed", _file(tmp_path, tenant, *rules), "--actor", "ana")
    rules[7] = {**rules[7], "enforcement": "enforce"}
    rules[1999] = {**rules[1999], "steps": ["refund", "notify"]}
    _cli(neo4j_settings, "seed", _file(tmp_path, tenant, *rules), "--actor", "bo")
    records, _, _ = await store.driver.execute_query(
        "MATCH (c:SymfonicChange {tenant_id: $t}) WHERE c.actor = 'bo' RETURN c.identifier AS id, c.change AS change "
        "ORDER BY id", {"t": tenant}, database_=store.database)
    assert [(r["id"], r["change"]) for r in records] == [("r1999", "replace"), ("r7", "enforce")]
    created, _, _ = await store.driver.execute_query(
        "MATCH (c:SymfonicChange {tenant_id: $t, change: 'create'}) RETURN count(c) AS n", {"t": tenant},
        database_=store.database)
    assert created[0]["n"] == 2000


async def test_another_tenants_history_sees_nothing(
    neo4j_settings: Neo4jSettings, tenant: str, forget: list[str], tmp_path: Path
) -> None:
    other = f"{tenant}-other"
    forget.append(other)
    _cli(neo4j_settings, "seed", _file(tmp_path, tenant, _rule("shadow")), "--actor", "ana", "--reason", "mine")
    assert len(_history(neo4j_settings, tenant)) == 1
    assert _history(neo4j_settings, other) == []
    assert _cli(neo4j_settings, "skills", "history", "refund-rule", "--tenant", tenant, "--namespace", "u1",
                "--json") == []


async def test_a_refused_seed_records_nothing(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str, forget: list[str], tmp_path: Path
) -> None:
    _cli(neo4j_settings, "seed", _file(tmp_path, tenant, _rule("shadow")), "--actor", "ana")
    before = _history(neo4j_settings, tenant)
    # refused while the file is read: a bad entry beside a mode change
    bad = _file(tmp_path, tenant, _rule("enforce"), {"label": "", "steps": ["x"], "source_tag": "authored:x"},
                name="bad.json")
    refused = run_cli_on(neo4j_settings, "seed", bad, "--actor", "mallory", "--reason", "sneak")
    assert refused.returncode != 0 and "skills[1].label" in refused.stderr, refused.stderr
    # refused inside the transaction, after the records were written: another tenant's node holds a new key
    other = f"{tenant}-held"
    forget.append(other)
    held = _rule(identifier="held-rule")
    _cli(neo4j_settings, "seed", _file(tmp_path, other, held, name="other.json"))
    await store.driver.execute_query(  # copied by hand: the key this tenant's "held-rule" would use
        "MATCH (s:Skill {tenant_id: $o, identifier: 'held-rule'}) SET s.symfonic_key = $key",
        {"o": other, "key": skill_key(MemoryScope(tenant), "held-rule", "")}, database_=store.database)
    both = _file(tmp_path, tenant, _rule("enforce"), held, name="both.json")
    refused = run_cli_on(neo4j_settings, "seed", both, "--actor", "mallory", "--reason", "sneak")
    assert refused.returncode != 0 and "holds the key" in refused.stderr, refused.stderr
    assert _history(neo4j_settings, tenant) == before
    assert _history(neo4j_settings, tenant, "held-rule") == []
    # a staged seed records at publish: --actor/--reason on it are refused, naming the flag
    staged = run_cli_on(neo4j_settings, "seed", _file(tmp_path, tenant, _rule("enforce")), "--write-id", "w1",
                        "--actor", "ana")
    assert staged.returncode != 0 and "--actor" in staged.stderr, staged.stderr
