"""How CLI commands find Neo4j: NEO4J_* variables, else the local server.

Every command connects through ``open_store``, which logs in before the
command starts: bad credentials and a server that is not running are reported
at once, as one typed error (``AuthenticationError``, ``StoreUnavailableError``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import neo4j
from neo4j import AsyncManagedTransaction

from symfonic_graph._store import GraphMemoryStore
from symfonic_graph.errors import QueryError, StoreUnavailableError
from symfonic_graph.server import LocalNeo4j

SCRIPT_TIMEOUT = 290.0
"""Seconds one statement of an operator's Cypher script may take (a bulk seed may be slow)."""


def connection_settings() -> tuple[str, str, str, str | None]:
    """(uri, user, password, database) from the environment or the local server."""
    uri = os.environ.get("NEO4J_URI")
    if uri:
        return uri, os.environ.get("NEO4J_USER", "neo4j"), os.environ.get("NEO4J_PASSWORD", ""), os.environ.get(
            "NEO4J_DATABASE"
        )
    state = LocalNeo4j().state()
    if state is not None:
        return state.uri, state.user, state.password, None
    raise StoreUnavailableError(
        'no Neo4j found: set NEO4J_URI/NEO4J_USER/NEO4J_PASSWORD, or run eval "$(symfonic-graph server start)"'
    )


@asynccontextmanager
async def open_store() -> AsyncIterator[GraphMemoryStore]:
    """A store over a driver the CLI owns for one command, already logged in."""
    uri, user, password, database = connection_settings()
    async with GraphMemoryStore.connect(uri, user, password, database=database) as store:
        yield store


async def run_statement(
    store: GraphMemoryStore, text: str, where: str, *, hint: str = "", timeout: float = SCRIPT_TIMEOUT
) -> tuple[list[dict[str, Any]], neo4j.SummaryCounters]:
    """Run one statement of an operator's script in its own write transaction.

    Returns its rows and counters. Failures are typed like every library
    call; a statement Neo4j refuses raises ``QueryError`` naming ``where``
    (e.g. ``file.cypher:4: statement 2 of 3``), with ``hint`` appended.
    """
    patient = GraphMemoryStore(store.driver, database=store.database, query_timeout=timeout)

    async def tx(t: AsyncManagedTransaction) -> tuple[list[dict[str, Any]], neo4j.SummaryCounters]:
        result = await t.run(text)
        rows = [record.data() async for record in result]
        summary = await result.consume()
        return rows, summary.counters

    async def work() -> tuple[list[dict[str, Any]], neo4j.SummaryCounters]:
        async with patient._session() as session:
            return await session.execute_write(tx)

    try:
        return await patient._within_timeout(work, where)
    except QueryError as exc:
        raise QueryError(where, exc.code, exc.message, hint=hint) from exc.__cause__


Counters = dict[str, int]
_COUNTED = ("nodes_created", "nodes_deleted", "relationships_created", "relationships_deleted", "properties_set",
            "labels_added", "labels_removed")


async def run_script(
    store: GraphMemoryStore, source: str, statements: list[tuple[str, str]], *, timeout: float = SCRIPT_TIMEOUT
) -> list[tuple[list[dict[str, Any]], Counters]]:
    """Run an operator's script in one write transaction: every statement, or (on any failure) none.

    ``statements`` holds ``(where, text)`` pairs, ``where`` naming the
    statement (``file.cypher:4: statement 2 of 3``). A statement Neo4j refuses
    raises ``QueryError`` naming it and its first line; nothing of the script
    is committed. Returns each statement's rows and counters.
    """
    patient = GraphMemoryStore(store.driver, database=store.database, query_timeout=timeout)
    failed: list[int] = []

    async def tx(t: AsyncManagedTransaction) -> list[tuple[list[dict[str, Any]], Counters]]:
        out = []
        failed.clear()
        for n, (_, text) in enumerate(statements):
            failed.append(n)
            result = await t.run(text)
            rows = [record.data() async for record in result]
            counters = (await result.consume()).counters
            out.append((rows, {name: int(getattr(counters, name)) for name in _COUNTED}))
            failed.pop()
        return out

    async def work() -> list[tuple[list[dict[str, Any]], Counters]]:
        async with patient._session() as session:
            return await session.execute_write(tx)

    try:
        return await patient._within_timeout(work, source)
    except QueryError as exc:
        if not failed:  # refused at commit
            raise QueryError(f"{source}: commit", exc.code, exc.message,
                             hint="Nothing of the script was written (one transaction).") from exc.__cause__
        where, text = statements[failed[0]]
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        first = first if len(first) <= 80 else first[:77] + "..."
        schema = "Schema" in exc.code or "schema" in exc.message.lower()
        hint = (f"The statement starts: {first} . Nothing of the script was written (it runs in one "
                "transaction); fix the statement and run the script again"
                + (", or run it with --per-statement (a schema change cannot share a transaction with writes)"
                   if schema else "") + ".")
        raise QueryError(where, exc.code, exc.message, hint=hint) from exc.__cause__
