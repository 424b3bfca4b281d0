"""The errors symfonic-graph raises, under one root.

    SymfonicGraphError
     ├── ScopeError (also ValueError)            a tenant id or namespace is unusable
     ├── ValidationError (also ValueError)       a write's input is wrong; nothing was written
     ├── MemoryContractError (also ValueError)   a policy or composition breaks the contract
     ├── QueryFileError                          a .cypher file is malformed (names file:line)
     ├── SchemaError                             the schema could not be applied
     ├── NotFoundError (also LookupError)        no visible node with that id in the scope
     ├── AuthorityError                          the node is visible but owned by another scope
     ├── StoreUnavailableError                   Neo4j did not answer in time, or is down
     └── LocalServerError                        the local development Neo4j could not run

Every message says what was wrong and what to do next.
"""

from __future__ import annotations


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


class StoreUnavailableError(SymfonicGraphError):
    """Neo4j could not be reached, or a query exceeded its timeout."""


class LocalServerError(SymfonicGraphError):
    """The local development Neo4j could not be fetched, started or stopped."""
