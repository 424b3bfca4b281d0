"""Bounds on what one scope may write, so that its catalog stays small enough to ship every turn.

A turn reads a scope's whole catalog in one query. A tenant that could seed
any number of skills, or labels of any size, could make its own reads time
out and slow the batches it shares with other tenants. The bounds are
enforced when a skill is written; ``doctor`` reports scopes seeded past
them by hand.

Example:
    >>> MAX_SKILLS_PER_SCOPE
    2000
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from symfonic_graph.errors import ValidationError
from symfonic_graph.scope import MemoryScope, describe_scope

__all__ = ["MAX_PRECONDITIONS", "MAX_PROPERTY_BYTES", "MAX_SKILLS_PER_SCOPE", "MAX_STEPS", "refuse_over_cap"]

MAX_SKILLS_PER_SCOPE: Final = 2_000
"""Skills one scope may own (staged ones included, retracted ones not); a write past it is refused."""
MAX_PROPERTY_BYTES: Final = 8 * 1024
"""UTF-8 bytes of a skill's ``label``, ``context``, each step and each precondition's text, at most."""
MAX_STEPS: Final = 200
"""Steps of one skill, at most."""
MAX_PRECONDITIONS: Final = 64
"""Preconditions of one skill, at most."""


def refuse_over_cap(scope: MemoryScope) -> Callable[[list[dict[str, Any]]], None]:
    """A step check for the ``skills_owned_count`` statement: over the cap rolls the write back.

    Raises (from the check):
        ValidationError: naming ``skills``, when the scope would own more than ``MAX_SKILLS_PER_SCOPE``.
    """

    def check(rows: list[dict[str, Any]]) -> None:
        if rows and rows[0]["skills"] > MAX_SKILLS_PER_SCOPE:
            raise ValidationError("skills", (
                f"{describe_scope(scope)} would own {rows[0]['skills']} skills, over the cap of {MAX_SKILLS_PER_SCOPE} "
                "per scope (a catalog must stay small enough to ship every turn); retract unused skills, or "
                "split them across namespaces. Nothing was written."))

    return check
