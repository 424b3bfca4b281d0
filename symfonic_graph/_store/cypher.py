"""Named Cypher queries, loaded from ``.cypher`` files.

A file holds one or more queries, each opened by a header::

    // name: skill_by_id
    // params: tenant_id, namespace, skill_id
    // One skill by id, if the scope sees it.   <- becomes the doc
    MATCH (s:Skill) WHERE s.tenant_id = $tenant_id ...

A *fragment* is a piece of Cypher shared by several queries (the one skill
projection, the one visibility rule). It is declared like a query but with
``// fragment: name``, and a query splices it in with a line of its own::

    // include: skill_row

The loader checks that each query's declared parameters are exactly the
``$params`` its text uses (its fragments' included), that names are unique,
and reports ``file:line`` on any error. Query text is never assembled from
input: callers pass values as parameters only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from symfonic_graph.errors import QueryFileError

_NAME = re.compile(r"^//\s*(?P<kind>name|fragment):\s*(?P<name>\S*)\s*$")
_INCLUDE = re.compile(r"^//\s*include:\s*(?P<name>\S*)\s*$")
_PARAMS = re.compile(r"^//\s*params:\s*(?P<params>.*)$")
_IDENT = re.compile(r"^[a-z][a-z0-9_]*$")
_PARAM_USE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


@dataclass(frozen=True, slots=True)
class Query:
    """One named statement, ready to run with ``text`` and keyword params."""

    name: str
    text: str
    params: frozenset[str]
    doc: str
    source: str  # "path:line" of the header

    def check_args(self, args: Mapping[str, object]) -> None:
        """Raise ``TypeError`` unless ``args`` are exactly the declared params."""
        given = set(args)
        if given != self.params:
            missing = sorted(self.params - given)
            extra = sorted(given - self.params)
            raise TypeError(f"query {self.name} ({self.source}): missing {missing}, unexpected {extra}")


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


def parse_queries(text: str, source: str, fragments: Mapping[str, _Block] | None = None) -> list[Query]:
    """Parse the named queries in ``text``; ``source`` names the file in errors.

    Fragments declared in ``text`` (and those given) may be included.
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


def _parse_one(lines: list[str], start: int, end: int, source: str) -> _Block:
    where = f"{source}:{start + 1}"
    match = _NAME.match(lines[start].strip())
    assert match is not None
    kind, name = match["kind"], match["name"]
    what = "query" if kind == "name" else "fragment"
    if not _IDENT.match(name):
        raise QueryFileError(f"{where}: {what} name {name!r} must be snake_case")
    i = start + 1
    declared: set[str] | None = None
    doc: list[str] = []
    while i < end and lines[i].strip().startswith("//") and not _INCLUDE.match(lines[i].strip()):
        comment = lines[i].strip()
        params = _PARAMS.match(comment)
        if params:
            declared = {p.strip() for p in params["params"].split(",") if p.strip()}
        else:
            doc.append(comment[2:].strip())
        i += 1
    if declared is None:
        raise QueryFileError(f"{where}: {what} {name} has no '// params:' line (write '// params:' for none)")
    body = tuple(lines[i:end])
    if not "\n".join(body).strip().rstrip(";").strip():
        raise QueryFileError(f"{where}: {what} {name} has no statement")
    return _Block(kind, name, frozenset(declared), " ".join(doc), body, where)


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


def _resolve(block: _Block, fragments: Mapping[str, _Block]) -> Query:
    text: list[str] = []
    used: set[str] = set()
    _splice(block, block.lines, fragments, text, used, (block.name,))
    _check_params(block, used, "query")
    body = "\n".join(text).strip().rstrip(";").strip()
    return Query(block.name, body, block.declared, block.doc, block.where)


def _splice(
    block: _Block, lines: Iterable[str], fragments: Mapping[str, _Block], text: list[str], used: set[str],
    within: tuple[str, ...], indent: str = "",
) -> None:
    """Append ``lines`` to ``text`` with every include spliced in (a fragment may include others)."""
    for line in lines:
        include = _INCLUDE.match(line.strip())
        if include is None:
            text.append(indent + line)
            used.update(_used([line]))
            continue
        name = include["name"]
        fragment = fragments.get(name)
        if fragment is None:
            raise QueryFileError(f"{block.where}: query {block.name} includes unknown fragment {name!r}")
        if name in within:
            raise QueryFileError(f"{fragment.where}: fragment {name} includes itself (via {' -> '.join(within)})")
        inner = indent + line[: len(line) - len(line.lstrip())]
        body = "\n".join(fragment.lines).strip().rstrip(";").splitlines()
        _splice(block, body, fragments, text, used, (*within, name), inner)


def load_dir(root: Path) -> dict[str, Query]:
    """Load every ``*.cypher`` file below ``root``; names must be unique."""
    blocks: list[_Block] = []
    for path in sorted(root.rglob("*.cypher")):
        rel = path.relative_to(root.parent)
        blocks.extend(_parse_blocks(path.read_text(encoding="utf-8"), str(rel)))
    fragments = _fragments(blocks)
    found: dict[str, Query] = {}
    for block in blocks:
        if block.kind != "name":
            continue
        query = _resolve(block, fragments)
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
