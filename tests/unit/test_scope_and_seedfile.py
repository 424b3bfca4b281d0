"""MemoryScope validation, seed files and Cypher script splitting (no database)."""

from __future__ import annotations

from pathlib import Path

import pytest

from symfonic_graph import MemoryScope, ScopeError, ValidationError
from symfonic_graph.ops.seedfile import load_seed_file, split_cypher_script


@pytest.mark.parametrize("bad", ["", "a\x00b", "line\nbreak", "tab\there", "\x7f", 3, None, b"bytes", "x" * 513])
def test_scope_rejects_unusable_tenant_ids(bad: object) -> None:
    with pytest.raises(ScopeError, match="tenant_id"):
        MemoryScope(bad)  # type: ignore[arg-type]


def test_scope_rejects_bad_namespace_and_is_frozen() -> None:
    with pytest.raises(ScopeError, match="namespace"):
        MemoryScope("acme", "")
    scope = MemoryScope("acme", "u1")
    with pytest.raises(AttributeError):
        scope.tenant_id = "other"  # type: ignore[misc]
    assert isinstance(ScopeError("x"), ValueError)


def test_scope_sees_follows_the_visibility_rule() -> None:
    assert MemoryScope("acme", "u1").sees("acme", None)
    assert MemoryScope("acme", "u1").sees("acme", "u1")
    assert not MemoryScope("acme", "u1").sees("acme", "u2")
    assert not MemoryScope("acme").sees("acme", "u1")
    assert not MemoryScope("acme").sees("acme2", None)
    assert not MemoryScope("acme").sees(None, None)


def test_scope_owns_is_a_deprecated_alias_of_sees() -> None:
    """``owns`` answered "visible" (a scope sees tenant-wide nodes it does not own): it warns until 0.3.0."""
    cases = [("acme", None), ("acme", "u1"), ("acme", "u2"), ("acme2", None), (None, None)]
    for scope in (MemoryScope("acme"), MemoryScope("acme", "u1")):
        for tenant_id, namespace in cases:
            with pytest.warns(DeprecationWarning, match=r"MemoryScope.owns is deprecated and removed in 0.3.0: "
                                                        r"use MemoryScope.sees") as caught:
                assert scope.owns(tenant_id, namespace) == scope.sees(tenant_id, namespace)
            assert caught[0].filename == __file__  # the warning points at the caller's line


def test_split_cypher_script_keeps_lines_and_drops_comment_only_statements() -> None:
    text = "// header\n\nCREATE (a:X);\nMATCH (n)\n// inline\nRETURN n; // trailing\n// only a comment\n"
    statements = split_cypher_script(text)
    assert [(s.line, s.text) for s in statements] == [(3, "CREATE (a:X)"), (4, "MATCH (n)\n// inline\nRETURN n")]


def test_split_cypher_script_last_statement_without_semicolon() -> None:
    assert [s.text for s in split_cypher_script("RETURN 1;\nRETURN 2")] == ["RETURN 1", "RETURN 2"]


def test_seed_file_yaml_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "s.yaml"
    good.write_text("skills:\n  - {label: a, steps: [x], source_tag: 'authored:t'}\ntriggers: []\n")
    assert load_seed_file(good).skills[0]["label"] == "a"
    bad = tmp_path / "b.yaml"
    bad.write_text("skills: {not: a list}\n")
    with pytest.raises(ValidationError, match=r"b.yaml: skills: must be a list"):
        load_seed_file(bad)
    unknown = tmp_path / "u.json"
    unknown.write_text('{"skillz": []}')
    with pytest.raises(ValidationError, match=r"u.json: skillz: unknown section"):
        load_seed_file(unknown)
    broken = tmp_path / "x.json"
    broken.write_text("{")
    with pytest.raises(ValidationError, match="not valid JSON"):
        load_seed_file(broken)
