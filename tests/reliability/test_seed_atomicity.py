"""Seed files are all or nothing: a file cut at any entry leaves nothing behind.

A two-scope file is broken at every one of its entries, once by a value that
validation refuses and once by a key another tenant holds (refused inside the
write transaction); after each failure neither tenant holds a single node.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope
from symfonic_graph.errors import AuthorityError, ValidationError
from symfonic_graph.ops.seedfile import load_seed_file
from symfonic_graph.ops.seeding import apply_seed, plan_seed
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings
from tests.reliability._stats import FIGURES

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]
for _name in ("seeds.cut_points", "seeds.leftover_nodes"):
    FIGURES[_name] += 0


def _file(a: str, b: str) -> dict[str, Any]:
    def skill(n: int) -> dict[str, Any]:
        return {"label": f"Skill {n}", "identifier": f"s{n}", "steps": [f"act_{n}"], "source_tag": "authored:t",
                "precondition": [f"pre_{n}"]}

    def trigger(n: int) -> dict[str, Any]:
        return {"identifier": f"r{n}", "condition": f"when {n}", "task": f"do {n}"}

    return {"tenant": a, "skills": [skill(0), skill(1)], "triggers": [trigger(0)],
            "scopes": [{"tenant": b, "namespace": "u-1", "skills": [skill(2)], "triggers": [trigger(1), trigger(2)]}]}


def _entries(data: dict[str, Any]) -> list[tuple[dict[str, Any], str, str]]:
    """(block, section, index) of every entry, in file order."""
    out = []
    for block in [data, *data["scopes"]]:
        for section in ("skills", "triggers"):
            out += [(block, section, str(i)) for i in range(len(block.get(section, [])))]
    return out


async def _nodes(store: GraphMemoryStore, *tenants: str) -> int:
    records, _, _ = await store.driver.execute_query(
        "MATCH (n) WHERE n.tenant_id IN $t AND NOT n:SymfonicCatalog AND NOT n:SymfonicChange RETURN count(n) AS n",
        t=list(tenants), database_=store.database)
    return int(records[0]["n"])


async def _seed(store: GraphMemoryStore, path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")
    await apply_seed(store, plan_seed(load_seed_file(path), None))


async def test_a_bad_value_at_any_entry_writes_nothing(store: GraphMemoryStore, tmp_path: Path) -> None:
    a, b = f"a-{uuid.uuid4().hex}", f"b-{uuid.uuid4().hex}"
    path = tmp_path / "seed.json"
    for n in range(len(_entries(_file(a, b)))):
        data = _file(a, b)
        block, section, index = _entries(data)[n]
        block[section][int(index)]["task" if section == "triggers" else "steps"] = 4711
        where = "" if block is data else "scopes[0]."
        field = f"{where}{section}[{index}].{'task' if section == 'triggers' else 'steps'}"
        with pytest.raises(ValidationError) as caught:
            await _seed(store, path, data)
        assert str(caught.value).startswith(f"{path}: {field}: must be"), str(caught.value)
        FIGURES["seeds.cut_points"] += 1
        leftover = await _nodes(store, a, b)
        FIGURES["seeds.leftover_nodes"] += leftover
        assert leftover == 0


async def test_a_key_held_by_another_tenant_at_any_entry_writes_nothing(
    store: GraphMemoryStore, tmp_path: Path
) -> None:
    a, b, other = f"a-{uuid.uuid4().hex}", f"b-{uuid.uuid4().hex}", f"o-{uuid.uuid4().hex}"
    path = tmp_path / "seed.json"
    for n in range(len(_entries(_file(a, b)))):
        data = _file(a, b)
        block, section, index = _entries(data)[n]
        entry = block[section][int(index)]
        label, kind = ("Skill", "skill") if section == "skills" else ("Trigger", "trigger")
        key = json.dumps([kind, block["tenant"], block.get("namespace"), entry["identifier"]])
        # a node of another tenant carrying this entry's key (a copy-paste slip)
        await store.driver.execute_query(
            f"CREATE (:{label} {{id: $id, tenant_id: $other, symfonic_key: $key, status: 'approved', "
            "label: 'x', steps: ['x'], condition: 'x', task: 'x'})",
            id=f"{other}-{n}", other=other, key=key, database_=store.database)
        with pytest.raises(AuthorityError, match=other):
            await _seed(store, path, data)
        await store.driver.execute_query("MATCH (n {id: $id}) DETACH DELETE n", id=f"{other}-{n}",
                                         database_=store.database)
        FIGURES["seeds.cut_points"] += 1
        leftover = await _nodes(store, a, b)
        FIGURES["seeds.leftover_nodes"] += leftover
        assert leftover == 0
    await _seed(store, path, _file(a, b))  # the intact file then writes everything
    assert await _nodes(store, a, b) == 3 + 3 + 3  # skills, their preconditions, triggers


async def test_a_repeated_identifier_in_a_later_batch_writes_nothing(store: GraphMemoryStore, tmp_path: Path) -> None:
    tenant = f"t-{uuid.uuid4().hex}"
    skills = [{"label": f"S{i}", "identifier": f"s{i}", "steps": ["x"], "source_tag": "authored:t"}
              for i in range(1000)]
    skills[750]["identifier"] = "s10"
    with pytest.raises(ValidationError, match=r"skills\[750\]: has the same identifier as skills\[10\]"):
        await _seed(store, tmp_path / "big.json", {"tenant": tenant, "skills": skills})
    assert await _nodes(store, tenant) == 0


def test_the_cli_names_file_and_entry_in_one_line_and_writes_nothing(
    neo4j_settings: Neo4jSettings, tmp_path: Path
) -> None:
    tenant = f"t-{uuid.uuid4().hex}"
    path = tmp_path / "seed.yaml"
    path.write_text(f"tenant: {tenant}\nskills:\n  - {{label: ok, steps: [x], source_tag: 'authored:t'}}\n"
                    "triggers:\n  - {condition: c, task: ''}\n", encoding="utf-8")
    proc = run_cli_on(neo4j_settings, "seed", str(path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {path}: triggers[0].task: must not be empty"
    listed = run_cli_on(neo4j_settings, "skills", "list", "--tenant", tenant, "--json")
    assert json.loads(listed.stdout) == []


async def test_an_empty_scope_in_a_file_is_fine(store: GraphMemoryStore, tmp_path: Path) -> None:
    tenant = f"t-{uuid.uuid4().hex}"
    await _seed(store, tmp_path / "e.json", {"tenant": tenant, "skills": [], "triggers": []})
    assert await _nodes(store, tenant) == 0
    with pytest.raises(ValidationError, match="same scope"):
        await _seed(store, tmp_path / "d.json", {"tenant": tenant, "scopes": [{"tenant": tenant}]})
    assert MemoryScope(tenant)
