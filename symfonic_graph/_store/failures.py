"""What a driver failure becomes: one table, read top to bottom, first match wins.

The store lets only ``SymfonicGraphError`` out. Every failure of a round trip
that is not retried is looked up in ``FAILURES``: each row says which failures
it takes (an exception class, a Neo4j status code or code prefix, or a test of
the exception) and which typed error they become. A failure no row takes is
not the driver's (a bug), and is raised as it is.

Example:
    >>> from neo4j.exceptions import Neo4jError
    >>> exc = Neo4jError._hydrate_neo4j(code="Neo.ClientError.Statement.SyntaxError", message="bad")
    >>> error, cause = typed_failure(exc, Attempt("query skills", writes=True))
    >>> type(error).__name__, str(error).endswith("Nothing was written."), cause is exc
    ('QueryError', True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from neo4j.exceptions import AuthError, ClientError, DriverError, Neo4jError

from symfonic_graph.errors import (
    AuthenticationError,
    DatabaseNotFoundError,
    QueryError,
    StoreUnavailableError,
    SymfonicGraphError,
    ValidationError,
)

__all__ = ["FAILURES", "Attempt", "Failure", "one_line", "refused", "typed_failure"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """What the error messages say about the call that failed.

    ``last`` is the last transient failure retried before this one (None when
    the first attempt failed), ``target`` the server as a URI, ``database`` the
    database asked for.
    """

    what: str
    writes: bool = False
    timeout: float = 10.0
    target: str = "Neo4j"
    database: str | None = None
    last: BaseException | None = None

    @property
    def maybe(self) -> str:
        """The sentence a write's error ends with when the write may have committed."""
        return (" The write may have committed: retrying it with the same identifier is safe "
                "(it replaces, never duplicates).") if self.writes else ""


Matches = Callable[[BaseException], bool]
Build = Callable[[BaseException, Attempt], SymfonicGraphError]


@dataclass(frozen=True, slots=True)
class Failure:
    """One row of the table: the failures ``matches`` takes become ``build``'s error.

    ``from_last``: the error's ``__cause__`` is the last retried failure
    (a deadline hit while retrying), not the exception that ended the call.
    """

    name: str
    matches: Matches
    build: Build
    from_last: bool = False


