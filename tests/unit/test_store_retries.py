"""``GraphMemoryStore._within_timeout``: which failures it runs again, and how often (no server needed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import neo4j
import pytest
from neo4j.exceptions import Neo4jError

from symfonic_graph import GraphMemoryStore, QueryError
from symfonic_graph._store import transport as store_module

pytestmark = pytest.mark.anyio

DELETED = "Neo.ClientError.Statement.EntityNotFound"


@pytest.fixture
async def store(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[GraphMemoryStore]:
    async def no_wait(_seconds: float) -> None:
        await anyio.lowlevel.checkpoint()

    monkeypatch.setattr(store_module.anyio, "sleep", no_wait)  # the backoff between attempts
    driver = neo4j.AsyncGraphDatabase.driver("bolt://127.0.0.1:1", auth=("neo4j", "x"))  # never reached
    try:
        yield GraphMemoryStore(driver)
    finally:
        await driver.close()


def _deleted_under_read() -> Neo4jError:
    return Neo4jError._hydrate_neo4j(code=DELETED, message="Unable to load NODE 4:x:1.")


async def test_a_node_deleted_under_a_read_is_read_again(store: GraphMemoryStore) -> None:
    attempts = 0

    async def work() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 4:
            raise _deleted_under_read()
        return "read"

    assert await store._within_timeout(work, "query scan") == "read"
    assert attempts == 4


async def test_a_statement_that_keeps_failing_is_reported_as_a_query_error(store: GraphMemoryStore) -> None:
    attempts = 0

    async def work() -> str:
        nonlocal attempts
        attempts += 1
        raise _deleted_under_read()

    with pytest.raises(QueryError, match=r"EntityNotFound.*Nothing was written"):
        await store._within_timeout(work, "write scan", writes=True)
    assert attempts == store_module._DELETED_UNDER_READ_RETRIES + 1


async def test_other_client_errors_are_not_run_again(store: GraphMemoryStore) -> None:
    attempts = 0

    async def work() -> str:
        nonlocal attempts
        attempts += 1
        raise Neo4jError._hydrate_neo4j(code="Neo.ClientError.Statement.SyntaxError", message="bad")

    with pytest.raises(QueryError, match="SyntaxError"):
        await store._within_timeout(work, "query bad")
    assert attempts == 1
