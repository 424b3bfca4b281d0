"""reminder_tools: LangChain tools that let the model keep the user's reminders itself.

"Remind me every Monday at nine to send the report" needs no application
code: the model calls ``add_reminder`` with a due time and an RRULE, and the
reminder is stored in the user's scope; when it is due, ``MemoryMiddleware``
offers it (with ``reminder_ids=True`` the block names its id) and the model
calls ``complete_reminder`` once it told the user (a recurring one then makes
its next occurrence). A bad argument comes back to the model as the tool's
error text, naming the field; nothing is written then.

Example:
    >>> tools = reminder_tools(ProspectiveLayer(store), MemoryScope("acme", "user-42"))
    >>> agent = create_agent(model, [*app_tools, *tools],
    ...                      middleware=[MemoryMiddleware(TurnMemory(store), reminder_ids=True)])  # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from symfonic_graph.errors import AuthorityError, NotFoundError, ValidationError
from symfonic_graph.memory.layers.prospective import ProspectiveLayer
from symfonic_graph.shape import _time
from symfonic_graph.shape.models import Trigger
from symfonic_graph.shape.scope import MemoryScope

__all__ = ["reminder_tools"]

_REFUSED = (ValidationError, NotFoundError, AuthorityError)


def _line(t: Trigger) -> str:
    when = f"due {t.due_at.isoformat()}" if t.due_at is not None else f"when: {t.condition or t.on_tool or '?'}"
    repeat = f", repeats {t.recurrence}" if t.recurrence else ""
    snoozed = f", snoozed until {t.snoozed_until.isoformat()}" if t.snoozed_until else ""
    return f"{t.id}: {t.task} ({when}{repeat}{snoozed})"


def _tool(name: str, description: str, run: Callable[..., Awaitable[str]]) -> BaseTool:
    @functools.wraps(run)  # the tool's argument schema is read from run's signature
    async def guarded(**kwargs: Any) -> str:
        try:
            return await run(**kwargs)
        except _REFUSED as exc:
            raise ToolException(str(exc)) from None

    return StructuredTool.from_function(coroutine=guarded, name=name, description=description,
                                        handle_tool_error=True, infer_schema=True)


def reminder_tools(layer: ProspectiveLayer, scope: MemoryScope) -> list[BaseTool]:
    """Tools to add, list, complete, cancel and snooze the reminders of ``scope`` (one end user's).

    ``add_reminder`` stores a time reminder (``due_at`` ISO 8601 with an
    offset, or ``due_in`` such as ``30m``, ``2h``, ``1d``; optional RFC 5545
    ``recurrence`` such as ``FREQ=WEEKLY;BYDAY=MO``) and returns its id;
    ``list_reminders`` lists the pending ones with their ids;
    ``complete_reminder``, ``cancel_reminder`` and ``snooze_reminder`` take
    an id. Every tool acts in ``scope`` only.
    """
    if not isinstance(layer, ProspectiveLayer):
        raise TypeError(f"layer must be a ProspectiveLayer, got {type(layer).__name__}")
    if not isinstance(scope, MemoryScope):
        raise TypeError(f"scope must be a MemoryScope, got {type(scope).__name__}")

    async def add(task: str, due_at: str | None = None, due_in: str | None = None,
                  recurrence: str | None = None) -> str:
        if due_at is None and due_in is None:
            raise ValidationError("due_at", "give due_at (ISO 8601 with an offset) or due_in (e.g. 2h, 1d)")
        trigger_id = await layer.set_trigger(scope, task=task, due_at=due_at, due_in=due_in, recurrence=recurrence)
        return f"Reminder {trigger_id} stored."

    async def listing() -> str:
        pending = await layer.get_pending(scope, limit=100)
        return "\n".join(map(_line, pending)) or "No pending reminders."

    async def complete(reminder_id: str) -> str:
        following = await layer.ack_trigger(scope, reminder_id)
        return f"Reminder {reminder_id} completed." + (f" Next occurrence: {following}." if following else "")

    async def cancel(reminder_id: str) -> str:
        await layer.cancel_trigger(scope, reminder_id)
        return f"Reminder {reminder_id} cancelled."

    async def snooze(reminder_id: str, until: str | None = None, snooze_for: str | None = None) -> str:
        if (until is None) == (snooze_for is None):
            raise ValidationError("until", "give exactly one of until (ISO 8601 with an offset) or snooze_for "
                                  "(e.g. 10m, 1d)")
        at = until if until is not None else layer.clock() + _time.seconds("snooze_for", snooze_for)
        await layer.snooze_trigger(scope, reminder_id, at)
        return f"Reminder {reminder_id} snoozed until {_time.instant('until', at).isoformat()}."

    return [
        _tool("add_reminder", "Store a reminder for the user: task (what to remind them of), and due_at "
              "(ISO 8601 with an offset) or due_in (e.g. 30m, 2h, 1d); recurrence is an optional RRULE "
              "(e.g. FREQ=WEEKLY;BYDAY=MO) for a repeating one. Returns its id.", add),
        _tool("list_reminders", "List the user's pending reminders with their ids and due times.", listing),
        _tool("complete_reminder", "Mark a reminder done once you told the user (by its id); a repeating one "
              "moves to its next occurrence.", complete),
        _tool("cancel_reminder", "Cancel a reminder for good (by its id); a repeating one ends.", cancel),
        _tool("snooze_reminder", "Postpone a reminder (by its id) until a time (ISO 8601 with an offset) or "
              "for a while (snooze_for, e.g. 10m, 1d).", snooze),
    ]
