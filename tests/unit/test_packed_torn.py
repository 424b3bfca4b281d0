"""``packed_torn`` reads a packed row's revision stamps exactly as ``read_skill`` read the unpacked row's."""

from __future__ import annotations

import random
from typing import Any

from symfonic_graph.shape.models import packed_torn

STAMPS: list[Any] = [None, "w1:abc/0", "w1:abc/1", "w1:abc/2", "w2:def/2", "w1:abc/x", "/", "", 7, 2.0, True,
                     ["w1:abc/1"]]


def _reference(row: list[Any]) -> bool:
    """What ``read_skill`` decides of the unpacked row: the stamps of its preconditions as maps."""
    rev = row[13]
    if not isinstance(rev, str):
        return False
    preconditions = [{"rev": e[1]} for e in row[17] if len(e) == 3]
    stamped = [p for p in preconditions if p.get("rev") is not None]
    return any(p.get("rev") != rev for p in stamped) or str(len(stamped)) != rev.rpartition("/")[2]


def test_packed_torn_agrees_with_the_map_reading_on_random_stamps() -> None:
    rng = random.Random(3)
    for _ in range(5000):
        entries = [[i] if rng.random() < 0.15 else [i, rng.choice(STAMPS), []] for i in range(rng.randrange(5))]
        row = [None] * 13 + [rng.choice(STAMPS), [], False, False, entries]
        assert packed_torn(row) == _reference(row), row
