"""``symfonic-graph triggers list|add|ack|snooze|cancel``: stored reminders, scoped by --tenant/--namespace.

A trigger is named by its id or, for ack, snooze and cancel, by the
identifier of a pending one. Times are ISO 8601 with an offset
(``2031-05-01T09:00:00+02:00``) or epoch seconds; durations ``30m``, ``2h``,
``1d``, ``1w`` or seconds.

Example::

    symfonic-graph triggers add --tenant acme --namespace u1 --task "Call the bank." --due-in 2h
    symfonic-graph triggers list --tenant acme --namespace u1 --now
    symfonic-graph triggers snooze --tenant acme --namespace u1 t-123 --for 1d
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import anyio

from symfonic_graph.cli._common import add_json_flag, add_scope_flags, emit, scope_of
from symfonic_graph.cli._connect import open_store
from symfonic_graph.cli._due import register_due
from symfonic_graph.cli._tenants import notice_if_empty
from symfonic_graph.errors import ValidationError
from symfonic_graph.memory.layers import ProspectiveLayer
from symfonic_graph.shape import _time
from symfonic_graph.shape.models import Trigger


def register(sub: Any) -> None:
    triggers = sub.add_parser("triggers", help="list, add, acknowledge, snooze and cancel stored reminders")
    actions = triggers.add_subparsers(dest="action", required=True, metavar="ACTION")

    tlist = actions.add_parser("list", help="pending triggers the scope sees (due or not), oldest first")
    add_scope_flags(tlist)
    add_json_flag(tlist)
    tlist.add_argument("--write-id", default=None, help="include this staged write")
    shown = tlist.add_mutually_exclusive_group()
    shown.add_argument("--now", action="store_true",
                       help="only those a turn would be offered now (due, unexpired, not snoozed)")
    shown.add_argument("--done", action="store_true",
                       help="the history instead: acknowledged, cancelled and replaced ones, newest first")
    tlist.set_defaults(handler=lambda a: anyio.run(_list, a))

    add = actions.add_parser("add", help="store a reminder; prints its id")
    add_scope_flags(add)
    add_json_flag(add)
    add.add_argument("--task", required=True, help="what to tell the model when it is offered")
    add.add_argument("--condition", default=None, help="a text trigger's condition (the evaluator matches it)")
    add.add_argument("--kind", default=None, choices=("text", "time", "event", "semantic"),
                     help="text, time, event or semantic (default: time when --due-at or --due-in is given, "
                          "event with --on-tool, semantic with --embedding)")
    add.add_argument("--due-at", default=None, metavar="TIME", help="offered from this time on")
    add.add_argument("--due-in", default=None, metavar="DURATION", help="offered from now + this on")
    add.add_argument("--expires-at", default=None, metavar="TIME", help="never offered at or after this time")
    add.add_argument("--recurrence", default=None, metavar="RRULE",
                     help="a time trigger repeats: e.g. FREQ=WEEKLY;BYDAY=MO (acknowledging makes the next)")
    add.add_argument("--on-tool", default=None, metavar="TOOL", help="an event trigger: offered once TOOL was called")
    add.add_argument("--same-args", default=None, metavar="JSON",
                     help='with --on-tool: argument values the call must have, e.g. \'{"order_id": "A-17"}\'')
    add.add_argument("--where", default=None, metavar="CEL",
                     help="with --on-tool: a CEL expression over the call's result and arguments, e.g. "
                          "'result.status == \"issued\"' (`call.order_id` reads an argument)")
    add.add_argument("--embedding", default=None, metavar="JSON",
                     help="a semantic trigger: the embedding of its condition, a JSON list of numbers "
                          "(computed by the model the agent's wiring embeds turns with)")
    add.add_argument("--once", action="store_true", help="acknowledged when first offered")
    add.add_argument("--identifier", default=None, help="a stable key: adding it again replaces it")
    add.add_argument("--write-id", default=None, help="stage the write; `publish` makes it visible")
    add.set_defaults(handler=lambda a: anyio.run(_add, a))

    for name, helptext in (("ack", "acknowledge a trigger: never offered again"),
                           ("resolve", "the same as ack"),
                           ("cancel", "cancel a trigger: never offered again")):
        p = actions.add_parser(name, help=helptext)
        p.add_argument("trigger", help="the trigger's id, or the identifier of a pending one")
        add_scope_flags(p)
        add_json_flag(p)
        p.set_defaults(handler=lambda a, n=name: anyio.run(_change, a, n))

    snooze = actions.add_parser("snooze", help="hold a pending trigger back until a time")
    snooze.add_argument("trigger", help="the trigger's id, or the identifier of a pending one")
    add_scope_flags(snooze)
    add_json_flag(snooze)
    until = snooze.add_mutually_exclusive_group(required=True)
    until.add_argument("--until", default=None, metavar="TIME", help="not offered before this time")
    until.add_argument("--for", dest="for_", default=None, metavar="DURATION", help="not offered for this long")
    snooze.set_defaults(handler=lambda a: anyio.run(_snooze, a))
    register_due(actions)


def _instant(value: str | None) -> str | float | None:
    """A CLI time: epoch seconds when it is a number, else the ISO text (validated by the layer)."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return value


