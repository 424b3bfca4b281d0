"""Bounds on what one scope may write, so that its catalog stays small enough to ship every turn.

A turn reads a scope's whole catalog in one query. A tenant that could seed
any number of skills, or labels of any size, could make its own reads time
out and slow the batches it shares with other tenants. The bounds are
enforced by every write (skills, drafts, approve, restore, publish, seed
files, triggers, facts); ``doctor`` reports scopes seeded past them by hand.

Besides counts and sizes, each owning scope has one budget, ``MAX_SCOPE_WEIGHT``:
the characters of the text its turn reads ship (its skills, drafts included,
their steps and preconditions, and its pending triggers), each node counting
``NODE_WEIGHT`` more, since a node costs a read (and the compile after it) as
much as that much text. A scope at the budget is read and compiled in well
under a second (``docs/performance.md``); a namespaced scope reads its
tenant's rules and its own, so at most twice that.

Example:
    >>> MAX_SKILLS_PER_SCOPE
    2000
    >>> MAX_SCOPE_WEIGHT
    8388608
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from symfonic_graph.errors import ValidationError
from symfonic_graph.shape.scope import MemoryScope, describe_scope

__all__ = [
    "MAX_KEY_PART", "MAX_LIST_ITEMS", "MAX_PRECONDITIONS", "MAX_PROPERTY_BYTES", "MAX_SCOPE_WEIGHT",
    "MAX_SKILLS_PER_SCOPE", "MAX_STEPS", "NODE_WEIGHT", "check_sizes", "refuse_heavy_write", "refuse_over_cap",
    "skill_weight",
    "trigger_weight", "weight_of",
]

MAX_SKILLS_PER_SCOPE: Final = 2_000
"""Skills one scope may own (staged ones included, retracted ones not); a write past it is refused."""
MAX_KEY_PART: Final = 256
"""Characters of an identifier or write id, at most: they go into the uniquely indexed ``symfonic_key``,
whose index entries Neo4j caps at about 8 kB, so the key always fits."""
MAX_PROPERTY_BYTES: Final = 8 * 1024
"""UTF-8 bytes of a skill's ``label``, ``context``, each step and each precondition's text, at most."""
MAX_STEPS: Final = 200
"""Steps of one skill, at most."""
MAX_PRECONDITIONS: Final = 64
"""Preconditions of one skill, at most."""
MAX_LIST_ITEMS: Final = 200
"""Entries of any list a write stores (a state precondition's ``in`` values, an ``any`` of tools), at most."""
NODE_WEIGHT: Final = 1024
"""What one node (a skill, a precondition, a trigger) adds to a scope's weight (the literal in ``scope_load``)."""
MAX_SCOPE_WEIGHT: Final = 8 * 1024 * 1024
"""The budget of one owning scope: characters its turn reads ship, plus ``NODE_WEIGHT`` per node."""


def refuse_over_cap(scope: MemoryScope) -> Callable[[list[dict[str, Any]]], None]:
    """A step check for ``skills_owned_count`` / ``skills_owned_after_staging``: over a bound rolls the write back.

    Raises (from the check):
        ValidationError: naming ``skills`` when the scope would own more than
            ``MAX_SKILLS_PER_SCOPE`` skills, ``weight`` when what its turn reads
            ship would exceed ``MAX_SCOPE_WEIGHT``.
    """

    def check(rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        skills, weight = rows[0]["skills"], rows[0].get("weight") or 0
        if skills > MAX_SKILLS_PER_SCOPE:
            raise ValidationError("skills", (
                f"{describe_scope(scope)} would own {skills} skills, over the cap of {MAX_SKILLS_PER_SCOPE} "
                "per scope (a catalog must stay small enough to ship every turn); retract unused skills "
                "(`symfonic-graph skills retract`), or split them across namespaces. Nothing was written."))
        if weight > MAX_SCOPE_WEIGHT:
            raise ValidationError("weight", (
                f"{describe_scope(scope)} would hold {weight:,} characters of rules and reminders (each skill, "
                f"precondition and pending trigger counting {NODE_WEIGHT} more), over the budget of "
                f"{MAX_SCOPE_WEIGHT:,} per scope a turn read ships; shorten steps and contexts, retract unused "
                "skills, resolve old reminders, or split them across namespaces. Nothing was written."))

    return check


def weight_of(value: Any) -> int:
    """Characters of text in a write's value (strings in maps and lists), as ``scope_load`` counts them.

    Example:
        >>> weight_of({"label": "Deploy", "steps": ["a", "bc"]})
        11
    """
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(weight_of(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(1 + weight_of(v) for v in value)
    return 0


def check_sizes(field: str, value: Any) -> None:
    """Refuse a written value holding a string over ``MAX_PROPERTY_BYTES`` or a list over ``MAX_LIST_ITEMS``.

    Walks maps and lists; the error names the first offending path, e.g.
    ``skills[3].precondition[0].value[7]``.

    Example:
        >>> check_sizes("steps", ["deploy"])
    """
    if isinstance(value, str):
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_PROPERTY_BYTES:
            raise ValidationError(field, f"is {size} bytes; at most {MAX_PROPERTY_BYTES} (every turn ships it): "
                                         "shorten it. Nothing was written.")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_sizes(f"{field}.{key}", item)
    elif isinstance(value, (list, tuple)):
        if len(value) > MAX_LIST_ITEMS:
            raise ValidationError(field, f"has {len(value)} entries; at most {MAX_LIST_ITEMS} (every turn ships "
                                         "them): shorten the list. Nothing was written.")
        for i, item in enumerate(value):
            check_sizes(f"{field}[{i}]", item)


def skill_weight(row: Mapping[str, Any]) -> int:
    """The weight a ``skills_write`` row adds to its scope (text, plus ``NODE_WEIGHT`` per node)."""
    text = weight_of([row.get(k) for k in ("id", "label", "identifier", "action_tool", "context", "source")])
    return NODE_WEIGHT * (1 + len(row["preconditions"])) + text + weight_of(row["steps"]) + weight_of(
        [{k: v for k, v in p.items() if k not in ("kind", "position", "within", "if_missing")}
         for p in row["preconditions"]])


def trigger_weight(row: Mapping[str, Any]) -> int:
    """The weight a ``triggers_write`` row adds to its scope."""
    return NODE_WEIGHT + weight_of([row.get("id"), row.get("condition"), row.get("task")])


def refuse_heavy_write(field: str, weight: int) -> None:
    """Refuse, before any query, a write whose own text alone exceeds a scope's budget.

    Raises:
        ValidationError: naming ``field``.
    """
    if weight > MAX_SCOPE_WEIGHT:
        raise ValidationError(field, (
            f"holds {weight:,} characters of rules and reminders (each node counting {NODE_WEIGHT} more), over "
            f"the budget of {MAX_SCOPE_WEIGHT:,} per scope a turn read ships; write fewer or shorter entries, "
            "or split them across namespaces. Nothing was written."))
