"""Typed errors only: bad credentials, a refused connection and a query error.

Each case goes through a public call (which must raise the typed error, with
the driver's exception as its cause) and through the CLI, in-process (one line
on stderr, exit 2, no traceback). Against the real Neo4j; a refused connection uses
``bolt://127.0.0.1:1``, where nothing listens.

Wrong credentials use a fresh user name each time: Neo4j locks a user out for
a few seconds after repeated failed logins, which must never hit the ``neo4j``
user other tests (and other engineers) log in with.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import neo4j
import pytest
from neo4j.exceptions import ClientError, Neo4jError

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer, TurnMemory
from symfonic_graph._store import transport
from symfonic_graph.doctor import diagnose
from symfonic_graph.errors import (
    AuthenticationError,
    QueryError,
    SchemaError,
    StoreUnavailableError,
    SymfonicGraphError,
    ValidationError,
)
from tests._cli import CliResult, neo4j_env, run_cli
from tests.conftest import Neo4jSettings
from tests.reliability._stats import FIGURES

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

REFUSED = "bolt://127.0.0.1:1"
QUERY_TIMEOUT = 10.0


@pytest.fixture
def backoffs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every wait of the store's retry loop between two attempts, counted (a failure that is not
    transient has none: it is reported at once, however long the query timeout)."""
    waited: list[float] = []
    real = transport.anyio.sleep

    async def counted(delay: float) -> None:
        waited.append(delay)
        await real(delay)

    monkeypatch.setattr(transport.anyio, "sleep", counted)
    return waited


def _stranger() -> str:
    return f"nobody-{uuid.uuid4().hex[:12]}"


def _cli(uri: str, user: str, password: str, *args: str, database: str | None = None) -> tuple[CliResult, float]:
    """The command in-process (``tests/_cli.py``), pointed at ``uri``; also how long it took."""
    started = time.monotonic()
    result = run_cli(*args, env=neo4j_env(Neo4jSettings(uri, user, password, database)))
    return result, time.monotonic() - started


