"""What capabilities hand to prompt assembly: contributions and effect grants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Position = Literal["cached", "dynamic"]


@dataclass(frozen=True, slots=True)
class PluginContribution:
    """One block of text offered to prompt assembly.

    ``position="cached"`` blocks belong to the cached system-prompt prefix and
    must be byte-stable; ``"dynamic"`` blocks change per turn. Within a
    position, lower ``order`` comes first.

    Example:
        >>> block = PluginContribution("## RULES", "cached", 5, "", "symfonic.procedural")
        >>> block.position, block.order
        ('cached', 5)
    """

    content: str
    position: str
    order: int
    header: str
    origin: str


@dataclass(frozen=True, slots=True)
class GrantEffects:
    """A capability's declaration of the effects it needs, e.g. ``"memory-read"``."""

    effect: str