def _embedding(text: str | None) -> Any:
    """``--embedding``'s JSON list (checked by the write, which names the field), or None."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValidationError("embedding", f"must be a JSON list of numbers ({exc})") from None


def _line(t: Trigger) -> str:
    when = (f"due {t.due_at.isoformat()}" if t.due_at is not None
            else f"on {t.on_tool} {t.same_args or ''}{f' where {t.where}' if t.where else ''}".rstrip()
            if t.kind == "event" else f"when: {t.condition}")
    when += "  (once)" if t.once else ""
    extra = "".join(f"  {label} {at.isoformat()}" for label, at in (("expires", t.expires_at),
                                                                      ("snoozed until", t.snoozed_until)) if at)
    done = f"  [{t.resolution or 'resolved'}]" if t.status == "resolved" else ""
    return f"{t.id}  {t.kind:<5}  {when}  ->  {t.task}{extra}{done}"


async def _list(args: argparse.Namespace) -> int:
    async with open_store() as store:
        await notice_if_empty(store, args.tenant)
        layer = ProspectiveLayer(store)
        if args.done:
            triggers = await layer.get_done(scope_of(args))
        elif args.now:
            triggers = await layer.get_offerable(scope_of(args), write_id=args.write_id)
        else:
            triggers = await layer.get_pending(scope_of(args), write_id=args.write_id)
    data = [t.model_dump(mode="json") for t in triggers]
    emit(args, data, "\n".join(map(_line, triggers)) or "(no triggers)")
    return 0


async def _add(args: argparse.Namespace) -> int:
    async with open_store() as store:
        trigger_id = await ProspectiveLayer(store).set_trigger(
            scope_of(args), task=args.task, condition=args.condition, kind=args.kind,
            due_at=_instant(args.due_at), due_in=args.due_in, expires_at=_instant(args.expires_at),
            recurrence=args.recurrence, on_tool=args.on_tool, same_args=args.same_args,
            where=args.where, once=args.once, embedding=_embedding(args.embedding), identifier=args.identifier,
            write_id=args.write_id)
    emit(args, {"id": trigger_id}, trigger_id)
    return 0


_DONE = {"ack": "acknowledged", "resolve": "acknowledged", "cancel": "cancelled"}


async def _change(args: argparse.Namespace, name: str) -> int:
    async with open_store() as store:
        layer = ProspectiveLayer(store)
        if name == "cancel":
            await layer.cancel_trigger(scope_of(args), args.trigger)
            following = None
        else:
            following = await layer.ack_trigger(scope_of(args), args.trigger)
    text = f"{_DONE[name]} {args.trigger}" + (f"; next occurrence {following}" if following else "")
    emit(args, {"trigger": args.trigger, "done": _DONE[name], "next": following}, text)
    return 0


async def _snooze(args: argparse.Namespace) -> int:
    until: str | float | None = _instant(args.until)
    if args.for_ is not None:
        until = time.time() + _time.seconds("--for", args.for_)
    assert until is not None
    async with open_store() as store:
        await ProspectiveLayer(store).snooze_trigger(scope_of(args), args.trigger, until)
    at = _time.instant("--until", until).isoformat()
    emit(args, {"trigger": args.trigger, "until": at}, f"snoozed {args.trigger} until {at}")
    return 0
