"""Test fixtures: a real Neo4j found through documented environment variables.

Order of preference:
1. ``NEO4J_URI`` / ``NEO4J_USER`` / ``NEO4J_PASSWORD`` (/ ``NEO4J_DATABASE``):
   ``./dev test`` sets them to its own test server (``.symfonic-graph/test/``,
   port ``$SYMFONIC_TEST_NEO4J_PORT``, default 7688), never the dev server;
2. a testcontainers Neo4j when a Docker engine answers;
3. otherwise every test that needs Neo4j fails at once, saying how to start one.

Every test that reaches ``neo4j_settings`` (directly or through ``driver``,
``store`` or another fixture) is marked ``neo4j`` at collection, so
``pytest -m "not neo4j"`` is the fast suite that needs no server.

Each test works in a fresh tenant id; nothing is wiped between tests.
"""

from __future__ import annotations

import asyncio
import fcntl
import inspect
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import neo4j
import pytest
import sniffio

from symfonic_graph import GraphMemoryStore, MemoryScope, TurnMemory
from symfonic_graph.recall import RECALL_INDEX
from symfonic_graph.shape._embedding import meaning
from tests._recall import FORGET
from tests.reliability._stats import FIGURES, summary_lines


@dataclass(frozen=True)
class Neo4jSettings:
    uri: str
    user: str
    password: str
    database: str | None


SERVER_FIXTURE = "neo4j_settings"
COLLECTED = pytest.StashKey[list[pytest.Item]]()
"""Every test this run collected, before ``-m`` deselected any (``tests/unit/test_markers_applied.py``)."""
WORKER_FIGURES = "symfonic_reliability_figures"
"""The key under which a pytest-xdist worker hands its reliability figures to the controller."""


