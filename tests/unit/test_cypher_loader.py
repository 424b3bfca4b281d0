"""The named-query loader, without a database."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from symfonic_graph._store import schema as store_module
from symfonic_graph._store.cypher import all_queries, cypher_root, load_dir, parse_queries, query, return_columns
from symfonic_graph._store.schema import migrations as _migrations
from symfonic_graph.errors import QueryFileError, SchemaError


def test_parses_name_params_and_doc() -> None:
    [q] = parse_queries("// name: one\n// params: a, b\n// Says hi.\nRETURN $a, $b;\n", "x.cypher")
    assert (q.name, q.params, q.doc, q.text, q.source) == ("one", {"a", "b"}, "Says hi.", "RETURN $a, $b", "x.cypher:1")


def test_several_queries_in_one_file() -> None:
    qs = parse_queries("// name: a\n// params:\nRETURN 1;\n\n// name: b\n// params: x\nRETURN $x;\n", "f.cypher")
    assert [(q.name, q.source) for q in qs] == [("a", "f.cypher:1"), ("b", "f.cypher:5")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("RETURN 1", r"f.cypher:1: no '// name:' header"),
        ("// name: a\nRETURN 1", r"f.cypher:1: query a has no '// params:' line"),
        ("// name: a\n// params: x\nRETURN 1", r"f.cypher:1: query a declares \['x'\] but uses \[\]"),
        ("// name: a\n// params:\nRETURN 1\n// name: b\n// params:\nRETURN $y", r"f.cypher:4: query b declares"),
        ("// name: Bad-Name\n// params:\nRETURN 1", r"f.cypher:1: query name 'Bad-Name' must be snake_case"),
        ("// name: a\n// params:\n", r"f.cypher:1: query a has no statement"),
    ],
)
def test_errors_name_file_and_line(text: str, message: str) -> None:
    with pytest.raises(QueryFileError, match=message):
        parse_queries(text, "f.cypher")


def test_params_inside_strings_and_comments_do_not_count() -> None:
    [q] = parse_queries("// name: a\n// params: x\nRETURN $x, '$y' // $z\n", "f.cypher")
    assert q.params == {"x"}


def test_duplicate_names_across_files(tmp_path: Path) -> None:
    root = tmp_path / "queries"
    root.mkdir()
    (root / "a.cypher").write_text("// name: same\n// params:\n// returns: 1\n// mode: read\nRETURN 1\n")
    (root / "b.cypher").write_text("\n// name: same\n// params:\n// returns: 2\n// mode: read\nRETURN 2\n")
    message = r"queries/b.cypher:2: query name same is already used at queries/a.cypher:1"
    with pytest.raises(QueryFileError, match=message):
        load_dir(root)


def test_check_args_rejects_missing_and_extra() -> None:
    [q] = parse_queries("// name: a\n// params: x\nRETURN $x\n", "f.cypher")
    with pytest.raises(TypeError, match=r"missing \['x'\], unexpected \['y'\]"):
        q.check_args({"y": 1})


def test_every_shipped_file_loads_with_unique_names() -> None:
    names = [q.name for q in all_queries()]
    assert len(names) == len(set(names)) > 10
    assert _migrations(), "schema migrations are shipped"
    for path in (cypher_root() / "seeds").glob("*.cypher"):
        assert path.read_text().strip(), path


def test_only_the_migrations_that_say_so_wait_for_the_rollout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert [m.version for m in _migrations() if m.after_rollout] == [8]  # 0008 drops the previous recall index
    schema = tmp_path / "schema"
    schema.mkdir()
    (schema / "0001_drop_old.cypher").write_text("// apply: sometimes\n// name: drop_old\n// params:\nDROP INDEX x;\n")
    monkeypatch.setattr(store_module, "cypher_root", lambda: tmp_path)
    refused = r"0001_drop_old.cypher: '// apply: sometimes' is not a known .* the only one is '// apply: after rollout'"
    with pytest.raises(SchemaError, match=refused):
        _migrations()
    # Misplaced, it would be read as a comment and the drop would run during the rollout: refused too.
    misplaced = "// name: drop_old\n// apply: after rollout\n// params:\nDROP INDEX x;\n"
    (schema / "0001_drop_old.cypher").write_text(misplaced)
    with pytest.raises(SchemaError, match=r"0001_drop_old.cypher: an '// apply:' line belongs before the first"):
        _migrations()


# Every query that reads memory for a scope; a new one must be added here.
_SCOPED_READS = {"skills_visible", "skill_by_id", "triggers_pending", "triggers_offerable", "trigger_lookup",
                 "triggers_done", "triggers_due", "facts_visible", "memory_recall", "turn_snapshot",
                 "turn_snapshot_semantic", "catalog_packed_rows"}


def test_scoped_read_list_is_complete() -> None:
    reads = {q.name for q in all_queries() if "$tenant_id" in q.text and q.mode == "read" and q.returns}
    # catalog_version reads a number, not memory; doctor_* are operator checks across the database.
    operator_reads = {name for name in reads if name.startswith("doctor_")} | {"catalog_version"}
    # *_keys_held are write guards: they look for nodes of OTHER scopes holding a key, to refuse the write.
    operator_reads |= {"skill_keys_held", "trigger_keys_held", "staged_keys_held", "skill_draft_key_held"}
    # tenant_holds answers whether a tenant holds anything at all (the CLI's notice for a mistyped tenant).
    operator_reads |= {"tenant_holds"}
    # skills_owned_count is a write guard too: a skill write that takes its scope over the cap rolls back.
    operator_reads |= {"skills_owned_count", "skills_owned_after_staging"}
    # write_staged_count counts a staged write's own nodes, to refuse a large seed under a write id in use.
    operator_reads |= {"write_staged_count"}
    # skills_evidence decorates, by id within the tenant, skills a scoped read (skills_visible) already listed.
    operator_reads |= {"skills_evidence"}
    # decisions_report and decisions_totals aggregate the tenant's decision log for an operator, not a turn's memory.
    operator_reads |= {"decisions_report", "decisions_totals"}
    # change_history and erasures_list read the records of changes and erasures for an operator.
    operator_reads |= {"change_history", "erasures_list"}
    assert reads - operator_reads <= _SCOPED_READS


@pytest.mark.parametrize("name", sorted(_SCOPED_READS))
def test_every_tenant_scoped_read_filters_tenant_namespace_and_markers(name: str) -> None:
    q = next(q for q in all_queries() if q.name == name)
    text = q.text
    # the scope comes from parameters, directly or through the `sc` map of skill_projection.cypher
    assert re.search(r"\.tenant_id = (\$tenant_id|sc\.tenant_id)", text), name
    assert re.search(r"\.namespace IS NULL OR \w+\.namespace = (\$namespace|sc\.namespace)", text), name
    if "sc.tenant_id" in text:
        assert re.search(r"\bsc\b = |AS sc\b", text), name  # `sc` is bound from the query's parameters
    assert "SymfonicUnpublished" in text, name
    if "write_id" in q.params:  # reads that may show a staged write show only that one
        assert re.search(r"symfonic_write_id = (\$write_id|sc\.write_id)", text), name
    if name != "skill_by_id":  # audit read by id: sees retracted on purpose
        assert "SymfonicRetracted" in text, name
    assert "STARTS WITH $tenant_id" not in text and "CONTAINS $tenant_id" not in text


_QUERIES = Path(__file__).resolve().parents[2] / "cypher" / "queries"


def _query_sources() -> dict[str, str]:
    """Each query's text as written (includes not spliced), by name."""
    blocks = {}
    for path in _QUERIES.glob("*.cypher"):
        for block in path.read_text(encoding="utf-8").split("// name: ")[1:]:
            blocks[block.split("\n", 1)[0].strip()] = block
    return blocks


