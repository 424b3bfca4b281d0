"""``query_timeout`` is a deadline for a whole call, retries and cleanup included.

The driver reaches the test server through a TCP proxy that the test pauses:
every byte is held both ways, the connections stay open and silent (what a
hung JVM, a frozen VM or a network that drops packets looks like to the
driver). Every call must fail with ``StoreUnavailableError`` well within twice
``query_timeout`` (a correctness bound: a stalled server must not hold a turn
longer than the timeout it chose), and the same store answers again once the
proxy resumes. The server itself is never stopped or frozen: other tests'
connections do not go through the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import neo4j
import pytest

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    ProspectiveLayer,
    StoreUnavailableError,
    TurnMemory,
)
from tests._proxy import TcpProxy
from tests.reliability._stats import FIGURES

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

TIMEOUT = 2.0  # query_timeout of the store under test (s)
BOUND = 2 * TIMEOUT  # what one call may take against a stalled server (s)
STALL = 0.8 * TIMEOUT  # a stall each round trip meets in the second test (s)
SLOW_BOUND = 1.5 * TIMEOUT  # what one call may take there: its deadline, with room for a loaded machine (s)
SETUP_TIMEOUT = 120.0


async def _timed(call: Callable[[], Awaitable[Any]]) -> tuple[Exception | None, float]:
    started = time.monotonic()
    try:
        await call()
    except Exception as exc:  # the test inspects whatever came out
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


CALL_NAMES = ("query_skills", "seed_authored_skill", "set_trigger", "publish", "turn")


def _calls(store: GraphMemoryStore, scope: MemoryScope) -> dict[str, Callable[[], Awaitable[Any]]]:
    """One call of each kind, named as in ``CALL_NAMES``."""
    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "query_skills": lambda: ProceduralLayer(store).query_skills(scope),
        "seed_authored_skill": lambda: ProceduralLayer(store).seed_authored_skill(
            scope, label="Deliver", steps=["deliver"], source_tag="authored:test", identifier="deliver"),
        "set_trigger": lambda: ProspectiveLayer(store).set_trigger(
            scope, condition="the user says hi", task="greet", identifier="hi"),
        "publish": lambda: store.publish(scope, "w-stall"),
        "turn": lambda: TurnMemory(store).begin(scope),
    }
    assert tuple(calls) == CALL_NAMES
    return calls


@contextlib.asynccontextmanager
async def _proxied(
    neo4j_settings: Any, scope: MemoryScope, warm: tuple[str, ...],
) -> AsyncIterator[tuple[TcpProxy, neo4j.AsyncDriver]]:
    """A driver to the test server through a proxy of its own, with ``scope``'s skill seeded and the
    ``warm`` calls made (queries planned, a connection pooled: not what is measured)."""
    proxy = await TcpProxy.in_front_of(neo4j_settings.uri)
    driver = neo4j.AsyncGraphDatabase.driver(proxy.uri, auth=(neo4j_settings.user, neo4j_settings.password))
    try:
        patient = GraphMemoryStore(driver, database=neo4j_settings.database, query_timeout=SETUP_TIMEOUT)
        await ProceduralLayer(patient).seed_authored_skill(
            scope, label="Deliver", steps=["deliver"], source_tag="authored:test", action_tool="deliver",
            precondition=["get_status"])
        calls = _calls(patient, scope)
        for name in warm:
            await calls[name]()
        yield proxy, driver
    finally:
        proxy.resume()
        await driver.close()
        await proxy.cut()  # then ``forget`` deletes the tenant's nodes


@pytest.fixture
async def warm(
    neo4j_settings: Any, tenant: str, forget: list[str],
) -> AsyncIterator[tuple[TcpProxy, neo4j.AsyncDriver, MemoryScope]]:
    scope = MemoryScope(tenant)
    async with _proxied(neo4j_settings, scope, CALL_NAMES * 3) as (proxy, driver):
        yield proxy, driver, scope


async def test_a_stalled_server_costs_a_call_at_most_about_query_timeout(
    warm: tuple[Any, neo4j.AsyncDriver, MemoryScope],
) -> None:
    proxy, driver, scope = warm
    store = GraphMemoryStore(driver, query_timeout=TIMEOUT)
    calls = _calls(store, scope)
    outcomes: dict[str, tuple[Exception | None, float]] = {}

    async def timed(name: str) -> None:
        outcomes[name] = await _timed(calls[name])

    proxy.pause()
    try:  # the calls at once: each is timed on its own, and the stall is one for all
        async with anyio.create_task_group() as tg:
            for name in calls:
                tg.start_soon(timed, name)
    finally:
        proxy.resume()
    _record("stall", outcomes)
    late = {name: f"{type(exc).__name__} after {elapsed:.2f}s" for name, (exc, elapsed) in outcomes.items()
            if not isinstance(exc, StoreUnavailableError) or elapsed >= BOUND}
    assert late == {}, late
    # The same store answers again once the server is back.
    with anyio.fail_after(SETUP_TIMEOUT):
        while True:
            try:
                await ProceduralLayer(store).query_skills(scope)
                break
            except StoreUnavailableError:
                await anyio.sleep(0.2)


async def test_a_server_stalling_each_round_trip_costs_a_call_at_most_about_query_timeout(
    neo4j_settings: Any, tenant: str, forget: list[str],
) -> None:
    """Each store round trip meets a stall of 0.8 x query_timeout (it succeeds just in time on its own),
    so a call made of several round trips (publish folds, then writes; a seed writes, then reads back)
    must end at its deadline, not after the sum of its round trips' timeouts.

    The calls run at once, each through a proxy of its own and on a tenant of its own: one call's
    stall (which may hold its tenant's write lock) never delays another."""
    outcomes: dict[str, tuple[Exception | None, float]] = {}

    async def one(name: str) -> None:
        scope = MemoryScope(f"{tenant}-{name}")
        forget.append(scope.tenant_id)
        async with _proxied(neo4j_settings, scope, (name,)) as (proxy, driver):
            store = GraphMemoryStore(driver, database=neo4j_settings.database, query_timeout=TIMEOUT)
            within_timeout = store._within_timeout

            async def stalled(work: Callable[[], Awaitable[Any]], what: str, *, writes: bool = False) -> Any:
                proxy.pause()
                resume = asyncio.get_running_loop().call_later(STALL, proxy.resume)
                try:
                    return await within_timeout(work, what, writes=writes)
                finally:  # the round trip is over (answered or given up): the server answers again
                    resume.cancel()
                    proxy.resume()

            store._within_timeout = stalled  # type: ignore[method-assign]
            outcomes[name] = await _timed(_calls(store, scope)[name])

    async with anyio.create_task_group() as tg:
        for name in CALL_NAMES:
            tg.start_soon(one, name)
    _record("stall_each_trip", outcomes)
    assert sorted(outcomes) == sorted(CALL_NAMES)
    late = {name: f"{type(exc).__name__ if exc else 'success'} after {elapsed:.2f}s"
            for name, (exc, elapsed) in outcomes.items()
            if not (exc is None or isinstance(exc, StoreUnavailableError)) or elapsed >= SLOW_BOUND}
    assert late == {}, late


def _record(kind: str, outcomes: dict[str, tuple[Exception | None, float]]) -> None:
    for name, (exc, elapsed) in outcomes.items():
        FIGURES[f"{kind}.calls"] += 1
        FIGURES[f"{kind}.slowest_ms"] = max(FIGURES[f"{kind}.slowest_ms"], round(elapsed * 1000))
        print(f"{kind} {name}: {type(exc).__name__ if exc else 'ok'} in {elapsed:.2f}s")
