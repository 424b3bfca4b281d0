"""How CLI commands find Neo4j: NEO4J_* variables, else the local server."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from symfonic_graph.errors import StoreUnavailableError
from symfonic_graph.server import LocalNeo4j
from symfonic_graph.store import GraphMemoryStore


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
    """A store over a driver the CLI owns for one command."""
    uri, user, password, database = connection_settings()
    async with GraphMemoryStore.connect(uri, user, password, database=database) as store:
        yield store