def test_writes_addressing_a_node_by_id_share_one_scope_rule() -> None:
    """Approve/reject, shadow/enforce and resolve read the same visibility and ownership fragments (no copies)."""
    blocks = _query_sources()
    for name in ("skill_set_status", "skill_set_enforcement", "trigger_resolve"):
        assert "// include: node_addressable" in blocks[name], name
        assert "// include: node_owned" in blocks[name], name
        assert "symfonic_replaced_by" not in blocks[name], f"{name} copies the rule instead of including it"


def test_write_guards_for_held_keys_share_the_ownership_rule() -> None:
    """A key held by a node the writing scope does not own refuses the write: every such guard reads
    ``node_owned`` (no copies of the namespace comparison)."""
    blocks = _query_sources()
    for name in ("skill_keys_held", "trigger_keys_held", "skill_draft_key_held"):
        assert "// include: node_owned" in blocks[name], name
        assert "$namespace IS NULL)\nRETURN" not in blocks[name], f"{name} copies the rule instead of including it"


def test_every_read_of_a_node_type_includes_its_one_rule_and_projection() -> None:
    """Skills, triggers and facts: each read path splices the type's visibility rule and row, never a copy."""
    blocks = _query_sources()
    fragments = {"turn_triggers": ("trigger_visible", "trigger_row"), "triggers_pending": ("trigger_visible",
                 "trigger_row"), "facts_visible": ("fact_visible", "fact_row")}
    turn_triggers = (_QUERIES / "turn.cypher").read_text(encoding="utf-8").split("// fragment: turn_triggers")[1]
    blocks["turn_triggers"] = turn_triggers.split("// name: ")[0]
    for name, wanted in fragments.items():
        for fragment in wanted:
            assert f"// include: {fragment}" in blocks[name], (name, fragment)
        assert "SymfonicRetracted" not in blocks[name], f"{name} copies the rule instead of including it"
        assert "{.*}" not in blocks[name], f"{name} projects every property instead of the one row"


