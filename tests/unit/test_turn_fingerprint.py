"""The digest that lets a stale re-read reuse compiled rules: equal only for rows read exactly alike."""

from __future__ import annotations

import datetime

from symfonic_graph.memory._catalog import fingerprint

ROW = {"skill": {"id": "s1", "tenant_id": "acme", "status": "approved", "active": True},
       "preconditions": [{"kind": "state", "path": "n", "op": "eq", "value": 1, "position": 0}], "foreign": 0}


def _with(value: object) -> list[dict[str, object]]:
    return [{**ROW, "preconditions": [{**ROW["preconditions"][0], "value": value}]}]  # type: ignore[dict-item]


def test_equal_rows_give_equal_digests_and_any_change_another() -> None:
    assert fingerprint([ROW]) == fingerprint([dict(ROW)]) is not None
    assert fingerprint([ROW]) != fingerprint([ROW, ROW])
    assert fingerprint(_with("1")) != fingerprint(_with(1))
    assert fingerprint(_with([1, 2])) != fingerprint(_with([2, 1]))


def test_values_python_calls_equal_but_the_read_model_tells_apart_give_different_digests() -> None:
    digests = {fingerprint(_with(v)) for v in (1, 1.0, True)}
    assert len(digests) == 3
    assert fingerprint(_with([0])) != fingerprint(_with([False]))


def test_a_value_that_is_not_plain_json_is_never_reused() -> None:
    assert fingerprint(_with(datetime.date(2026, 1, 1))) is None
    assert fingerprint(_with(object())) is None


def test_text_outside_ascii_and_lone_surrogates_are_digested() -> None:
    assert fingerprint(_with("é")) != fingerprint(_with("e\u0301"))
    assert fingerprint(_with("\ud800")) is not None
