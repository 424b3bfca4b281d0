"""The failure table: every driver failure becomes one typed error, and every row of the table is used.

No server needed: the failures are built the way the driver raises them.
"""

from __future__ import annotations

import inspect

import neo4j.exceptions as driver_errors
import pytest
from neo4j.exceptions import AuthError, ClientError, DriverError, Neo4jError, ServiceUnavailable

from symfonic_graph._store.failures import FAILURES, Attempt, typed_failure
from symfonic_graph.errors import (
    AuthenticationError,
    DatabaseNotFoundError,
    QueryError,
    StoreUnavailableError,
    SymfonicGraphError,
    ValidationError,
)

LAST = ServiceUnavailable("the connection was lost")
ATTEMPT = Attempt("write skills_write", writes=True, timeout=2.0, target="bolt://db:7687", database="memory",
                  last=LAST)


def neo(code: str, message: str = "refused", cls: type[Neo4jError] = Neo4jError) -> Neo4jError:
    error = Neo4jError._hydrate_neo4j(code=code, message=message)
    if cls is not Neo4jError:
        assert isinstance(error, cls), (code, type(error))
    return error


def refused_connection() -> ServiceUnavailable:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as exc:
            raise ServiceUnavailable("Couldn't connect to db:7687") from exc
    except ServiceUnavailable as wrapped:
        return wrapped


def raised_in_driver(exc: Exception) -> Exception:
    """``exc`` with a traceback whose last frame is a module of the driver (as a packing error has)."""
    try:
        exec(compile("raise exc", "<neo4j packstream>", "exec"), {"__name__": "neo4j._codec", "exc": exc})
    except Exception as raised:
        return raised
    raise AssertionError("unreachable")


# (the failure, the row that takes it, the typed error, words of its message)
CASES: list[tuple[BaseException, str, type[SymfonicGraphError], str]] = [
    (neo("Neo.ClientError.Transaction.TransactionTimedOut"), "transaction timed out", StoreUnavailableError,
     "did not answer within 2.0s (last error: the connection was lost)"),
    (neo("Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration"), "transaction timed out",
     StoreUnavailableError, "raise query_timeout. The write may have committed"),
    (neo("Neo.ClientError.Database.DatabaseNotFound", "no db"), "no such database", DatabaseNotFoundError, "memory"),
    (neo("Neo.ClientError.Security.Unauthorized", "bad", AuthError), "login refused", AuthenticationError,
     "bolt://db:7687 rejected the login: wrong user name or password"),
    (neo("Neo.ClientError.Security.Unauthorized", "missing key `credentials`"), "login refused",
     AuthenticationError, "no password was given"),
    (neo("Neo.ClientError.Security.AuthenticationRateLimit"), "login refused", AuthenticationError,
     "the credentials were refused"),
    (neo("Neo.ClientError.Security.Forbidden", "not allowed"), "query refused", QueryError, "Nothing was written."),
    (neo("Neo.ClientError.Statement.SyntaxError", "bad"), "query refused", QueryError, "Statement.SyntaxError: bad"),
    (TimeoutError(), "deadline passed", StoreUnavailableError, "did not answer within 2.0s"),
    (refused_connection(), "connection refused", StoreUnavailableError, "cannot connect to bolt://db:7687"),
    (ConnectionRefusedError(111, "refused"), "connection refused", StoreUnavailableError, "is Neo4j running?"),
    (neo("Neo.TransientError.Transaction.DeadlockDetected"), "server failed", StoreUnavailableError,
     "Neo4j failed (Neo.TransientError.Transaction.DeadlockDetected"),
    (neo("Neo.DatabaseError.General.UnknownError", "boom"), "server failed", StoreUnavailableError, "boom"),
    (ServiceUnavailable("routing table empty"), "server unreachable", StoreUnavailableError,
     "Neo4j is unavailable (routing table empty)"),
    (OSError("network down"), "server unreachable", StoreUnavailableError, "network down"),
    (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), "value not sendable", ValidationError,
     "a value cannot be sent to Neo4j"),
    (OverflowError("int too large"), "value not sendable", ValidationError, "Nothing was written."),
    (raised_in_driver(TypeError("cannot pack a set")), "value not sendable", ValidationError, "cannot pack a set"),
]


@pytest.mark.parametrize(("failure", "row", "typed", "words"), CASES, ids=[c[1] + ":" + repr(c[0])[:40] for c in CASES])
def test_each_failure_becomes_its_typed_error(failure: BaseException, row: str, typed: type, words: str) -> None:
    taken_by = next(f.name for f in FAILURES if f.matches(failure))
    assert taken_by == row
    found = typed_failure(failure, ATTEMPT)
    assert found is not None
    error, cause = found
    assert type(error) is typed
    assert words in str(error)
    assert cause is (LAST if row == "deadline passed" else failure)


def test_every_row_of_the_table_takes_some_failure() -> None:
    used = {row for _, row, _, _ in CASES}
    assert [f.name for f in FAILURES if f.name not in used] == []
    assert len({f.name for f in FAILURES}) == len(FAILURES)


def _driver_exception_classes() -> list[type[Exception]]:
    return [cls for _, cls in inspect.getmembers(driver_errors, inspect.isclass)
            if issubclass(cls, (Neo4jError, DriverError))]


@pytest.mark.parametrize("cls", _driver_exception_classes(), ids=lambda c: c.__name__)
def test_no_exception_of_the_driver_leaves_untyped(cls: type[Exception]) -> None:
    try:
        failure = cls()
    except TypeError:
        failure = cls("failed")
    found = typed_failure(failure, ATTEMPT)
    assert found is not None, f"{cls.__name__} has no row in FAILURES"
    assert isinstance(found[0], SymfonicGraphError)
    if issubclass(cls, ClientError):
        assert not isinstance(found[0], ValidationError)


@pytest.mark.parametrize("bug", [ValueError("a bug of ours"), TypeError("a bug of ours"), KeyError("k"),
                                 RuntimeError("x")])
def test_a_failure_that_is_not_the_drivers_is_not_typed(bug: Exception) -> None:
    assert typed_failure(bug, ATTEMPT) is None