def test_a_fragment_may_include_another_and_never_itself() -> None:
    text = ("// fragment: inner\n// params: x\nRETURN $x\n"
            "// fragment: outer\n// params:\nWITH 1 AS one\n// include: inner\n"
            "// name: q\n// params: x\n// include: outer\n")
    [q] = parse_queries(text, "t.cypher")
    assert q.text == "WITH 1 AS one\nRETURN $x" and q.params == {"x"}
    loop = "// fragment: a\n// params:\n// include: a\n// name: q\n// params:\n// include: a\n"
    with pytest.raises(QueryFileError, match="includes itself"):
        parse_queries(loop, "t.cypher")


# -- fragments about a node: the include names the variable -----------------------------------------------


def test_an_include_names_the_fragments_variables() -> None:
    text = ("// fragment: owned(n, w)\n// params: namespace\n"
            "(n.namespace = $namespace AND n.write_id = w AND n:Skill AND 'n' <> n.n) // n stays in comments\n"
            "// name: q\n// params: namespace, write_id\n// returns: s\n// mode: read\n"
            "MATCH (s) WHERE\n  // include: owned(s, $write_id)\nRETURN s\n")
    [q] = parse_queries(text, "t.cypher")
    assert q.text == ("MATCH (s) WHERE\n"
                      "  (s.namespace = $namespace AND s.write_id = $write_id AND s:Skill AND 'n' <> s.n)"
                      " // n stays in comments\nRETURN s")
    assert q.params == {"namespace", "write_id"}  # the $param handed in counts as used


def test_a_fragment_hands_its_variables_on() -> None:
    text = ("// fragment: inner(x)\n// params:\nx.a = 1\n"
            "// fragment: outer(y)\n// params:\ny.b = 2 AND\n// include: inner(y)\n"
            "// name: q\n// params:\n// returns: sc\n// mode: read\n"
            "MATCH (sc) WHERE\n// include: outer(sc)\nRETURN sc\n")
    [q] = parse_queries(text, "t.cypher")
    assert q.text == "MATCH (sc) WHERE\nsc.b = 2 AND\nsc.a = 1\nRETURN sc"


