"""`schema apply` on a database with no earlier release applies every migration at once, and says only that.

A brand-new database has no process of a previous release to wait for: the
first `schema apply` applies every migration, the after-rollout ones included,
and prints neither "up to date" nor "waiting for the rollout"; the next run
says "schema is up to date" and nothing else. The shared test server stands
in for a brand-new database by losing its migration ledger (`:SymfonicMigration`
nodes); every migration statement is idempotent, so applying them again leaves
the schema as it was.
"""

from __future__ import annotations

import json

import neo4j
import pytest

from symfonic_graph import GraphMemoryStore
from symfonic_graph._store.schema import migrations
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio


@pytest.mark.schema_change  # rewrites the shared server's migration ledger: under xdist it runs alone
async def test_schema_apply_on_a_database_without_migrations_applies_all_and_waits_for_nothing(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, neo4j_settings: Neo4jSettings
) -> None:
    every = [m.version for m in migrations()]
    assert any(m.after_rollout for m in migrations())  # what a rollout would otherwise hold back
    try:
        await driver.execute_query("MATCH (m:SymfonicMigration) DELETE m")
        first = run_cli_on(neo4j_settings, "schema", "apply")
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip() == f"applied migrations {every}", first.stdout
        status = run_cli_on(neo4j_settings, "schema", "status", "--json")
        assert json.loads(status.stdout)["waiting_for_rollout"] == [], status.stdout
        again = run_cli_on(neo4j_settings, "schema", "apply")
        assert (again.returncode, again.stdout.strip()) == (0, "schema is up to date"), again.stdout
    finally:
        await store.apply_schema(after_rollout=True)  # whatever failed above, the ledger is whole again
