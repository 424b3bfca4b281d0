"""Named Cypher queries, loaded from ``.cypher`` files.

A file holds one or more queries, each opened by a header::

    // name: skill_by_id
    // params: tenant_id, namespace, write_id, skill_id
    // returns: skill_row
    // mode: read
    // One skill by id, if the scope sees it.   <- becomes the doc
    MATCH (s:Skill) WHERE s.tenant_id = $tenant_id ...

``// returns:`` names the columns of the final ``RETURN`` (``// returns:
nothing`` when there is none) and ``// mode:`` says whether the statement
only reads (no ``CREATE``, ``MERGE``, ``SET``, ``DELETE``, ``REMOVE`` or
``FOREACH`` outside strings) or writes; ``store.read`` refuses a ``write``
query. The library's queries must declare both; schema migrations need not.

A *fragment* is a piece of Cypher shared by several queries (the one skill
projection, the one visibility rule). It is declared like a query but with
``// fragment: name``, and a query splices it in with a line of its own::

    // include: skill_row

A fragment about "a node" names its node variable in parentheses, and each
include names the variable it means (an identifier, ``var.property`` or a
``$param``); the loader puts it in place of the fragment's own name, as a
whole word outside strings and comments::

    // fragment: node_owned(n)
    // params: namespace
    ((n.namespace IS NULL AND $namespace IS NULL) OR n.namespace = $namespace)

    WHERE s.tenant_id = $tenant_id AND
      // include: node_owned(s)

The loader checks that each query's declared parameters are exactly the
``$params`` its text uses (its fragments' included), that names are unique,
and reports ``file:line`` on any error. Query text is never assembled from
input: callers pass values as parameters only.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from symfonic_graph.errors import QueryFileError

_NAME = re.compile(r"^//\s*(?P<kind>name|fragment):\s*(?P<name>[^\s(]*)\s*(?:\((?P<args>[^)]*)\))?\s*$")
_INCLUDE = re.compile(r"^//\s*include:\s*(?P<name>[^\s(]*)\s*(?:\((?P<args>[^)]*)\))?\s*$")
_INCLUDE_LINE = re.compile(r"^//\s*include:")
_PARAMS = re.compile(r"^//\s*params:\s*(?P<params>.*)$")
_RETURNS = re.compile(r"^//\s*returns:\s*(?P<returns>.*)$")
_MODE = re.compile(r"^//\s*mode:\s*(?P<mode>.*)$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What an include may hand a fragment for one of its variables: a variable, one of its properties, or a $param.
_ARGUMENT = re.compile(r"^(?:\$?[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*)$")
_IDENT = re.compile(r"^[a-z][a-z0-9_]*$")
_PARAM_USE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


@dataclass(frozen=True, slots=True)
class Query:
    """One named statement, ready to run with ``text`` and keyword params.

    ``returns`` (the final RETURN's columns; empty for none) and ``mode``
    (``"read"`` or ``"write"``) are ``None`` when the header does not
    declare them (schema migrations).
    """

    name: str
    text: str
    params: frozenset[str]
    doc: str
    source: str  # "path:line" of the header
    returns: tuple[str, ...] | None = None
    mode: str | None = None

    def check_args(self, args: Mapping[str, object]) -> None:
        """Raise ``TypeError`` unless ``args`` are exactly the declared params."""
        given = set(args)
        if given != self.params:
            missing = sorted(self.params - given)
            extra = sorted(given - self.params)
            raise TypeError(f"query {self.name} ({self.source}): missing {missing}, unexpected {extra}")

    def check_read(self) -> None:
        """Raise ``TypeError`` when the query writes: a read runs in a read-routed session.

        Example:
            >>> query("catalog_bump").check_read()
            Traceback (most recent call last):
            TypeError: query catalog_bump (queries/skills.cypher:...) declares '// mode: write'; run it with store.write
        """
        if self.mode == "write":
            raise TypeError(f"query {self.name} ({self.source}) declares '// mode: write'; run it with store.write")


def _masked(line: str) -> str:
    """``line`` with string literals and a trailing ``//`` comment blanked (every position kept)."""
    line = _STRING.sub(lambda m: " " * len(m.group()), line)
    cut = line.find("//")
    return line if cut < 0 else line[:cut] + " " * (len(line) - cut)


def _code_only(line: str) -> str:
    """The line without string literals and a trailing ``//`` comment."""
    line = _STRING.sub("''", line)
    cut = line.find("//")
    return line if cut < 0 else line[:cut]


@dataclass(frozen=True, slots=True)
class _Block:
    """A parsed ``// name:`` or ``// fragment:`` block before its includes are spliced."""

    kind: str
    name: str
    declared: frozenset[str]
    doc: str
    lines: tuple[str, ...]
    where: str
    variables: tuple[str, ...] = ()
    returns: tuple[str, ...] | None = None
    mode: str | None = None


def parse_queries(text: str, source: str, fragments: Mapping[str, _Block] | None = None) -> list[Query]:
    """Parse the named queries in ``text``; ``source`` names the file in errors.

    Fragments declared in ``text`` (and those given) may be included.
    ``// returns:`` and ``// mode:`` are checked when declared.
    """
    blocks = _parse_blocks(text, source)
    known = dict(fragments or {})
    known.update(_fragments(blocks))
    return [_resolve(b, known) for b in blocks if b.kind == "name"]


def _parse_blocks(text: str, source: str) -> list[_Block]:
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _NAME.match(line.strip())]
    if not starts:
        raise QueryFileError(f"{source}:1: no '// name:' header; every query needs one")
    preamble = [ln for ln in lines[: starts[0]] if ln.strip() and not ln.strip().startswith("//")]
    if preamble:
        raise QueryFileError(f"{source}:1: text before the first '// name:' header")
    blocks = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        blocks.append(_parse_one(lines, start, end, source))
    return blocks


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(a.strip() for a in (text or "").split(",") if a.strip())


