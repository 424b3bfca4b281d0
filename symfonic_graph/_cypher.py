"""Named Cypher queries, loaded from ``.cypher`` files.

A file holds one or more queries, each opened by a header::

    // name: skill_by_id
    // params: tenant_id, namespace, skill_id
    // One skill by id, if the scope sees it.   <- becomes the doc
    MATCH (s:Skill) WHERE s.tenant_id = $tenant_id ...

The loader checks that each query's declared parameters are exactly the
``$params`` its text uses, that names are unique, and reports ``file:line``
on any error. Query text is never assembled from input: callers pass values
as parameters only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from symfonic_graph.errors import QueryFileError

_NAME = re.compile(r"^//\s*name:\s*(?P<name>\S*)\s*$")
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


def parse_queries(text: str, source: str) -> list[Query]:
    """Parse the named queries in ``text``; ``source`` names the file in errors."""
    queries: list[Query] = []
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _NAME.match(line.strip())]
    if not starts:
        raise QueryFileError(f"{source}:1: no '// name:' header; every query needs one")
    preamble = [ln for ln in lines[: starts[0]] if ln.strip() and not ln.strip().startswith("//")]
    if preamble:
        raise QueryFileError(f"{source}:1: text before the first '// name:' header")
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        queries.append(_parse_one(lines, start, end, source))
    return queries


def _parse_one(lines: list[str], start: int, end: int, source: str) -> Query:
    where = f"{source}:{start + 1}"
    match = _NAME.match(lines[start].strip())
    assert match is not None
    name = match["name"]
    if not _IDENT.match(name):
        raise QueryFileError(f"{where}: query name {name!r} must be snake_case")
    i = start + 1
    declared: set[str] | None = None
    doc: list[str] = []
    while i < end and lines[i].strip().startswith("//"):
        comment = lines[i].strip()
        params = _PARAMS.match(comment)
        if params:
            declared = {p.strip() for p in params["params"].split(",") if p.strip()}
        else:
            doc.append(comment[2:].strip())
        i += 1
    if declared is None:
        raise QueryFileError(f"{where}: query {name} has no '// params:' line (write '// params:' for none)")
    body = "\n".join(lines[i:end]).strip().rstrip(";").strip()
    if not body:
        raise QueryFileError(f"{where}: query {name} has no statement")
    used: set[str] = set()
    for line in lines[i:end]:
        used.update(_PARAM_USE.findall(_code_only(line)))
    if used != declared:
        raise QueryFileError(
            f"{where}: query {name} declares {sorted(declared)} but uses {sorted(used)}; "
            "make the '// params:' line match the $params in the statement"
        )
    return Query(name, body, frozenset(declared), " ".join(doc), where)


def load_dir(root: Path) -> dict[str, Query]:
    """Load every ``*.cypher`` file below ``root``; names must be unique."""
    found: dict[str, Query] = {}
    for path in sorted(root.rglob("*.cypher")):
        rel = path.relative_to(root.parent)
        for query in parse_queries(path.read_text(encoding="utf-8"), str(rel)):
            if query.name in found:
                raise QueryFileError(
                    f"{query.source}: query name {query.name} is already used at {found[query.name].source}"
                )
            found[query.name] = query
    return found


def cypher_root() -> Path:
    """The folder of the shipped ``.cypher`` files (in the wheel, or the repo)."""
    packaged = Path(__file__).parent / "cypher"
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / "cypher"


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
