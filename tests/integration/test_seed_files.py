"""Seed files through the CLI: the documented example, idempotent re-runs, several scopes."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio


def documented_example(acme: str, globex: str) -> str:
    """The YAML example of docs/seed-files.md, with the tenants renamed for this test."""
    doc = (ROOT / "docs" / "seed-files.md").read_text(encoding="utf-8")
    [example] = re.findall(r"```yaml\n(.*?)```", doc, flags=re.S)
    return example.replace("tenant: acme", f"tenant: {acme}").replace("tenant: globex", f"tenant: {globex}")


async def fingerprint(store: GraphMemoryStore, *tenants: str) -> list[Any]:
    """Every node of the tenants, with its properties (write timestamps and revision stamps left out)."""
    records, _, _ = await store.driver.execute_query(
        """
        MATCH (n) WHERE n.tenant_id IN $tenants AND NOT n:SymfonicCatalog
        OPTIONAL MATCH (n)<-[r:REQUIRES]-(s:Skill)
        RETURN labels(n) AS labels, s.id AS skill, r.position AS position, properties(n) AS props
        """,
        tenants=list(tenants), database_=store.database,
    )
    rows = []
    for r in records:
        props = {k: str(v) for k, v in r["props"].items() if k not in ("updated_at", "symfonic_rev")}
        rows.append(repr((sorted(r["labels"]), r["skill"], r["position"], sorted(props.items()))))
    return sorted(rows)


async def test_the_documented_example_seeds_two_tenants_and_a_second_run_changes_nothing(
    store: GraphMemoryStore, neo4j_settings: Neo4jSettings, tmp_path: Path
) -> None:
    acme, globex = f"acme-{uuid.uuid4().hex}", f"globex-{uuid.uuid4().hex}"
    path = tmp_path / "example-seed.yaml"
    path.write_text(documented_example(acme, globex), encoding="utf-8")
    first = run_cli_on(neo4j_settings, "seed", str(path))
    assert first.returncode == 0, first.stderr
    assert f"seeded 1 skill and 1 trigger into tenant {acme}" in first.stdout
    assert f"seeded 1 skill and 1 trigger into tenant {globex}, namespace user-7" in first.stdout
    after_first = await fingerprint(store, acme, globex)
    second = run_cli_on(neo4j_settings, "seed", str(path), "--json")
    assert second.returncode == 0, second.stderr
    assert await fingerprint(store, acme, globex) == after_first
    assert [(r["tenant_id"], r["namespace"], len(r["skills"]), len(r["triggers"]))
            for r in json.loads(second.stdout)] == [(acme, None, 1, 1), (globex, "user-7", 1, 1)]
    # what a turn of each scope sees
    [skill] = await ProceduralLayer(store).query_skills(MemoryScope(acme))
    assert skill.metadata["precondition"] == [
        "get_integration_status", {"state": {"path": "channel", "op": "eq", "value": "slack"}}, "Be brief."]
    [reminder] = await ProspectiveLayer(store).get_pending(MemoryScope(globex, "user-7"))
    assert reminder.task == "Mention the carrier strike this week."
    assert await ProspectiveLayer(store).get_pending(MemoryScope(globex)) == []


def test_a_file_scope_and_a_different_command_line_scope_are_refused(
    neo4j_settings: Neo4jSettings, tmp_path: Path
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(documented_example("t-a", "t-b"), encoding="utf-8")
    proc = run_cli_on(neo4j_settings, "seed", str(path), "--tenant", "someone-else")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error:") and len(proc.stderr.strip().splitlines()) == 1
    assert f"{path}: tenant:" in proc.stderr


def test_a_file_without_a_scope_needs_the_command_line(neo4j_settings: Neo4jSettings, tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"triggers": [{"condition": "c", "task": "t"}]}), encoding="utf-8")
    proc = run_cli_on(neo4j_settings, "seed", str(path))
    assert proc.returncode == 2 and f"{path}: tenant: is required" in proc.stderr