def _parse_one(lines: list[str], start: int, end: int, source: str) -> _Block:
    where = f"{source}:{start + 1}"
    match = _NAME.match(lines[start].strip())
    assert match is not None
    kind, name = match["kind"], match["name"]
    what = "query" if kind == "name" else "fragment"
    if not _IDENT.match(name):
        raise QueryFileError(f"{where}: {what} name {name!r} must be snake_case")
    variables = _names(match["args"])
    if variables and kind == "name":
        raise QueryFileError(f"{where}: query {name} names variables {list(variables)}; only a fragment may")
    bad = [v for v in variables if not _VARIABLE.match(v)]
    if bad or len(set(variables)) != len(variables):
        raise QueryFileError(f"{where}: fragment {name}'s variables {list(variables)} must be distinct identifiers")
    i = start + 1
    declared: set[str] | None = None
    returns: tuple[str, ...] | None = None
    mode: str | None = None
    doc: list[str] = []
    while i < end and lines[i].strip().startswith("//") and not _INCLUDE_LINE.match(lines[i].strip()):
        comment = lines[i].strip()
        params, ret, mod = _PARAMS.match(comment), _RETURNS.match(comment), _MODE.match(comment)
        if params:
            declared = {p.strip() for p in params["params"].split(",") if p.strip()}
        elif ret:
            returns = () if ret["returns"].strip() == "nothing" else _names(ret["returns"])
            if not returns and ret["returns"].strip() != "nothing":
                raise QueryFileError(f"{where}: {what} {name}: write '// returns: nothing' for no columns")
        elif mod:
            mode = mod["mode"].strip()
            if mode not in ("read", "write"):
                raise QueryFileError(f"{where}: {what} {name}: '// mode: {mode}' must be 'read' or 'write'")
        else:
            doc.append(comment[2:].strip())
        i += 1
    if declared is None:
        raise QueryFileError(f"{where}: {what} {name} has no '// params:' line (write '// params:' for none)")
    if kind == "fragment" and (returns is not None or mode is not None):
        raise QueryFileError(f"{where}: fragment {name} declares returns or mode; only a query does")
    body = tuple(lines[i:end])
    if not "\n".join(body).strip().rstrip(";").strip():
        raise QueryFileError(f"{where}: {what} {name} has no statement")
    block = _Block(kind, name, frozenset(declared), " ".join(doc), body, where, variables, returns, mode)
    unused = [v for v in variables if not any(_mentions(line, v) for line in body)]
    if unused:
        raise QueryFileError(f"{where}: fragment {name} names variables {unused} but its text never uses them")
    return block


def _word(name: str) -> re.Pattern[str]:
    # A variable as a whole word: not a property (`.name`), a parameter (`$name`) or part of a longer name.
    return re.compile(rf"(?<![\w.$`]){re.escape(name)}(?![\w`])")


def _mentions(line: str, variable: str) -> bool:
    include = _INCLUDE.match(line.strip())
    if include is not None:
        return variable in _names(include["args"])
    return bool(_word(variable).search(_masked(line)))


