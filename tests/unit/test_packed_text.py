"""The packed rows' text: written only for rows JSON can hold, read back only when it names the version read."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from symfonic_graph._store.packed import MAX_PACKED_CHARS, packed_text, rows_of

ROW: list[Any] = ["s1", "acme", None, "Deploy", "deploy", ["deploy"], "deploy", "", "approved", True, None, None,
                  "2026-01-01T00:00:00Z", "w:1/1", [["owner", "ops"]], False, False,
                  [[0, "w:1/1", [["kind", "tool"], ["tool", "auth"], "same_arg"]], [1]]]


def test_rows_read_back_exactly_as_written() -> None:
    rows = [ROW, [*ROW[:17], []]]
    assert rows_of(packed_text(7, rows), 7) == rows
    assert rows_of(packed_text(0, []), 0) == []


def test_types_json_keeps_apart_survive_the_round_trip() -> None:
    row = [*ROW[:17], [[0, None, [["value", 1], ["within", 1.0], ["same_args", True], ["op", "1"]]]]]
    [back] = rows_of(packed_text(3, [row]), 3)  # type: ignore[misc]
    values = [item[1] for item in back[17][0][2]]
    assert [type(v) for v in values] == [int, float, bool, str]
    nan = [*ROW[:17], [[0, None, [["value", math.nan]]]]]
    [again] = rows_of(packed_text(3, [nan]), 3)  # type: ignore[misc]
    assert math.isnan(again[17][0][2][0][1])


@pytest.mark.parametrize("version", [None, -1, 1.0, True, "3"])
def test_no_text_for_a_version_that_is_not_a_catalog_version(version: object) -> None:
    assert packed_text(version, [ROW]) is None


def test_no_text_for_a_value_json_cannot_hold_or_too_much() -> None:
    from datetime import UTC, datetime

    dated = [*ROW[:17], [[0, None, [["value", datetime.now(UTC)]]]]]
    assert packed_text(1, [dated]) is None
    big = [*ROW[:3], "x" * MAX_PACKED_CHARS, *ROW[4:]]
    assert packed_text(1, [big]) is None


def _hostile(rng: random.Random) -> str:
    """A text someone may have left on the catalog node: malformed JSON, wrong shapes, the wrong version."""
    shapes: list[Any] = [
        None, 7, "x", [], {}, [7], [7, None], [7, {}], [7, [ROW], "extra"], [True, [ROW]], [7.0, [ROW]],
        [8, [ROW]], [7, [ROW[:17]]], [7, [[*ROW, 1]]], [7, [[*ROW[:14], "pairs", *ROW[15:]]]],
        [7, [[*ROW[:17], "preconditions"]]], [7, [[*ROW[:17], [[0, None, "items"]]]]],
        [7, [[*ROW[:17], [[0, None]]]]], [7, [[*ROW[:17], [[0, None, [[["k"], 1]]]]]]],
        [7, [[*ROW[:17], [[0, None, [["k"]]]]]]], [7, [[*ROW[:17], [[0, None, [7]]]]]], [7, [ROW, 3]],
    ]
    shape = rng.choice(shapes)
    text = json.dumps(shape)
    return text if rng.random() < 0.8 else text[: rng.randrange(len(text) + 1)]


def test_a_hostile_text_is_never_read_and_never_raises() -> None:
    rng = random.Random(11)
    for _ in range(2000):
        text = _hostile(rng)
        rows = rows_of(text, 7)
        assert rows is None or rows in ([], [ROW]), text
    for odd in (None, 7, b"[7,[]]", ["[7,[]]"]):
        assert rows_of(odd, 7) is None
