"""The packed tenant-wide rows a write leaves on its tenant's catalog node, for the next first reads.

A turn that must ship a tenant's skills (a process's first read of the
scope, or a catalog that moved) would have Neo4j project every skill and
precondition again. Every library write that bumps a tenant's catalog (or
folds a published write) is therefore followed by a transaction that takes
the catalog's lock, reads
the tenant-wide rows exactly as a turn reads them (``catalog_packed_rows``,
the one visibility rule and projection) and keeps them on the catalog node
as one JSON text, ``[version, rows]``, with the version they were read under
(``catalog_packed_set``). A turn then
ships one string instead (``turn_snapshot``, entries with ``packed``).

The text is a cache the library writes, never trusted beyond what a read can
check: it is used only under the version it names (a plain-Cypher bump
leaves it behind, and turns read the rows themselves until the next library
write), and a catalog read from it is read again in full once ``max_age``
has passed, as any newly read version is (``TurnMemory``).

Example:
    >>> row = ["s1", "acme", None, "Deploy", None, ["deploy"], "deploy", "", "approved", True, None, None,
    ...        None, None, [], False, False, [[0, None, [["kind", "tool"], ["tool", "auth"]]]]]
    >>> text = packed_text(3, [row])
    >>> rows_of(text, 3) == [row], rows_of(text, 4), rows_of('[3,[["s1","acme"]]]', 3)
    (True, None, None)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from neo4j import AsyncManagedTransaction

from symfonic_graph._store.cypher import query

__all__ = ["MAX_PACKED_CHARS", "packed_text", "refresh_packed", "rows_of"]

MAX_PACKED_CHARS = 4 * 1024 * 1024
"""Characters of packed rows kept at most; a bigger tenant-wide catalog is read row by row."""
_JSON = json.JSONEncoder(check_circular=False, separators=(",", ":"))


def packed_text(version: object, rows: list[Any]) -> str | None:
    """``[version, rows]`` as compact JSON; None when the version is unusable, a value is not plain JSON
    (a date seeded by hand), or the text would pass ``MAX_PACKED_CHARS``."""
    if type(version) is not int or version < 0:
        return None
    try:
        text = _JSON.encode([version, rows])
    except (TypeError, ValueError):
        return None
    return text if len(text) <= MAX_PACKED_CHARS else None


def rows_of(text: object, version: object) -> list[Any] | None:
    """The rows of a packed text when it names ``version``; None when it does not or cannot be read."""
    if type(text) is not str:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if (type(value) is not list or len(value) != 2 or type(value[0]) is not int or value[0] != version
            or type(value[1]) is not list or not all(map(_well_formed, value[1]))):
        return None
    return value[1]


_SKILL_ITEMS = 18  # skill_packed: 14 values, the undocumented pairs, two markers, the preconditions


def _well_formed(row: object) -> bool:
    """Whether ``row`` has the shape ``skill_packed`` gives every row (its values are read as any row's)."""
    if type(row) is not list or len(row) != _SKILL_ITEMS or type(row[14]) is not list or type(row[17]) is not list:
        return False
    for entry in row[17]:
        if type(entry) is not list or len(entry) not in (1, 3):
            return False
        if len(entry) == 3 and (type(entry[2]) is not list or not all(
                type(item) is str or (type(item) is list and len(item) == 2 and type(item[0]) is str)
                for item in entry[2])):
            return False
    return True


async def refresh_packed(tx: AsyncManagedTransaction, tenants: Iterable[str]) -> None:
    """Store each tenant's packed tenant-wide rows (or remove them), under its catalog lock, after a write.

    Three statements whatever the number of tenants: lock (in the one lock order), read, store.
    """
    order = sorted(set(tenants))  # the one lock order (steps.catalog_first)
    locked = [r["tenant_id"] async for r in await tx.run(query("catalog_packed_lock").text, {"tenants": order})]
    if not locked:
        return  # no catalog node (erased meanwhile): nothing to keep, and none created
    found = [r async for r in await tx.run(query("catalog_packed_rows").text, {"tenants": locked})]
    rows = [{"tenant_id": r["tenant_id"], "version": r["version"], "packed": packed_text(r["version"], r["skills"])}
            for r in found]
    await (await tx.run(query("catalog_packed_set").text, {"rows": rows})).consume()
