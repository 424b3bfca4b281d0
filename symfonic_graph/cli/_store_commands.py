"""``symfonic-graph schema apply|status`` and ``smoke``."""

from __future__ import annotations

import json
import uuid
from typing import Any

import anyio

from symfonic_graph.cli._connect import open_store
from symfonic_graph.memory.layers import ProceduralLayer
from symfonic_graph.shape.scope import MemoryScope


def register(sub: Any) -> None:
    schema = sub.add_parser("schema", help="the versioned constraints and indexes")
    actions = schema.add_subparsers(dest="action", required=True, metavar="ACTION")
    apply = actions.add_parser("apply", help="apply pending migrations (idempotent)")
    apply.add_argument("--after-rollout", action="store_true",
                       help="also apply the migrations that drop what processes of the previous release use; "
                            "give it once every process that uses the database runs this release")
    apply.set_defaults(handler=lambda a: anyio.run(_schema_apply, a.after_rollout))
    status = actions.add_parser("status", help="applied migrations and the server version")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(handler=lambda a: anyio.run(_schema_status, a.json))
    demo = sub.add_parser("demo", help="run the scripted multi-tenant agent demo (starts the local Neo4j if needed)")
    demo.add_argument("--agent", choices=["langgraph", "middleware"], default="langgraph",
                      help="langgraph: a StateGraph with the guarded tool node (default); "
                           "middleware: LangChain create_agent with MemoryMiddleware (needs the langchain extra)")
    demo.set_defaults(handler=lambda a: _demo(a.agent))
    smoke = sub.add_parser("smoke", help="seed, read back and erase one skill in a throwaway tenant")
    smoke.set_defaults(handler=lambda a: anyio.run(_smoke))


async def _schema_apply(after_rollout: bool = False) -> int:
    async with open_store() as store:
        applied = await store.apply_schema(after_rollout=after_rollout)
        waiting = await store.waiting_migrations()
    print(f"applied migrations {applied}" if applied else "schema is up to date")
    if waiting:
        print(f"waiting for the rollout: migrations {waiting} drop what processes of the previous release use; "
              "once every process runs this release, run `symfonic-graph schema apply --after-rollout`")
    return 0


async def _schema_status(as_json: bool) -> int:
    async with open_store() as store:
        info = await store.server_info()
        versions = [r["version"] for r in await store.read("migrations_applied")]
        waiting = await store.waiting_migrations()
    if as_json:
        print(json.dumps({"server": info, "migrations": versions, "waiting_for_rollout": waiting}))
    else:
        print(f"{info['name']} {info['version']} ({info['edition']}); migrations applied: {versions}"
              + (f"; waiting for `schema apply --after-rollout`: {waiting}" if waiting else ""))
    return 0


async def _smoke() -> int:
    scope = MemoryScope(f"smoke-{uuid.uuid4().hex[:8]}")
    async with open_store() as store:
        await store.apply_schema()
        layer = ProceduralLayer(store)
        skill = await layer.seed_authored_skill(
            scope, label="Deliver a report", steps=["deliver"], source_tag="authored:smoke",
            action_tool="deliver", precondition=["get_integration_status"],
        )
        try:
            [read] = await layer.query_skills(scope)
            await store.retract(scope, skill.id, reason="smoke run")
        finally:
            await store.erase(scope)  # the throwaway tenant leaves nothing behind, catalog included
    print(f"seeded, read back and erased skill {read.id} in tenant {scope.tenant_id}: {read.metadata}")
    return 0


def _demo(agent: str = "langgraph") -> int:
    import os
    import sys

    from symfonic_graph.ops.demo import run_demo
    from symfonic_graph.server import LocalNeo4j

    if not os.environ.get("NEO4J_URI") and LocalNeo4j().state() is None:
        print("starting the local Neo4j (first run downloads it from Maven Central)...", file=sys.stderr)
        LocalNeo4j().start()

    async def go() -> None:
        async with open_store() as store:
            await run_demo(store, agent=agent)

    anyio.run(go)
    return 0
