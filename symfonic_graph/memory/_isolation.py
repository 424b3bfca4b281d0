"""The last line of isolation: rows handed to a turn are checked against the scope again.

Visibility is enforced in the Cypher of every read; this re-check on the way
out only ever drops something if a query is wrong, and says so at ERROR.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol, TypeVar

from symfonic_graph.shape.scope import MemoryScope

log = logging.getLogger("symfonic_graph.isolation")


class _Scoped(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def tenant_id(self) -> str: ...
    @property
    def namespace(self) -> str | None: ...


N = TypeVar("N", bound=_Scoped)


def keep_visible(scope: MemoryScope, nodes: Iterable[N], kind: str) -> list[N]:
    """``nodes`` visible to ``scope``; any other is dropped and logged at ERROR.

    Example:
        >>> keep_visible(MemoryScope("acme"), skills, "skill")
    """
    kept = []
    for node in nodes:
        if scope.sees(node.tenant_id, node.namespace):
            kept.append(node)
            continue
        log.error(
            "dropped %s %s: it belongs to tenant %r namespace %r, not to the scope (tenant %r namespace %r); "
            "this is an isolation bug, please report it",
            kind, node.id, node.tenant_id, node.namespace, scope.tenant_id, scope.namespace,
        )
    return kept
