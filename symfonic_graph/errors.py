"""The errors symfonic-graph raises, under one root.

    SymfonicGraphError
     ├── ScopeError (also ValueError)            a tenant id or namespace is unusable
     ├── ValidationError (also ValueError)       a write's input is wrong; nothing was written
     ├── MemoryContractError (also ValueError)   a policy or composition breaks the contract
     ├── ConfigurationError                      the app's wiring is broken (e.g. a skill lookup raised)
     ├── QueryFileError                          a .cypher file is malformed (names file:line)
     ├── SchemaError                             the schema could not be applied
     ├── NotFoundError (also LookupError)        no visible node with that id in the scope
     ├── AuthorityError                          the node is visible but owned by another scope
     ├── AuthenticationError                     Neo4j rejected the user name or password
     ├── QueryError                              Neo4j refused a query: its code and message
     │    └── DatabaseNotFoundError               the configured database does not exist
     ├── StoreUnavailableError                   Neo4j did not answer in time, or is down
     └── LocalServerError                        the local development Neo4j could not run

Every message says what was wrong and what to do next. A public call raises
nothing else: no raw driver, encoding or overflow exception. The driver's own
exception, when there was one, is kept as ``__cause__``.
"""

from __future__ import annotations

from functools import partial
from typing import Any


class SymfonicGraphError(Exception):
    """Root of every error raised by symfonic-graph."""


class ScopeError(SymfonicGraphError, ValueError):
    """A tenant id or namespace cannot be used as a memory scope."""


class ValidationError(SymfonicGraphError, ValueError):
    """Input to a write is malformed. Nothing was written.

    Attributes:
        field: the name of the offending field, e.g. ``"steps[2]"``.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class MemoryContractError(SymfonicGraphError, ValueError):
    """A retrieval policy or capability composition breaks the memory contract."""


class ConfigurationError(SymfonicGraphError):
    """The application's wiring is broken, never a store outage: fix the code, retrying will not help.

    Raised out of the gate when a skill lookup raises anything but
    ``StoreUnavailableError`` (the original exception is the ``__cause__``)
    or returns something that is not an iterable of skills.
    """


class QueryFileError(SymfonicGraphError):
    """A named Cypher file is malformed; the message names ``file:line``."""


class SchemaError(SymfonicGraphError):
    """The versioned schema could not be applied."""


class NotFoundError(SymfonicGraphError, LookupError):
    """No node with that id is visible in the given scope."""


class AuthorityError(SymfonicGraphError):
    """A write reached a node its scope sees but does not own; nothing changed.

    A namespace scope sees its tenant's tenant-wide nodes but cannot change
    them; no scope ever takes over a node of another tenant. The message names
    the owning scope.
    """


class AuthenticationError(SymfonicGraphError):
    """Neo4j rejected the credentials (a wrong or missing user name or password).

    Retrying does not help; the message says where the credentials come from.
    """


class QueryError(SymfonicGraphError):
    """Neo4j refused a query: a syntax or type error, a constraint, a server limit.

    The message names the query and Neo4j's status code. Nothing of a failed
    write was committed (the server rolled the transaction back).

    It is not a driver exception (since 0.2.0): catch ``QueryError`` (or
    ``SymfonicGraphError``), never ``neo4j.exceptions.ClientError``; the
    driver's error is its ``__cause__``.

    Attributes:
        query: the name of the query (or ``file:line`` of a script statement).
        code: Neo4j's status code, e.g. ``"Neo.ClientError.Statement.SyntaxError"``.
        message: Neo4j's own message, in full.

    Example:
        >>> err = QueryError("query skills_visible", "Neo.ClientError.Statement.SyntaxError", "Invalid input")
        >>> str(err)
        'query skills_visible failed on the server: Neo.ClientError.Statement.SyntaxError: Invalid input'
        >>> err.code
        'Neo.ClientError.Statement.SyntaxError'
    """

    def __init__(self, query: str, code: str, message: str, *, hint: str = "") -> None:
        first_line = message.strip().splitlines()[0] if message.strip() else "(no message)"
        self._text = f"{query} failed on the server: {code}: {first_line}" + (f" {hint}" if hint else "")
        super().__init__(self._text)
        self.query = query
        self.hint = hint
        self._query_code = code
        self._query_message = message

    @property
    def code(self) -> str:
        """Neo4j's status code."""
        return self._query_code

    @property
    def message(self) -> str:
        """Neo4j's message, in full."""
        return self._query_message

    def is_retryable(self) -> bool:
        """Never: the same query fails the same way."""
        return False

    def __str__(self) -> str:
        return self._text

    def __reduce__(self) -> tuple[Any, ...]:
        return partial(QueryError, hint=self.hint), (self.query, self.code, self.message)


class DatabaseNotFoundError(QueryError):
    """The database the store was given (``database=``, ``NEO4J_DATABASE``) does not exist on the server.

    Example:
        >>> str(DatabaseNotFoundError("nope", "bolt://127.0.0.1:7687"))[:53]
        "database 'nope' does not exist on bolt://127.0.0.1:76"
    """

    def __init__(self, database: str | None, target: str, message: str = "") -> None:
        super().__init__(f"database {database!r}", "Neo.ClientError.Database.DatabaseNotFound", message)
        self.database, self.target = database, target
        self._text = (f"database {database!r} does not exist on {target}: set NEO4J_DATABASE (or the store's "
                      "database=) to an existing database (`SHOW DATABASES` lists them), or leave it unset for "
                      "the server's default")

    def __reduce__(self) -> tuple[Any, ...]:
        return DatabaseNotFoundError, (self.database, self.target, self.message)


class StoreUnavailableError(SymfonicGraphError):
    """Neo4j could not be reached, or a query exceeded its timeout."""


class LocalServerError(SymfonicGraphError):
    """The local development Neo4j could not be fetched, started or stopped."""