@pytest.mark.parametrize(
    ("include", "message"),
    [
        ("owned", r"includes owned with 0 variables; t.cypher:1 names 1 \(n\)"),
        ("owned(a, b)", r"includes owned with 2 variables"),
        ("owned(n) OR true", r"'// include: owned\(n\) OR true' is not '// include: name'"),
        ("owned(a + b)", r"includes owned with \['a \+ b'\]; give a variable"),
        ("owned('x')", r"give a variable, a variable's property or a \$param"),
    ],
)
def test_an_include_gives_each_variable_a_name(include: str, message: str) -> None:
    text = ("// fragment: owned(n)\n// params:\nn.x = 1\n"
            f"// name: q\n// params:\nMATCH (s) WHERE\n// include: {include}\nRETURN s\n")
    with pytest.raises(QueryFileError, match=message):
        parse_queries(text, "t.cypher")


def test_a_fragment_uses_the_variables_it_names() -> None:
    with pytest.raises(QueryFileError, match=r"t.cypher:1: fragment f names variables \['m'\] but its text never"):
        parse_queries("// fragment: f(n, m)\n// params:\nn.x = 'm'\n// name: q\n// params:\nRETURN 1\n", "t.cypher")
    with pytest.raises(QueryFileError, match=r"only a fragment may"):
        parse_queries("// name: q(n)\n// params:\nRETURN 1\n", "t.cypher")


def _unspliced() -> dict[str, str]:
    """Each .cypher file's text as written, by file name."""
    return {path.name: path.read_text(encoding="utf-8") for path in _QUERIES.glob("*.cypher")}


def test_the_ownership_and_published_write_rules_are_written_once() -> None:
    """``node_owned``, ``same_namespace``, ``published_version``, ``visible_version`` and ``staged_visible``
    hold the rules; every other place includes them (the doctor's checks over hand-written data excepted:
    they read a catalog list of any type and a write id of any type on purpose)."""
    owned = re.compile(r"\(\(\w+\.namespace IS NULL AND \$namespace IS NULL\) OR \w+\.namespace = \$namespace\)"
                       r"|coalesce\(\w+\.namespace = (\$namespace|\w+\.namespace), \w+\.namespace IS NULL AND")
    listed = re.compile(r"OR \(coalesce\(\w+\.namespace, ''\) \+ '\\u001F' \+ \w+\.symfonic_write_id\) IN published")
    replaced = re.compile(r"NOT coalesce\(\w+\.symfonic_replaced_by IN published, false\)")
    for name, text in _unspliced().items():
        if name == "scope_rules.cypher":
            assert len(owned.findall(text)) == 2 and len(listed.findall(text)) == 2, "the rules are in scope_rules"
            continue
        assert not owned.findall(text), f"{name} copies node_owned or same_namespace instead of including it"
        if name != "doctor.cypher":
            assert not listed.findall(text), f"{name} copies the published-write rule instead of including it"
            assert not replaced.findall(text), f"{name} copies the replaced-write rule instead of including it"


# -- what a query returns, and whether it writes -------------------------------------------------------------


def test_parses_returns_and_mode() -> None:
    [q] = parse_queries("// name: a\n// params: x\n// returns: n, id\n// mode: write\n"
                        "MATCH (n) SET n.x = $x RETURN n, n.id AS id ORDER BY id;\n", "f.cypher")
    assert (q.returns, q.mode) == (("n", "id"), "write")
    [none] = parse_queries("// name: a\n// params:\n// returns: nothing\n// mode: write\nCREATE (:X)\n", "f.cypher")
    assert none.returns == ()


