"""The property names of the node types operators seed by hand, and their near misses.

A property the read does not know is ignored. Where a misspelling of a known
name would make a rule weaker than written (``same_arg`` for ``same_args``:
the rule would accept any arguments; ``acton_tool``: another tool would be
guarded), the read keeps the skill blocking instead, and ``doctor`` names the
property. The turn read ships the unknown names of each node (the
``skill_row`` fragment lists the known ones; a test keeps both lists equal).

Example:
    >>> near_miss("same_arg", PRECONDITION_PROPERTIES), near_miss("tenantid", PRECONDITION_PROPERTIES)
    ('same_args', 'tenant_id')
    >>> near_miss("owner", SKILL_PROPERTIES) is None, near_miss("id", PRECONDITION_PROPERTIES) is None
    (True, True)
"""

from __future__ import annotations

from typing import Final

__all__ = ["PRECONDITION_PROPERTIES", "SKILL_PROPERTIES", "WEAKENING_SKILL_PROPERTIES", "near_miss"]

SKILL_PROPERTIES: Final = frozenset({
    "id", "tenant_id", "namespace", "label", "identifier", "steps", "action_tool", "context", "status", "active",
    "source", "created_at", "updated_at", "enforcement", "support", "confidence", "failures_without", "examples"})
"""The documented properties of a ``:Skill``."""
PRECONDITION_PROPERTIES: Final = frozenset({
    "tenant_id", "namespace", "kind", "tool", "same_args", "within", "tools", "path", "op", "value", "if_missing",
    "text", "same_args_from", "where", "latest", "voided_by", "message", "alternatives", "max_calls", "max_sum", "sum",
    "per", "window"})
"""The documented properties of a ``:Precondition``."""
WEAKENING_SKILL_PROPERTIES: Final = frozenset({"action_tool", "steps"})
"""The skill properties whose misspelling changes which tool a rule guards (the others cannot weaken it)."""


def _distance(a: str, b: str, most: int) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``most + 1`` once it exceeds ``most``."""
    if abs(len(a) - len(b)) > most:
        return most + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        row = [i]
        for j, cb in enumerate(b, start=1):
            row.append(min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(row) > most:
            return most + 1
        previous = row
    return previous[-1]


def near_miss(name: object, known: frozenset[str]) -> str | None:
    """The known property ``name`` was probably meant to be, or None.

    A near miss is not itself known and is within edit distance 2 of a known
    name, ignoring case (1 for names of 3 or 4 letters, 0 for 2 letters: ``id``
    on a precondition is not a misspelt ``op``). Library properties
    (``symfonic_*``) are never near misses.
    """
    if not isinstance(name, str) or name in known or name.startswith("symfonic_"):
        return None
    lowered = name.lower()
    best: tuple[int, str] | None = None
    for candidate in sorted(known):
        most = min(2, max(0, (len(candidate) - 1) // 2))
        distance = _distance(lowered, candidate, most)
        if distance <= most and (best is None or distance < best[0]):
            best = (distance, candidate)
    return None if best is None else best[1]