def _substitute(line: str, binding: Mapping[str, str]) -> str:
    """``line`` with each bound variable replaced, as a whole word outside strings and comments."""
    if not binding:
        return line
    code = _masked(line)
    pattern = re.compile("|".join(_word(v).pattern for v in sorted(binding, key=len, reverse=True)))
    out, last = [], 0
    for match in pattern.finditer(code):
        out += [line[last:match.start()], binding[match.group()]]
        last = match.end()
    return "".join(out) + line[last:]


def _fragments(blocks: Iterable[_Block]) -> dict[str, _Block]:
    found: dict[str, _Block] = {}
    for block in blocks:
        if block.kind != "fragment":
            continue
        if block.name in found:
            raise QueryFileError(
                f"{block.where}: fragment name {block.name} is already used at {found[block.name].where}"
            )
        _check_params(block, _used(block.lines), "fragment")
        found[block.name] = block
    return found


def _used(lines: Iterable[str]) -> set[str]:
    used: set[str] = set()
    for line in lines:
        used.update(_PARAM_USE.findall(_code_only(line)))
    return used


def _check_params(block: _Block, used: set[str], what: str) -> None:
    if used != block.declared:
        raise QueryFileError(
            f"{block.where}: {what} {block.name} declares {sorted(block.declared)} but uses {sorted(used)}; "
            "make the '// params:' line match the $params in the statement"
        )


def _resolve(block: _Block, fragments: Mapping[str, _Block], *, contract: bool = False) -> Query:
    text: list[str] = []
    used: set[str] = set()
    _splice(block, block.lines, fragments, text, used, (block.name,), {})
    _check_params(block, used, "query")
    body = "\n".join(text).strip().rstrip(";").strip()
    if contract and (block.returns is None or block.mode is None):
        raise QueryFileError(f"{block.where}: query {block.name} needs '// returns:' (columns, or 'nothing') "
                             "and '// mode:' (read or write) lines")
    _check_contract(block, body)
    return Query(block.name, body, block.declared, block.doc, block.where, block.returns, block.mode)


def _splice(
    block: _Block, lines: Iterable[str], fragments: Mapping[str, _Block], text: list[str], used: set[str],
    within: tuple[str, ...], binding: Mapping[str, str], indent: str = "",
) -> None:
    """Append ``lines`` to ``text`` with every include spliced in (a fragment may include others)."""
    for line in lines:
        include = _INCLUDE.match(line.strip())
        if include is None and _INCLUDE_LINE.match(line.strip()):
            raise QueryFileError(f"{block.where}: query {block.name}: {line.strip()!r} is not "
                                 "'// include: name' or '// include: name(variable, ...)'")
        if include is None:
            line = _substitute(line, binding)
            text.append(indent + line)
            used.update(_used([line]))
            continue
        name = include["name"]
        fragment = fragments.get(name)
        if fragment is None:
            raise QueryFileError(f"{block.where}: query {block.name} includes unknown fragment {name!r}")
        if name in within:
            raise QueryFileError(f"{fragment.where}: fragment {name} includes itself (via {' -> '.join(within)})")
        args = _names(include["args"])
        bad = [a for a in args if not _ARGUMENT.match(a)]
        if bad:
            raise QueryFileError(f"{block.where}: query {block.name} includes {name} with {bad}; "
                                 "give a variable, a variable's property or a $param")
        if len(args) != len(fragment.variables):
            raise QueryFileError(f"{block.where}: query {block.name} includes {name} with {len(args)} variables; "
                                 f"{fragment.where} names {len(fragment.variables)} ({', '.join(fragment.variables)})")
        inner_binding = {v: binding.get(a, a) for v, a in zip(fragment.variables, args, strict=True)}
        inner = indent + line[: len(line) - len(line.lstrip())]
        body = "\n".join(fragment.lines).strip().rstrip(";").splitlines()
        _splice(block, body, fragments, text, used, (*within, name), inner_binding, inner)


# Clauses that change the graph; a `read` query holds none of them outside strings and comments.
_WRITE_CLAUSE = re.compile(r"(?<![\w.$`:])(?:CREATE|MERGE|SET|DELETE|REMOVE|FOREACH|DROP|LOAD\s+CSV)(?![\w`])(?!\s*:)",
                           re.IGNORECASE)
