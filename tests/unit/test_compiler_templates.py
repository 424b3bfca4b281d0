"""A compiler reuses the reading of skill content it has read before, and only that.

The rules a compiler builds from a row whose content it compiled for another
node (another tenant, another namespace) must equal the rules a fresh
compiler builds from that row: same skill, same requirements, same verdicts
on odd per-node values, torn stamps and misspellings.
"""

from __future__ import annotations

from typing import Any

from symfonic_graph.memory._catalog import Compiler
from symfonic_graph.shape.scope import MemoryScope


def _row(ident: Any, tenant: str, *, namespace: str | None = None, rev: Any = None,
         pre_revs: tuple[Any, Any] = (None, None), created: Any = "2026-01-01T00:00:00Z",
         unknown: tuple[str, ...] = (), tool: str = "auth") -> list[Any]:
    return [ident, tenant, namespace, "Deploy", "deploy", ["deploy"], "deploy", "", "approved", True, None, None,
            created, rev, [], False, False,
            [[0, pre_revs[0], [["kind", "tool"], ["tool", tool], *unknown]],
             [1, pre_revs[1], [["kind", "state"], ["path", "channel"], ["op", "eq"], ["value", "slack"]]],
             [2]]]


def _compiled(compiler: Compiler, scope: MemoryScope, rows: list[list[Any]]) -> tuple[Any, bool]:
    catalog, torn = compiler.catalog(scope, 1, rows, None, now=0.0)
    return catalog.skills, torn


def _same(rows: list[list[Any]], scope: MemoryScope) -> tuple[Any, bool]:
    """Rules and torn flag from a compiler that read the content for tenant `a`, checked against a fresh one."""
    warm = Compiler()
    _compiled(warm, MemoryScope("a"), [_row("a-1", "a"), _row("a-2", "a", unknown=("same_arg",))])
    reused, torn = _compiled(warm, scope, rows)
    fresh, fresh_torn = _compiled(Compiler(), scope, rows)
    assert reused.rules == fresh.rules and list(reused) == list(fresh) and torn == fresh_torn
    return reused, torn


def test_another_tenants_rows_of_the_same_content_compile_to_the_same_rules() -> None:
    rules, torn = _same([_row("b-1", "b"), _row("b-2", "b", unknown=("same_arg",))], MemoryScope("b"))
    assert [r.skill_id for r in rules.rules] == ["b-1", "b-2"] and not torn
    assert [s.tenant_id for s in rules] == ["b", "b"] and rules[0].created_at.year == 2026
    assert [e.kind for e in rules.rules[1].requirements][-1] == "unreadable"  # the misspelling still blocks


def test_odd_per_node_values_read_as_a_fresh_compiler_reads_them() -> None:
    rules, _ = _same([_row(7, "b"), _row("b-2", "b", rev=5), _row("b-3", "b", created="not a date"),
                      _row("b-4", "b", namespace="u1")], MemoryScope("b", "u1"))
    assert [r.skill_id for r in rules.rules] == ["b-3", "b-4"]
    assert rules[0].created_at is None and rules[1].namespace == "u1"


def test_a_torn_row_is_torn_whatever_the_compiler_read_before() -> None:
    _, torn = _same([_row("b-1", "b", rev="w1:d/2", pre_revs=("w1:d/2", "w0:d/2"))], MemoryScope("b"))
    assert torn
    _, torn = _same([_row("b-1", "b", rev="w1:d/2", pre_revs=("w1:d/2", "w1:d/2"))], MemoryScope("b"))
    assert not torn


def test_another_tenants_row_is_dropped() -> None:
    rules, _ = _same([_row("a-9", "a")], MemoryScope("b"))
    assert len(rules) == 0


def test_content_read_once_is_not_read_again(monkeypatch: Any, caplog: Any) -> None:
    import symfonic_graph.memory._catalog as catalog

    reads: list[object] = []
    real = catalog.read_skills

    def counted(rows: Any) -> Any:
        reads.extend(row["skill"]["id"] for row in rows)
        return real(rows)

    monkeypatch.setattr(catalog, "read_skills", counted)
    compiler = Compiler()
    _compiled(compiler, MemoryScope("a"), [_row("a-1", "a"), _row("a-2", "a", tool="other")])
    _compiled(compiler, MemoryScope("b"), [_row("b-1", "b"), _row("b-2", "b", tool="other"), _row(3, "b"),
                                           _row("b-4", "b", unknown=("same_arg",))])
    _compiled(compiler, MemoryScope("c"), [_row("c-4", "c", unknown=("same_arg",))])
    assert reads == ["a-1", "a-2", 3, "b-4"]  # odd per-node values and new content are read in full
    assert "node c-4: precondition[0].same_arg: looks like a misspelt" in caplog.text  # still named per node