def one_line(exc: object) -> str:
    """``exc`` as one line of text (its class name when it has no message)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def refused(exc: BaseException, depth: int = 0) -> bool:
    """Whether ``exc`` is a refused connection: the driver wraps the socket's ``ConnectionRefusedError``,
    and a routing driver groups one failure per router (refused when all were refused)."""
    cause: BaseException | None = exc
    while cause is not None and depth < 20:
        if isinstance(cause, ConnectionRefusedError):
            return True
        if isinstance(cause, BaseExceptionGroup):
            return all(refused(sub, depth + 1) for sub in cause.exceptions)
        cause, depth = cause.__cause__ or cause.__context__, depth + 1
    return False


def _from_driver(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and str(tb.tb_frame.f_globals.get("__name__", "")).startswith("neo4j")


def _code(exc: BaseException) -> str:
    return exc.code if isinstance(exc, Neo4jError) and exc.code else ""


def _message(exc: BaseException) -> str:
    return (exc.message if isinstance(exc, Neo4jError) else None) or str(exc)


# -- what matches ---------------------------------------------------------


def _client_code(code: str, *, prefix: bool = False) -> Matches:
    def matches(exc: BaseException) -> bool:
        found = _code(exc)
        return isinstance(exc, ClientError) and (found.startswith(code) if prefix else found == code)

    return matches


def _a(*classes: type[BaseException]) -> Matches:
    return lambda exc: isinstance(exc, classes)


def _login_refused(exc: BaseException) -> bool:
    code = _code(exc)
    return isinstance(exc, AuthError) or (
        isinstance(exc, ClientError) and code.startswith("Neo.ClientError.Security.")
        and code != "Neo.ClientError.Security.Forbidden")


def _connection_refused(exc: BaseException) -> bool:
    return isinstance(exc, (Neo4jError, DriverError, OSError)) and refused(exc)


def _unsendable(exc: BaseException) -> bool:
    # Raised while the driver packs a parameter: an unencodable string (a lone
    # surrogate), an integer beyond 64 bits, an unsupported type. A ValueError or
    # TypeError raised elsewhere is a bug, shown as it is.
    return isinstance(exc, (UnicodeError, OverflowError)) or (
        isinstance(exc, (ValueError, TypeError)) and _from_driver(exc))


# -- what they become -----------------------------------------------------


def _timed_out(exc: BaseException, at: Attempt) -> SymfonicGraphError:
    seen = f" (last error: {one_line(at.last)})" if at.last is not None else ""
    return StoreUnavailableError(
        f"{at.what}: Neo4j did not answer within {at.timeout}s{seen}; check the server, "
        f"or raise query_timeout.{at.maybe}"
    )


def _no_database(exc: BaseException, at: Attempt) -> SymfonicGraphError:
    return DatabaseNotFoundError(at.database, at.target, _message(exc))


LOGIN_REASONS: Final = (
    (lambda code, message: "missing key `credentials`" in message, "no password was given"),
    (lambda code, message: code == "Neo.ClientError.Security.Unauthorized", "wrong user name or password"),
)
"""Why a login was refused, first match wins; otherwise "the credentials were refused"."""


def _login(exc: BaseException, at: Attempt) -> SymfonicGraphError:
    code, message = _code(exc), _message(exc)
    why = next((reason for test, reason in LOGIN_REASONS if test(code, message)), "the credentials were refused")
    return AuthenticationError(
        f"{at.target} rejected the login: {why} ({one_line(message)}). Check NEO4J_USER and "
        "NEO4J_PASSWORD (or the credentials given to the driver); for the local server, "
        "`symfonic-graph server start` prints them"
    )


def _query(exc: BaseException, at: Attempt) -> SymfonicGraphError:
    return QueryError(at.what, _code(exc), _message(exc), hint="Nothing was written." if at.writes else "")


def _connection(exc: BaseException, at: Attempt) -> SymfonicGraphError:
    return StoreUnavailableError(
        f"cannot connect to {at.target}: connection refused; is Neo4j running? "
        f"Start it, or check the server address.{at.maybe if at.last is not None else ''}"
    )


def _server_failed(exc: BaseException, at: Attempt) -> SymfonicGraphError:
    return StoreUnavailableError(
        f"{at.what}: Neo4j failed ({_code(exc)}: {one_line(_message(exc))}); check the server.{at.maybe}")


def _unavailable(exc: BaseException, at: Attempt) -> SymfonicGraphError:
    return StoreUnavailableError(f"{at.what}: Neo4j is unavailable ({one_line(exc)}); check the server.{at.maybe}")


def _unsent(exc: BaseException, at: Attempt) -> SymfonicGraphError:
    return ValidationError(
        at.what, f"a value cannot be sent to Neo4j ({one_line(exc)}).{' Nothing was written.' if at.writes else ''}")


FAILURES: Final[tuple[Failure, ...]] = (
    Failure("transaction timed out", _client_code("Neo.ClientError.Transaction.TransactionTimedOut", prefix=True),
            _timed_out),
    Failure("no such database", _client_code("Neo.ClientError.Database.DatabaseNotFound"), _no_database),
    Failure("login refused", _login_refused, _login),
    Failure("query refused", _a(ClientError), _query),
    Failure("deadline passed", _a(TimeoutError), _timed_out, from_last=True),
    Failure("connection refused", _connection_refused, _connection),
    Failure("server failed", _a(Neo4jError), _server_failed),
    Failure("server unreachable", _a(DriverError, OSError), _unavailable),
    Failure("value not sendable", _unsendable, _unsent),
)
"""Every failure the store reports, in the order they are tried (a ``ClientError`` is a ``Neo4jError``,
a ``TimeoutError`` an ``OSError``: the narrower row comes first)."""


def typed_failure(exc: BaseException, attempt: Attempt) -> tuple[SymfonicGraphError, BaseException | None] | None:
    """The typed error ``exc`` becomes and its cause, or None when no row takes it (not the driver's: a bug)."""
    for failure in FAILURES:
        if failure.matches(exc):
            return failure.build(exc, attempt), (attempt.last if failure.from_last else exc)
    return None
