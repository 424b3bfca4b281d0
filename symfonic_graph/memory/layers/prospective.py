"""ProspectiveLayer: stored reminders (a condition and a task)."""

from __future__ import annotations

from typing import Any

from symfonic_graph._store import (
    MAX_COUNT,
    GraphMemoryStore,
    Step,
    check_write_id,
    content_key,
    held_keys,
    new_id,
    owned_by,
    positive_count,
    refuse_held_keys,
    staged_keys,
    tenant_token,
    trigger_key,
)
from symfonic_graph.shape import _validate as v
from symfonic_graph.shape._limits import refuse_heavy_write, refuse_over_cap, trigger_weight
from symfonic_graph.shape.inputs import TriggerInput
from symfonic_graph.shape.models import Trigger, trigger_from_row
from symfonic_graph.shape.scope import MemoryScope


class ProspectiveLayer:
    """Triggers in the graph: set, list pending, resolve.

    Example:
        >>> layer = ProspectiveLayer(store)
        >>> tid = await layer.set_trigger(MemoryScope("acme", "u1"),
        ...     condition="user mentions their invoice", task="Tell them it is overdue.")
        >>> [t.id for t in await layer.get_pending(MemoryScope("acme", "u1"))]
        [tid]
    """

    def __init__(self, store: GraphMemoryStore) -> None:
        self.store = store

    async def set_trigger(
        self,
        scope: MemoryScope,
        *,
        condition: str,
        task: str,
        identifier: str | None = None,
        write_id: str | None = None,
    ) -> str:
        """Store a pending trigger; return its id.

        With an ``identifier``, setting it again in the same scope replaces the
        trigger (same id, new condition and task, pending again), never
        duplicates: a call that timed out may be retried safely.
        """
        rows = [trigger_row(scope, condition=condition, task=task, identifier=identifier,
                            write_id=check_write_id(write_id))]
        [trigger_id] = await self.write_triggers(scope, rows, write_id=rows[0]["write_id"])
        return trigger_id

    async def write_triggers(
        self, scope: MemoryScope, rows: list[dict[str, Any]], *, write_id: str | None = None
    ) -> list[str]:
        """Write :func:`trigger_row` rows in one transaction; return the ids (a replaced trigger keeps its id).

        Raises:
            ValidationError: naming ``weight`` (nothing written) when the scope's pending
                triggers and skills would exceed its budget (``_limits.MAX_SCOPE_WEIGHT``).
        """
        refuse_heavy_write("triggers", sum(map(trigger_weight, rows)))
        budget = (Step("skills_owned_count", scope.params(), refuse_over_cap(scope)) if write_id is None
                  else Step("skills_owned_after_staging", {**scope.params(), "write_id": write_id},
                            refuse_over_cap(scope)))
        written = await self.store.write_staged(
            scope,
            write_id,
            [Step("trigger_keys_held", {"keys": held_keys(rows), **scope.params()}, refuse_held_keys("trigger")),
             Step("triggers_write", {"rows": rows}), budget],
        )
        return [str(i) for i in written.one("triggers_write")["ids"]]

    async def get_pending(
        self, scope: MemoryScope, *, write_id: str | None = None, limit: int | None = None
    ) -> list[Trigger]:
        """Unresolved triggers the scope sees, oldest first (at most ``limit``)."""
        rows = await self.store.read("triggers_pending", **scope.params(), write_id=check_write_id(write_id),
                                     limit=MAX_COUNT if limit is None else positive_count("limit", limit))
        return [t for t in map(trigger_from_row, rows[0]["triggers"]) if t is not None]

    async def resolve_trigger(self, scope: MemoryScope, trigger_id: str) -> None:
        """Mark a trigger resolved: it is no longer pending."""
        params = {**scope.params(), "trigger_id": v.text("trigger_id", trigger_id)}
        await self.store.write([Step("trigger_resolve", params, owned_by(scope, trigger_id))])


def trigger_row(
    scope: MemoryScope,
    *,
    condition: object,
    task: object,
    identifier: object = None,
    write_id: str | None = None,
    field_prefix: str = "",
    keyed_by_content: bool = False,
) -> dict[str, Any]:
    """One validated trigger row for ``triggers_write`` (errors name ``field_prefix`` + the field).

    With ``keyed_by_content``, a trigger without an identifier is keyed by the
    hash of its condition and task, so writing it again replaces it (seed files).
    """
    trigger = TriggerInput.read({"identifier": identifier, "condition": condition, "task": task}, field_prefix)
    return trigger_input_row(scope, trigger, write_id=write_id, keyed_by_content=keyed_by_content)


def trigger_input_row(
    scope: MemoryScope, trigger: TriggerInput, *, write_id: str | None = None, keyed_by_content: bool = False
) -> dict[str, Any]:
    """The ``triggers_write`` row of a validated :class:`TriggerInput` (keys taken from the scope)."""
    content, ident = trigger.content(), trigger.identifier
    trigger_id = new_id()
    if keyed_by_content and ident is None:
        key = content_key("trigger", scope, content)
    else:
        key = trigger_key(scope, ident, trigger_id)
    key, base_key = staged_keys(key, write_id, stable=ident is not None or keyed_by_content)
    return {
        **content,
        "id": trigger_id,
        "key": key,
        "base_key": base_key,
        "identifier": ident,
        "tenant_id": scope.tenant_id,
        "tenant_token": tenant_token(scope.tenant_id),
        "namespace": scope.namespace,
        "write_id": write_id,
    }