def needs_server(item: pytest.Item) -> bool:
    """Whether a test reaches the server fixture (``item.fixturenames`` is the transitive closure)."""
    return SERVER_FIXTURE in getattr(item, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by the marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs a server ``neo4j``."""
    for item in items:
        if needs_server(item):
            item.add_marker(pytest.mark.neo4j)
    config.stash[COLLECTED] = list(items)


class RunOrder:
    """Under pytest-xdist (``./dev test`` runs two workers): ``slow`` tests first, ``schema_change`` tests last.

    The scheduler deals its first batch out one test at a time, so the slow
    tests spread over the workers instead of ending the run on one worker
    while the other idles. A ``schema_change`` test waits until no test of the
    shared server runs (``_schema_lock``): at the end, the other worker is
    on the unit tests, which do not hold the lock, so it waits for nothing
    (next to the slow tests it waited up to 29 s for one to end). Every
    worker sorts the same way, as xdist requires.
    """

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        def rank(item: pytest.Item) -> int:
            if item.get_closest_marker("schema_change") is not None:
                return 2
            return 0 if item.get_closest_marker("slow") is not None else 1

        items.sort(key=rank)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(RunOrder(), "symfonic-run-order")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: hand the reliability figures to the controller, which prints their sum."""
    workeroutput = getattr(session.config, "workeroutput", None)  # set only in a worker
    if workeroutput is not None:
        workeroutput[WORKER_FIGURES] = dict(FIGURES)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook, unknown without it
def pytest_testnodedown(node: Any, error: object) -> None:
    FIGURES.update(getattr(node, "workeroutput", {}).get(WORKER_FIGURES, {}))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The figures the reliability suite collected (``tests/reliability/_stats.py``)."""
    lines = summary_lines()
    if lines:
        terminalreporter.section("symfonic-graph reliability figures")
        for line in lines:
            terminalreporter.write_line(line)


def _docker_answers() -> bool:
    try:
        import docker  # type: ignore[import-untyped]

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def neo4j_settings() -> Iterator[Neo4jSettings]:
    uri = os.environ.get("NEO4J_URI")
    if uri:
        yield Neo4jSettings(
            uri, os.environ.get("NEO4J_USER", "neo4j"), os.environ.get("NEO4J_PASSWORD", ""),
            os.environ.get("NEO4J_DATABASE") or None,
        )
        return
    if _docker_answers():
        from testcontainers.neo4j import Neo4jContainer

        with Neo4jContainer("neo4j:5.26-community") as container:
            yield Neo4jSettings(container.get_connection_url(), "neo4j", container.password, None)
        return
    pytest.fail(
        "No Neo4j for the integration tests: run them with `./dev test` (it starts a test server of its own), "
        "or export NEO4J_URI/NEO4J_USER/NEO4J_PASSWORD (e.g. after `docker compose up -d --wait`), then rerun.",
        pytrace=False,
    )


@pytest.fixture(scope="session")
def _schema(neo4j_settings: Neo4jSettings) -> None:
    async def apply() -> None:
        async with GraphMemoryStore.connect(
            neo4j_settings.uri, neo4j_settings.user, neo4j_settings.password, database=neo4j_settings.database
        ) as store:
            # The suite's server is used by this release only: what the previous release still
            # needs is dropped too (it made every write commit to one more full-text index).
            await store.apply_schema(after_rollout=True)
            # Plan the per-turn reads once (about 2 s for the turn queries on a fresh server, more under a
            # loaded CI box): the first test that runs one would otherwise spend its query_timeout planning.
            # (EXPLAIN alone is not enough: a run after it still took 0.15 s of 1 s planning.)
            await TurnMemory(store).warm_up()
            scope = {"tenant_id": "\x07warm-up", "namespace": None, "write_id": None}
            await store.plan("triggers_offerable", {**scope, "limit": 100, "now": datetime.now(UTC), **meaning(None)},
                             timeout=120.0)

    asyncio.run(apply())


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """One event loop for the session, so that the driver below is opened once (~60 ms a test otherwise)."""
    return "asyncio"


def schema_lock_mode(item: pytest.Item) -> int | None:
    """How a test holds the schema lock under pytest-xdist: exclusive, shared, or not at all (see below)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    if item.get_closest_marker("schema_change") is not None:
        return fcntl.LOCK_EX
    return fcntl.LOCK_SH if needs_server(item) else None


@pytest.fixture(autouse=True)
def _schema_lock(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Under pytest-xdist, a ``schema_change`` test runs while no other test does.

    Such a test drops and creates constraints of the shared test server (to
    rebuild an older schema), and a query of another worker that runs
    meanwhile fails (``IndexNotFound`` for a plan using a dropped index). Every
    test of the shared server (one that reaches ``neo4j_settings``) holds a shared
    lock on one file for all workers; a ``schema_change`` test holds it
    exclusively. A test without the server (a unit test, one with a private
    server) holds none, so it never keeps a schema change waiting.
    """
    mode = schema_lock_mode(request.node)
    if mode is None:
        yield
        return
    path = tmp_path_factory.getbasetemp().parent / "symfonic-graph-schema.lock"  # shared by the workers
    with path.open("a") as lock:
        fcntl.flock(lock, mode)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _sync_tests_outside_the_runner(request: pytest.FixtureRequest) -> Iterator[None]:
    """A plain test runs as outside any event loop, though the session's anyio runner lives on.

    The runner marks the thread as running asyncio for as long as it lives,
    and ``anyio.run`` (every CLI command, a documented snippet) then refuses
    to start: a plain test gets the mark cleared while it runs.
    """
    if inspect.iscoroutinefunction(getattr(request, "function", None)):
        yield
        return
    token = sniffio.current_async_library_cvar.set(None)
    try:
        yield
    finally:
        sniffio.current_async_library_cvar.reset(token)


@pytest.fixture(scope="session")
async def driver(neo4j_settings: Neo4jSettings, _schema: None) -> AsyncIterator[neo4j.AsyncDriver]:
    """The session's driver to the test server; a test that needs a driver of its own (a fault) opens one."""
    drv = neo4j.AsyncGraphDatabase.driver(neo4j_settings.uri, auth=(neo4j_settings.user, neo4j_settings.password))
    try:
        yield drv
    finally:
        await drv.close()


@pytest.fixture
async def store(driver: neo4j.AsyncDriver, neo4j_settings: Neo4jSettings) -> GraphMemoryStore:
    return GraphMemoryStore(driver, database=neo4j_settings.database)


@pytest.fixture
def tenant() -> str:
    """A fresh tenant id for this test alone."""
    return f"t-{uuid.uuid4().hex}"


@pytest.fixture
def scope(tenant: str) -> MemoryScope:
    return MemoryScope(tenant)


@pytest.fixture
async def forget(driver: neo4j.AsyncDriver, tenant: str) -> AsyncIterator[list[str]]:
    """Tenant ids (besides ``tenant``) whose nodes are deleted after the test; waits for the recall index."""
    await driver.execute_query("CALL db.awaitIndex($name, 300)", {"name": RECALL_INDEX})
    others: list[str] = []
    yield others
    tenants = [tenant, *others]
    for start in range(0, len(tenants), 500):
        await driver.execute_query(FORGET, {"tenants": tenants[start:start + 500]})
