"""Authority guards: step checks that abort a write touching what its scope does not own.

Each returns a ``Check`` run inside the write's transaction; raising rolls
the whole write back, so a refused write changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from symfonic_graph._store.steps import Check, Row
from symfonic_graph.errors import AuthorityError, NotFoundError, ValidationError
from symfonic_graph.shape.scope import MemoryScope, describe_scope


def owned_by(scope: MemoryScope, node_id: str) -> Check:
    """A step check for a statement returning ``owned`` rows: NotFound when none, Authority when not owned.

    Raising inside the transaction rolls it back, so nothing changes.
    """

    def check(rows: list[Row]) -> None:
        if not rows:
            raise NotFoundError(f"no node {node_id!r} visible in {describe_scope(scope)}; check the id and the scope")
        row = rows[0]
        if not row.get("owned"):
            raise AuthorityError(_not_owned(scope, node_id, row))

    return check


def _not_owned(scope: MemoryScope, node_id: str, row: Row) -> str:
    owner = describe_scope(MemoryScope(str(row["tenant_id"]), row.get("namespace")))
    return (f"{node_id!r} belongs to {owner}; {describe_scope(scope)} sees it but cannot change it: "
            f"make this change in {owner}. Nothing changed.")


def one_target(scope: MemoryScope, node_id: str) -> Check:
    """``owned_by`` for the marker statements, whose ``node_id`` may be an identifier naming several nodes."""

    def check(rows: list[Row]) -> None:
        if not rows:
            raise NotFoundError(f"no node with id or identifier {node_id!r} visible in {describe_scope(scope)}; "
                                "check the id and the scope (`symfonic-graph skills list` shows both)")
        owned = [r for r in rows if r.get("owned")]
        if not owned:
            raise AuthorityError(_not_owned(scope, node_id, rows[0]))
        if len(owned) > 1:
            ids = ", ".join(str(r["id"]) for r in owned)
            raise ValidationError("node_id", f"identifier {node_id!r} names {len(owned)} nodes in "
                                  f"{describe_scope(scope)} ({ids}); give the node id instead. Nothing changed.")

    return check


def held_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every key a write may come to hold: its own, and the base key a staged write or draft takes later."""
    return [k for r in rows for k in (r["key"], r.get("base_key")) if k is not None]


def refuse_held_keys(what: str) -> Check:
    """A step check for a ``*_keys_held`` statement: a key held by another scope aborts the write."""

    def check(rows: list[Row]) -> None:
        if rows:
            row = rows[0]
            raise AuthorityError(
                f"{what} {row['id']!r} of tenant {row['tenant_id']!r} namespace {row['namespace']!r} holds the key "
                f"this write would use ({row['key']}); a write never takes over another scope's node. "
                "Fix that node's symfonic_key (`symfonic-graph doctor` lists it). Nothing was written."
            )

    return check


def refuse_published(write_id: str, scope: MemoryScope) -> Check:
    """A step check for ``write_id_published``: a write id this scope already published aborts the write."""

    def check(rows: list[Row]) -> None:
        if rows and rows[0]["published"]:
            raise ValidationError(
                "write_id", f"{write_id!r} was already published in {describe_scope(scope)}; "
                "stage under a fresh write_id"
            )

    return check
