"""The write protocol: a write is a list of named steps, read back by name.

A ``Step`` is one named query with its parameters, an optional check of its
own rows (raising rolls the whole transaction back) and the name its rows
come back under; ``Written`` holds those rows. ``catalog_first`` gives every
write the one lock order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import neo4j

Row = dict[str, Any]
Statement = tuple[str, dict[str, Any]]
"""A named query and its parameters, run as a step without a check."""
Check = Callable[[list[Row]], None]
"""Sees the rows of its own step, inside the transaction; raising rolls the whole write back."""


@dataclass(frozen=True, slots=True)
class Step:
    """One statement of a write: the named query, its parameters, its own check, and its result's name.

    A write is a list of steps read back by name, never by position, so adding
    a step to a write touches one place.

    Example:
        >>> Step("skills_write", {"rows": []}).name, Step("catalog_lock", {}, key="lock:acme").name
        ('skills_write', 'lock:acme')
    """

    query: str
    params: Mapping[str, Any]
    check: Check | None = None
    key: str | None = None

    @property
    def name(self) -> str:
        """The name its rows come back under (``key``, else the query's name)."""
        return self.key or self.query


class Written:
    """The rows of each step of a write, by step name.

    Example:
        >>> Written([("skills_write", [{"ids": ["s1"]}])]).one("skills_write")["ids"]
        ['s1']
    """

    __slots__ = ("_rows",)

    def __init__(self, steps: Sequence[tuple[str, list[Row]]]) -> None:
        self._rows: dict[str, list[list[Row]]] = {}
        for name, rows in steps:
            self._rows.setdefault(name, []).append(rows)

    def __getitem__(self, name: str) -> list[Row]:
        found = self._rows.get(name)
        if found is None:
            raise KeyError(f"no step named {name!r} in this write")
        if len(found) > 1:
            raise KeyError(f"{len(found)} steps are named {name!r} in this write; give each a key")
        return found[0]

    def one(self, name: str) -> Row:
        """The first row of step ``name`` (a write step that returns one row)."""
        rows = self[name]
        if not rows:
            raise KeyError(f"step {name!r} returned no row")
        return rows[0]

    def __contains__(self, name: object) -> bool:
        return name in self._rows


def as_step(item: Step | Statement) -> Step:
    return item if isinstance(item, Step) else Step(item[0], item[1])


# Statements that lock a tenant's catalog node: run first in a write, in tenant order (see catalog_first).
CATALOG_STATEMENTS = frozenset({"catalog_lock", "catalog_bump"})
# Statements after which the skill rows a turn of the tenant reads may differ: a write holding one is followed by
# packing the tenant's rows (_store/packed.py). A bump (every write that changes what a turn sees), and a fold
# (the staged label it removes shows in the rows). The other writes that lock a catalog (staging, marking the
# nodes a publish replaces, discarding a staged write, pruning retracted nodes) change no row a turn reads.
PACKING_STATEMENTS = frozenset({"catalog_bump", "write_fold_batch"})


def catalog_first(steps: Sequence[Step]) -> list[Step]:
    """The one lock order of every write: catalogs first (in tenant id order), then skills and triggers.

    A write that locks or bumps a tenant's catalog node (every write that
    changes a tenant's skills, and publish, discard, fold and prune) takes
    each such catalog's lock before any other statement runs, so two writes
    never hold a skill and wait for a catalog the other holds: publish, a live
    re-seed, retract, restore, approve, fold, prune and discard serialize on
    the catalog instead of deadlocking. Returns the steps to run: the lock
    steps put in front are named ``catalog_first:<tenant>``.

    Example:
        >>> [s.name for s in catalog_first([Step("skills_write", {}), Step("catalog_bump", {"tenant_id": "acme"})])]
        ['catalog_first:acme', 'skills_write', 'catalog_bump']
    """
    tenants = sorted({str(s.params["tenant_id"]) for s in steps if s.query in CATALOG_STATEMENTS})
    if not tenants:
        return list(steps)
    head = [Step("catalog_lock", {"tenant_id": t}, key=f"catalog_first:{t}") for t in tenants]
    leading = [(s.query, s.params.get("tenant_id")) for s in steps[: len(head)]]
    if leading == [(s.query, s.params["tenant_id"]) for s in head]:
        return list(steps)
    return [*head, *steps]


def row_of(record: neo4j.Record) -> Row:
    """A record as a plain dict, as the driver decoded it.

    Every query returns maps, lists and scalars (projections, never graph
    entities), so the driver's ``Record.data()``, which walks every nested
    value to convert nodes, is not needed: on a cold turn it cost more than
    the round trip itself.
    """
    return dict(zip(record.keys(), record, strict=True))