@pytest.mark.parametrize(
    ("header", "statement", "message"),
    [
        ("// returns: n\n// mode: read", "MATCH (n) SET n.x = 1 RETURN n", r"declares '// mode: read' but changes"),
        ("// returns: n\n// mode: read", "MATCH (n) DETACH DELETE n RETURN n", r"'// mode: read' but changes"),
        ("// returns: n\n// mode: read", "MATCH (n) FOREACH (x IN [1] | SET n.x = x) RETURN n", r"but changes"),
        ("// returns: n\n// mode: write", "MATCH (n) WHERE n.s = 'SET' RETURN n // DELETE", r"holds no CREATE"),
        ("// returns: n, m\n// mode: read", "MATCH (n) RETURN n", r"declares '// returns: n, m' but its final "
                                                                    r"RETURN gives: n"),
        ("// returns: x\n// mode: read", "MATCH (n) CALL (n) { RETURN 1 AS x } RETURN n.id", r"gives: n.id"),
        ("// returns: nothing\n// mode: read", "MATCH (n) RETURN count(*) AS c", r"gives: c"),
        ("// returns: n\n// mode: sometimes", "RETURN 1 AS n", r"'// mode: sometimes' must be 'read' or 'write'"),
        ("// returns:\n// mode: read", "RETURN 1 AS n", r"write '// returns: nothing' for no columns"),
    ],
)
def test_declared_returns_and_mode_match_the_statement(header: str, statement: str, message: str) -> None:
    with pytest.raises(QueryFileError, match=message):
        parse_queries(f"// name: a\n// params:\n{header}\n{statement}\n", "f.cypher")


def test_a_library_query_must_declare_returns_and_mode(tmp_path: Path) -> None:
    root = tmp_path / "queries"
    root.mkdir()
    (root / "a.cypher").write_text("// name: a\n// params:\n// mode: read\nRETURN 1 AS one\n")
    with pytest.raises(QueryFileError, match=r"queries/a.cypher:1: query a needs '// returns:'"):
        load_dir(root)
    with pytest.raises(QueryFileError, match=r"only a query does"):
        parse_queries("// fragment: f\n// params:\n// mode: read\nRETURN 1\n// name: q\n// params:\nRETURN 2\n", "t")


@pytest.mark.parametrize(
    ("statement", "columns"),
    [
        ("RETURN DISTINCT a, b.c AS d, [x IN l | x] AS e, {k: 1} AS m, 'x, y' AS s LIMIT 3", ("a", "d", "e", "m", "s")),
        ("CALL (n) { RETURN 1 AS x UNION RETURN 2 AS x } WITH x RETURN CASE WHEN x THEN 1 END AS y", ("y",)),
        ("MATCH (n) SET n.RETURN_x = 1", ()),
        ("RETURN n.id AS id, n ORDER BY id SKIP 1", ("id", "n")),
    ],
)
def test_return_columns(statement: str, columns: tuple[str, ...]) -> None:
    assert return_columns(statement) == columns


def test_every_library_query_declares_what_it_returns_and_whether_it_writes() -> None:
    for q in all_queries():
        assert q.mode in ("read", "write") and q.returns is not None, q.name
        assert q.returns == return_columns(q.text), q.name


def _read_calls() -> set[str]:
    """The query names the package passes as a literal to ``store.read`` / ``self.read``."""
    names: set[str] = set()
    package = Path(__file__).resolve().parents[2] / "symfonic_graph"
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "read"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names.add(node.args[0].value)
    return names


def test_what_the_package_reads_is_declared_read() -> None:
    """A query run with ``store.read`` goes to a read-routed session: it must be a ``read`` query. Names
    picked at run time (doctor's checks, seeding's lookups) are held by ``check_read`` in ``store.read``."""
    names = _read_calls()
    assert {"catalog_version", "doctor_indexes", "tenants_list", "triggers_offerable"} <= names
    assert {name: query(name).mode for name in names} == dict.fromkeys(names, "read")


@pytest.mark.anyio
async def test_store_read_refuses_a_write_query() -> None:
    import neo4j

    from symfonic_graph import GraphMemoryStore

    driver = neo4j.AsyncGraphDatabase.driver("bolt://127.0.0.1:1", auth=("neo4j", "x"))  # never reached
    try:
        with pytest.raises(TypeError, match=r"catalog_bump .* declares '// mode: write'; run it with store.write"):
            await GraphMemoryStore(driver).read("catalog_bump", tenant_id="acme")
    finally:
        await driver.close()
