"""Embeddings as the graph stores and compares them: checked once, in one place.

A semantic trigger stores the embedding of its condition, and a turn brings
the embedding of what was said; Neo4j compares them by cosine. Its similarity
function raises on a vector it cannot take (empty, zero, beyond float32, with
a null), so every vector is checked before it is written or sent, and the
read checks hand-seeded ones the same way (``triggers.cypher``).

Example:
    >>> vector("embedding", [0.6, 0.8])
    (0.6, 0.8)
    >>> floor(0.5)
    0.75
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from symfonic_graph.errors import ValidationError

__all__ = ["DEFAULT_SIMILARITY", "MAX_DIMENSIONS", "SEMANTIC_CANDIDATES", "SEMANTIC_EXACT", "floor", "meaning",
           "similarity", "vector"]

MAX_DIMENSIONS = 8192
"""The longest embedding a trigger stores or a turn sends (the largest common models use 3,072)."""

DEFAULT_SIMILARITY = 0.75
"""The cosine a turn's embedding must reach with a trigger's for the trigger to be offered, by default."""

SEMANTIC_CANDIDATES = 200
"""How many nearest embeddings of the whole database a turn asks the vector index for, before it keeps its own."""

SEMANTIC_EXACT = 32
"""A scope with at most this many pending semantic triggers scores them all exactly, without the vector index.

Reading a 1,536-number embedding costs about 0.1 ms here, one index search
about 5 ms (``bench/semantic_bench.py``)."""

# The squared norm the read accepts of a hand-seeded embedding (triggers.cypher): a vector the similarity
# function takes, every component within float32 and not all of them zero.
_MIN_SQUARED, _MAX_SQUARED = 1e-12, 1e36


def vector(field: str, value: object) -> tuple[float, ...]:
    """``value`` as an embedding: a non-empty list of finite numbers, not all zero; else ValidationError.

    Example:
        >>> vector("embedding", [0, 0])
        Traceback (most recent call last):
        ...
        symfonic_graph.errors.ValidationError: embedding: is all zeros (or too close to it); ...
    """
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ValidationError(field, f"must be a list of numbers (an embedding), got {type(value).__name__}")
    if not value:
        raise ValidationError(field, "is empty; an embedding has at least one number")
    if len(value) > MAX_DIMENSIONS:
        raise ValidationError(field, f"has {len(value)} numbers; at most {MAX_DIMENSIONS}")
    out = []
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise ValidationError(f"{field}[{i}]", f"must be a number, got {type(x).__name__}")
        if not math.isfinite(x):
            raise ValidationError(f"{field}[{i}]", f"must be finite, got {x!r}")
        out.append(float(x))
    squared = math.fsum(x * x for x in out)
    if squared <= _MIN_SQUARED:
        raise ValidationError(field, "is all zeros (or too close to it); no direction to compare: "
                                     "is it an embedding? Nothing was written.")
    if squared >= _MAX_SQUARED:
        raise ValidationError(field, "has components too large for a float32 embedding; is it an embedding?")
    return tuple(out)


def similarity(field: str, value: object) -> float:
    """A cosine threshold: a number in [-1, 1] (0.75 by default in the wirings)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not -1.0 <= value <= 1.0:
        raise ValidationError(field, f"must be a cosine similarity between -1 and 1, got {value!r}")
    return float(value)


def floor(threshold: float) -> float:
    """The score Neo4j's cosine (``(1 + cos) / 2``, in [0, 1]) must reach for ``threshold`` (a cosine)."""
    return (1.0 + threshold) / 2.0


def meaning(embedding: Sequence[float] | None, threshold: float = DEFAULT_SIMILARITY,
            candidates: int | None = None) -> dict[str, object]:
    """The entries a read's scope map carries for semantic triggers (``vector`` None: none are offered).

    Example:
        >>> meaning([1.0, 0.0], 0.5)
        {'vector': [1.0, 0.0], 'similarity_floor': 0.75, 'semantic_k': 200, 'semantic_exact': 32}
    """
    return {"vector": None if embedding is None else list(vector("vector", embedding)),
            "similarity_floor": floor(similarity("similarity", threshold)),
            "semantic_k": SEMANTIC_CANDIDATES if candidates is None else candidates, "semantic_exact": SEMANTIC_EXACT}