def _assert_one_line_exit_2(proc: CliResult, *fragments: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, f"expected one line, got {len(lines)}:\n{proc.stderr}"
    assert lines[0].startswith("error: ") and "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@asynccontextmanager
async def _store(uri: str, user: str, password: str) -> AsyncIterator[GraphMemoryStore]:
    """A store over a caller-owned driver (no login check up front, unlike ``connect``)."""
    driver = neo4j.AsyncGraphDatabase.driver(uri, auth=(user, password))
    try:
        yield GraphMemoryStore(driver, query_timeout=QUERY_TIMEOUT)
    finally:
        await driver.close()


def _public_calls(store: GraphMemoryStore, scope: MemoryScope) -> dict[str, Callable[[], Awaitable[Any]]]:
    return {
        "TurnMemory.begin": lambda: TurnMemory(store).begin(scope),
        "query_skills": lambda: ProceduralLayer(store).query_skills(scope),
        "seed_authored_skill": lambda: ProceduralLayer(store).seed_authored_skill(
            scope, label="x", steps=["deliver"], source_tag="authored:typed"),
        "set_trigger": lambda: ProspectiveLayer(store).set_trigger(scope, condition="c", task="t"),
        "apply_schema": lambda: store.apply_schema(),
        "diagnose": lambda: diagnose(store, scope.tenant_id),
    }


async def _each_raises(
    calls: dict[str, Callable[[], Awaitable[Any]]], expected: type[SymfonicGraphError]
) -> dict[str, float]:
    """Run each call; each must raise ``expected``; return how long each took."""
    took = {}
    for name, call in calls.items():
        started = time.monotonic()
        with pytest.raises(expected) as caught:
            await call()
        took[name] = time.monotonic() - started
        assert isinstance(caught.value.__cause__, (Neo4jError, neo4j.exceptions.DriverError)), name
    return took


# -- bad credentials --------------------------------------------------------------


@pytest.mark.parametrize("password", ["wrong-password", ""], ids=["wrong", "missing"])
async def test_bad_credentials_raise_authentication_error(
    neo4j_settings: Neo4jSettings, _schema: None, tenant: str, password: str, backoffs: list[float]
) -> None:
    user = _stranger()
    with pytest.raises(AuthenticationError) as caught:
        async with GraphMemoryStore.connect(neo4j_settings.uri, user, password):
            pass
    message = str(caught.value)
    assert "NEO4J_PASSWORD" in message and "symfonic-graph server start" in message
    assert ("no password was given" if not password else "wrong user name or password") in message
    assert isinstance(caught.value.__cause__, neo4j.exceptions.AuthError)
    assert not isinstance(caught.value, StoreUnavailableError | ClientError), "not an outage, not a query error"

    async with _store(neo4j_settings.uri, _stranger(), password) as store:
        took = await _each_raises(_public_calls(store, MemoryScope(tenant)), AuthenticationError)
    assert backoffs == [], took


@pytest.mark.parametrize("password", ["wrong-password", ""], ids=["wrong", "missing"])
def test_cli_bad_credentials_one_line_exit_2(neo4j_settings: Neo4jSettings, password: str) -> None:
    proc, _ = _cli(neo4j_settings.uri, _stranger(), password, "skills", "list", "--tenant", "t")
    _assert_one_line_exit_2(proc, "rejected the login", "NEO4J_USER and NEO4J_PASSWORD",
                            "no password was given" if not password else "wrong user name or password")


# -- a refused connection ---------------------------------------------------------


@pytest.mark.parametrize("uri", [REFUSED, "neo4j://127.0.0.1:1"], ids=["bolt", "routing"])
async def test_refused_connection_is_reported_at_once(uri: str, tenant: str, backoffs: list[float]) -> None:
    """At once: never retried (the retry loop never waits), however long the query timeout."""
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as caught:
        async with GraphMemoryStore.connect(uri, "neo4j", "unused", query_timeout=QUERY_TIMEOUT):
            pass
    elapsed = time.monotonic() - started
    assert str(caught.value).startswith(f"cannot connect to {uri}: connection refused; is Neo4j running?")
    assert backoffs == []

    async with _store(uri, "neo4j", "unused") as store:
        took = await _each_raises(_public_calls(store, MemoryScope(tenant)), StoreUnavailableError)
    assert backoffs == [], took
    FIGURES["typed_errors.refused_slowest_ms"] = max(
        FIGURES["typed_errors.refused_slowest_ms"], int(max(elapsed, *took.values()) * 1000))


def test_cli_refused_connection_one_line_exit_2_fast(backoffs: list[float]) -> None:
    proc, elapsed = _cli(REFUSED, "neo4j", "unused", "skills", "list", "--tenant", "t")
    _assert_one_line_exit_2(proc, f"cannot connect to {REFUSED}: connection refused; is Neo4j running?")
    assert "retried" not in proc.stderr, "no driver retry lines"
    assert backoffs == [], "a refused connection is never retried"
    FIGURES["typed_errors.cli_refused_ms"] = int(elapsed * 1000)


# -- a query error ------------------------------------------------------------------


async def test_query_refused_by_the_server_raises_query_error(store: GraphMemoryStore, scope: MemoryScope) -> None:
    with pytest.raises(QueryError) as caught:  # LIMIT -1 is refused by the server
        await store.read("doctor_skills", tenant_id=scope.tenant_id, after="", limit=-1)
    err = caught.value
    assert err.code.startswith("Neo.ClientError.") and err.query == "query doctor_skills"
    assert str(err).startswith(f"query doctor_skills failed on the server: {err.code}: ")
    assert "\n" not in str(err) and isinstance(err.__cause__, ClientError)
    assert not isinstance(err, ClientError), "our errors never subclass the driver's"

    # a write the server refuses (a trigger id that is taken): typed, nothing written
    taken = await ProspectiveLayer(store).set_trigger(scope, condition="c", task="t")
    row = {"key": f'["trigger-id", "{uuid.uuid4().hex}"]', "id": taken, "tenant_id": scope.tenant_id,
           "namespace": None, "identifier": None, "condition": "c2", "task": "t2", "write_id": None,
           "base_key": None}
    with pytest.raises(QueryError) as refused:
        await store.write([("triggers_write", {"rows": [row]})])
    assert refused.value.code.startswith("Neo.ClientError.Schema.Constraint") and "Nothing was written." in str(
        refused.value)
    assert [t.task for t in await ProspectiveLayer(store).get_pending(scope)] == ["t"]


async def test_values_the_driver_cannot_send_raise_validation_error(store: GraphMemoryStore) -> None:
    for value in (2**70, "\ud800", object()):
        with pytest.raises(ValidationError) as caught:
            await store.read("catalog_version", tenant_id=value)
        assert caught.value.field == "query catalog_version" and "cannot be sent to Neo4j" in str(caught.value)


async def test_schema_errors_still_surface_as_schema_error(store: GraphMemoryStore) -> None:
    assert await store.apply_schema() == []  # the race codes of IF NOT EXISTS still count as success
    assert not issubclass(QueryError, ClientError) and not issubclass(SchemaError, ClientError)


def test_cli_cypher_run_syntax_error_one_line_exit_2(neo4j_settings: Neo4jSettings, tmp_path: Path) -> None:
    script = tmp_path / "broken.cypher"
    script.write_text("// a comment\nRETURN 1;\n\nRETURN nonsense(;\nRETURN 3;\n")
    settings = neo4j_settings
    proc, _ = _cli(settings.uri, settings.user, settings.password, "cypher", "run", str(script),
                   database=settings.database)
    _assert_one_line_exit_2(proc, f"{script}:4", "Neo.ClientError.Statement.SyntaxError")
