"""Prompt composition: collect, order and budget capability contributions.

Capabilities *offer* contributions; composition decides what is *delivered*.
That is why a selected trigger is not a delivered one: over a character
budget, its block may be dropped here (and reported in ``dropped``).

Order: every ``"cached"`` block before every ``"dynamic"`` one (other
positions last), then ascending ``order``; ties keep capability order, then
the order within a capability. Blocks are rendered as ``header`` + newline +
``content`` (just ``content`` when the header is empty) and joined by a blank
line.

Budget: blocks are taken in that order; one that would push the rendered
prompt past ``budget_chars`` (separators counted) is dropped whole, and later,
smaller blocks may still fit. A block is never truncated.

Example:
    >>> composed = await compose_prompt([preflight_capability, trigger_capability], request,
    ...                                 budget_chars=4000)
    >>> print(composed.text)
    >>> [c.origin for c in composed.dropped]
    []
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from symfonic_graph.shape.contributions import PluginContribution

__all__ = ["ComposedPrompt", "PromptingCapability", "compose_prompt", "render_contribution"]

log = logging.getLogger("symfonic_graph.composition")

_POSITION_RANK: Final = {"cached": 0, "dynamic": 1}
_SEPARATOR: Final = "\n\n"


@runtime_checkable
class PromptingCapability(Protocol):
    """Anything that offers prompt blocks for a turn.

    Example:
        >>> class Greeting:
        ...     async def contribute(self, request):
        ...         return [PluginContribution("Be kind.", "cached", 1, "", "app.greeting")]
    """

    async def contribute(self, request: object) -> Sequence[PluginContribution]:
        """The blocks this capability offers for ``request``."""
        ...


@dataclass(frozen=True, slots=True)
class ComposedPrompt:
    """What composition delivered, what it dropped over budget, and who failed.

    Example:
        >>> composed.text.startswith("## ENFORCED PRE-FLIGHT RULES")
        True
    """

    contributions: tuple[PluginContribution, ...]
    dropped: tuple[PluginContribution, ...]
    failed: tuple[str, ...]

    @property
    def text(self) -> str:
        """The delivered blocks, rendered and joined by a blank line."""
        return _SEPARATOR.join(render_contribution(c) for c in self.contributions)

    def text_at(self, position: str) -> str:
        """The delivered blocks of one position (e.g. ``"cached"``), rendered."""
        return _SEPARATOR.join(render_contribution(c) for c in self.contributions if c.position == position)


def render_contribution(contribution: PluginContribution) -> str:
    """One block as text: ``header`` + newline + ``content``, or just ``content``."""
    if contribution.header:
        return f"{contribution.header}\n{contribution.content}"
    return contribution.content


def _sort_key(item: tuple[int, PluginContribution]) -> tuple[int, int, int]:
    index, c = item
    return (_POSITION_RANK.get(c.position, len(_POSITION_RANK)), c.order, index)


async def compose_prompt(
    capabilities: Iterable[object], request: object, *, budget_chars: int | None = None
) -> ComposedPrompt:
    """Collect every capability's contributions for ``request``, in prompt order.

    Items without a ``contribute`` method (e.g. ``GrantEffects``) are skipped,
    so the list from ``prospective_trigger_capabilities`` can be passed as is.
    Capabilities run one after another; one that raises (or returns something
    other than contributions) is logged at ERROR, named in ``failed``, and the
    others still contribute.

    Args:
        capabilities: the composed capabilities.
        request: the turn's request, handed to each ``contribute``.
        budget_chars: the most characters the rendered prompt may have; None for no limit.

    Example:
        >>> composed = await compose_prompt(prospective_trigger_capabilities(source, ev, scope), request)
        >>> [c.origin for c in composed.contributions]
        ['symfonic.prospective']
    """
    if budget_chars is not None and (
        isinstance(budget_chars, bool) or not isinstance(budget_chars, int) or budget_chars < 0
    ):
        raise ValueError(f"budget_chars must be a non-negative int or None, got {budget_chars!r}")
    offered: list[PluginContribution] = []
    failed: list[str] = []
    for capability in capabilities:
        contribute = getattr(capability, "contribute", None)
        if not callable(contribute):
            continue
        name = type(capability).__name__
        try:
            result = contribute(request)
            if inspect.isawaitable(result):
                result = await result
            items = list(result)
        except Exception as exc:
            log.error("capability %s failed to contribute (%s: %s); composing without it",
                      name, type(exc).__name__, exc)
            failed.append(name)
            continue
        bad = [i for i in items if not isinstance(i, PluginContribution)]
        if bad:
            log.error("capability %s returned %s, not PluginContribution; composing without it",
                      name, type(bad[0]).__name__)
            failed.append(name)
            continue
        offered.extend(items)

    ordered = [c for _, c in sorted(enumerate(offered), key=_sort_key)]
    if budget_chars is None:
        return ComposedPrompt(tuple(ordered), (), tuple(failed))
    kept: list[PluginContribution] = []
    dropped: list[PluginContribution] = []
    used = 0
    for c in ordered:
        cost = len(render_contribution(c)) + (len(_SEPARATOR) if kept else 0)
        if used + cost <= budget_chars:
            kept.append(c)
            used += cost
        else:
            dropped.append(c)
            log.info("dropped %s contribution (%d chars) over the %d-char budget", c.origin, cost, budget_chars)
    return ComposedPrompt(tuple(kept), tuple(dropped), tuple(failed))
