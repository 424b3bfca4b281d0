"""Re-checking a cached catalog whose version did not move: when, and what an un-bumped edit changed.

Every library write bumps a tenant's catalog version, and ``TurnMemory``'s
warm query compares it on every turn: such a change is seen on the next turn.
A plain-Cypher edit that forgot the bump shows only in the skills' properties,
so a scope's catalog is shipped again ``recheck_every`` seconds after its
last ship (less up to a quarter, fixed per scope and process, so that scopes
read together do not all ship again together). When the rows then differ
under the same version, :func:`edited` names the skills that changed.

Example:
    >>> recheck_after(300.0, MemoryScope("acme")) <= 300.0
    True
"""

from __future__ import annotations

from collections.abc import Iterable

from symfonic_graph.shape.scope import MemoryScope

__all__ = ["DEFAULT_RECHECK", "edited", "recheck_after"]

DEFAULT_RECHECK = 300.0
"""Seconds after which a catalog whose version did not move is shipped again (an edit that did not bump it)."""
_SPREAD = 0.25  # the largest share of the period a scope's recheck comes early


def recheck_after(period: float, scope: MemoryScope) -> float:
    """Seconds after its last ship a scope's unchanged catalog is shipped again: ``period`` at most.

    The share taken off (0 to a quarter) is fixed per scope within a process
    (Python's string hash), so that a fleet's scopes, first read together,
    ship again spread over a quarter of the period, each at its own pace.

    Example:
        >>> 225.0 <= recheck_after(300.0, MemoryScope("acme", "u1")) <= 300.0
        True
    """
    share = (hash((scope.tenant_id, scope.namespace)) % 1024) / 1024
    return period * (1.0 - _SPREAD * share)


def edited(before: Iterable[object], after: Iterable[object]) -> list[tuple[str, str | None]]:
    """(id, namespace) of each skill added, removed or changed from ``before`` to ``after``, by id.

    Skills are compared as read (``Skill`` equality), so rows that differ only
    in a value Python reads alike (a date seeded by hand, read afresh) change
    nothing.

    Example:
        >>> edited([], [])
        []
    """
    old = {getattr(s, "id", None): s for s in before}
    new = {getattr(s, "id", None): s for s in after}
    out = []
    for ident in sorted(old.keys() | new.keys(), key=str):
        if old.get(ident) != new.get(ident):
            skill = new.get(ident, old.get(ident))
            out.append((str(ident), getattr(skill, "namespace", None)))
    return out
