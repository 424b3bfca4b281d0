"""Hostile seed files: deep nesting, huge files, alias bombs, NaN and infinities, random bytes.

Each one ends in exactly one typed ``ValidationError`` naming the file (the
CLI prints one line and exits 2), never a ``RecursionError`` traceback or
another exception, and nothing is written: the file is refused while it is
parsed and validated, before the command opens a connection.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symfonic_graph import MemoryScope, SymfonicGraphError, ValidationError
from symfonic_graph.cli import main
from symfonic_graph.ops._input_limits import MAX_DEPTH, MAX_FILE_BYTES, finite_or_error, load_json_within_limits
from symfonic_graph.ops.seedfile import load_seed_file
from symfonic_graph.ops.seeding import plan_seed

pytestmark = [pytest.mark.reliability]

DEEP = 100_000


def _deep_files(tmp_path: Path) -> list[Path]:
    files = {
        "list.json": "[" * DEEP + "]" * DEEP,
        "map.json": '{"skills": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}",
        "unclosed.json": "[" * DEEP,
        "list.yaml": "skills: " + "[" * DEEP + "]" * DEEP,
        "map.yaml": "{a: " * DEEP + "1" + "}" * DEEP,
        "unclosed.yml": "[" * DEEP,
    }
    out = []
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        out.append(path)
    return out


def test_deeply_nested_seed_files_are_one_validation_error_naming_the_file(tmp_path: Path) -> None:
    for path in _deep_files(tmp_path):
        with pytest.raises(ValidationError) as caught:
            load_seed_file(path)
        assert str(path) in str(caught.value), path
        assert f"deeper than {MAX_DEPTH}" in str(caught.value), (path, str(caught.value))


def test_nesting_up_to_the_limit_is_accepted(tmp_path: Path) -> None:
    inner = MAX_DEPTH - 4  # skills: [ {context: ... } ] leaves this many levels for the value
    value: Any = 1
    for _ in range(inner):
        value = [value]
    path = tmp_path / "ok.json"
    path.write_text(json.dumps({"skills": [{"label": "a", "steps": ["x"], "source_tag": "authored:t",
                                            "extra": value}]}))
    assert load_seed_file(path).skills[0]["label"] == "a"


def test_cli_seed_of_a_deep_file_prints_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in _deep_files(tmp_path):
        assert main(["seed", str(path), "--tenant", "acme"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and str(path) in err, err[:300]


def test_oversized_seed_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("w", encoding="utf-8") as handle:
        handle.write('{"skills": [], "pad": "')
        handle.write("x" * MAX_FILE_BYTES)
        handle.write('"}')
    with pytest.raises(ValidationError, match=r"huge\.json: is larger than 16 MB"):
        load_seed_file(path)


def test_yaml_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    lines.append("skills: [*a8]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines))
    with pytest.raises(ValidationError, match=r"bomb\.yaml: holds more than"):
        load_seed_file(path)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("nan.json", '{"skills": [{"label": "a", "steps": ["x"], "source_tag": "authored:t", "n": NaN}]}'),
        ("inf.json", '{"tenant": "acme", "skills": [], "triggers": [], "x": Infinity}'),
        ("neginf.json", '{"skills": [{"label": "a", "steps": ["x"], "source_tag": "authored:t",'
                        ' "precondition": [{"state": {"path": "p", "op": "eq", "value": -Infinity}}]}]}'),
        ("in.json", '{"skills": [{"label": "a", "steps": ["x"], "source_tag": "authored:t",'
                    ' "precondition": [{"state": {"path": "p", "op": "in", "value": [1, NaN]}}]}]}'),
        ("nan.yaml", "skills:\n  - {label: a, steps: [x], source_tag: 'authored:t', n: .nan}\n"),
        ("inf.yaml", "tenant: acme\nx: .inf\n"),
        ("neginf.yml", "skills:\n  - label: a\n    steps: [x]\n    source_tag: 'authored:t'\n"
                       "    precondition:\n      - {state: {path: p, op: eq, value: -.inf}}\n"),
        ("nan.yml", "skills:\n  - label: a\n    steps: [x]\n    source_tag: 'authored:t'\n"
                    "    precondition:\n      - {state: {path: p, op: eq, value: .NaN}}\n"),
        ("big.json", '{"skills": [], "x": 1e999}'),
    ],
)
def test_nan_and_infinities_are_refused_anywhere_in_a_seed_file(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValidationError) as caught:
        plan_seed(load_seed_file(path), MemoryScope("acme"))
    message = str(caught.value)
    assert str(path) in message and ("finite" in message or "not a number" in message), message


def test_load_json_within_limits_refuses_constants_and_names_the_source() -> None:
    for constant in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(ValidationError, match=r"^trace\.json: not valid JSON"):
            load_json_within_limits(f"[{constant}]", source="trace.json")
    assert load_json_within_limits('{"a": [1, "]]]"]}', source="x") == {"a": [1, "]]]"]}


def test_finite_or_error_names_the_field_and_the_element() -> None:
    assert finite_or_error("value", 1.5) == 1.5
    assert finite_or_error("value", ["a", 2, {"b": 3.0}]) == ["a", 2, {"b": 3.0}]
    for bad, field in ((math.nan, "value"), (math.inf, "value"), ([1.0, -math.inf], "value[1]"),
                       ({"k": [math.nan]}, "value.k[0]")):
        with pytest.raises(ValidationError) as caught:
            finite_or_error("value", bad)
        assert caught.value.field == field


# -- fuzz: random bytes, random nesting, random unicode ------------------------------------------------------

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20), st.sampled_from(["skills", "triggers", "scopes", "tenant", "label", "steps",
                                           "source_tag", "precondition", "condition", "task"]),
)
_trees = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=8), _scalars.filter(
        lambda k: isinstance(k, (str, int, bool)) or k is None)), inner, max_size=4)), max_leaves=30)


def _nested_text(depth: int, opener: str, closer: str, middle: str) -> str:
    return opener * depth + middle + closer * depth


_texts = st.one_of(
    st.binary(max_size=300).map(lambda b: b.decode("utf-8", "replace")),
    st.text(max_size=300),
    st.builds(_nested_text, st.integers(0, 3 * MAX_DEPTH), st.sampled_from(["[", "{a: ", '{"a": ', "- "]),
              st.sampled_from(["]", "}", ""]), st.sampled_from(["1", "NaN", ".nan", "x", ""])),
    _trees.map(lambda t: json.dumps({"skills": [t], "triggers": [t]} if not isinstance(t, dict) else t)),
)


def _check_one(path: Path) -> None:
    # One typed error at most; nothing was written (the file never reached a store).
    with contextlib.suppress(SymfonicGraphError):
        plan_seed(load_seed_file(path), MemoryScope("fuzz"))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_texts, suffix=st.sampled_from([".json", ".yaml", ".yml"]))
def test_fuzzed_seed_files_end_in_success_or_one_typed_error(tmp_path: Path, text: str, suffix: str) -> None:
    path = tmp_path / f"fuzz{suffix}"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _check_one(path)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=400), suffix=st.sampled_from([".json", ".yaml"]))
def test_fuzzed_raw_bytes_end_in_success_or_one_typed_error(tmp_path: Path, raw: bytes, suffix: str) -> None:
    path = tmp_path / f"raw{suffix}"
    path.write_bytes(raw)
    _check_one(path)


def test_cli_never_opens_a_store_for_a_refused_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    opened: list[bool] = []

    def refuse() -> Any:
        opened.append(True)
        raise AssertionError("a refused file must not reach the store")

    monkeypatch.setattr("symfonic_graph.cli._operator.open_store", refuse)
    for path in _deep_files(tmp_path):
        assert main(["seed", str(path), "--tenant", "acme"]) == 2
    bad = tmp_path / "nan.json"
    bad.write_text('{"skills": [{"label": "a", "steps": ["x"], "source_tag": "authored:t", "v": NaN}]}')
    assert main(["seed", str(bad), "--tenant", "acme"]) == 2
    capsys.readouterr()
    assert opened == []