_RETURN = re.compile(r"(?<![\w.$`:])RETURN(?![\w`])(?!\s*:)", re.IGNORECASE)
_RETURN_END = re.compile(r"(?<![\w.$`:])(?:ORDER\s+BY|SKIP|LIMIT|UNION)(?![\w`])", re.IGNORECASE)
_ALIAS = re.compile(r"\s+AS\s+`?([A-Za-z_][A-Za-z0-9_]*)`?\s*$", re.IGNORECASE)


def writes(text: str) -> bool:
    """Whether a statement holds a clause that changes the graph (strings and comments aside).

    Example:
        >>> writes("MATCH (n) SET n.x = 1"), writes("MATCH (n) WHERE n.name = 'SET' RETURN n")
        (True, False)
    """
    return any(_WRITE_CLAUSE.search(_masked(line)) for line in text.splitlines())


def _depths(code: str) -> list[int]:
    depth, out = 0, []
    for ch in code:
        if ch in ")]}":
            depth -= 1
        out.append(depth)
        if ch in "([{":
            depth += 1
    return out


def return_columns(text: str) -> tuple[str, ...]:
    """The column names of a statement's final top-level ``RETURN`` (none without one).

    Example:
        >>> return_columns("MATCH (n) CALL (n) { RETURN 1 AS x } RETURN n.id AS id, n, count(*) AS c ORDER BY id")
        ('id', 'n', 'c')
    """
    lines = text.strip().rstrip(";").splitlines()
    text, code = "\n".join(lines), "\n".join(_masked(line) for line in lines)
    depth = _depths(code)
    starts = [m for m in _RETURN.finditer(code) if depth[m.start()] == 0]
    if not starts:
        return ()
    begin = starts[-1].end()
    end = next((m.start() for m in _RETURN_END.finditer(code, begin) if depth[m.start()] == 0), len(code))
    cuts = [begin - 1] + [i for i in range(begin, end) if code[i] == "," and depth[i] == 0] + [end]
    columns = []
    for a, b in itertools.pairwise(cuts):
        item = " ".join(text[a + 1:b].split())
        item = re.sub(r"^DISTINCT\s+", "", item, flags=re.IGNORECASE)
        alias = _ALIAS.search(item)
        columns.append(alias.group(1) if alias else item)
    return tuple(columns)


def _check_contract(block: _Block, body: str) -> None:
    """The declared ``// mode:`` and ``// returns:`` match the spliced statement."""
    if block.mode is not None and (block.mode == "write") != writes(body):
        found = "changes the graph" if writes(body) else "holds no CREATE, MERGE, SET, DELETE, REMOVE or FOREACH"
        raise QueryFileError(f"{block.where}: query {block.name} declares '// mode: {block.mode}' but {found}")
    if block.returns is not None:
        columns = return_columns(body)
        if columns != block.returns:
            said = ", ".join(columns) or "nothing"
            raise QueryFileError(f"{block.where}: query {block.name} declares '// returns: "
                                 f"{', '.join(block.returns) or 'nothing'}' but its final RETURN gives: {said}")


def load_dir(root: Path) -> dict[str, Query]:
    """Load every ``*.cypher`` file below ``root``; names must be unique, and each query
    declares its ``// returns:`` and ``// mode:``."""
    blocks: list[_Block] = []
    for path in sorted(root.rglob("*.cypher")):
        rel = path.relative_to(root.parent)
        blocks.extend(_parse_blocks(path.read_text(encoding="utf-8"), str(rel)))
    fragments = _fragments(blocks)
    found: dict[str, Query] = {}
    for block in blocks:
        if block.kind != "name":
            continue
        query = _resolve(block, fragments, contract=True)
        if query.name in found:
            raise QueryFileError(
                f"{query.source}: query name {query.name} is already used at {found[query.name].source}"
            )
        found[query.name] = query
    return found


def cypher_root() -> Path:
    """The folder of the shipped ``.cypher`` files (in the wheel, or the repo)."""
    package = Path(__file__).parent.parent  # symfonic_graph/
    packaged = package / "cypher"
    return packaged if packaged.is_dir() else package.parent / "cypher"


@cache
def _library() -> dict[str, Query]:
    queries = load_dir(cypher_root() / "queries")
    return queries


def query(name: str) -> Query:
    """The library query called ``name``."""
    try:
        return _library()[name]
    except KeyError:
        raise QueryFileError(f"no query named {name!r} under {cypher_root() / 'queries'}") from None


def all_queries() -> Iterable[Query]:
    """Every library query (schema migrations and seeds excluded)."""
    return _library().values()
