"""A trigger's ``recurrence``: one RFC 5545 RRULE, evaluated with python-dateutil from the first due time.

The rule is written without ``DTSTART`` (the trigger's first ``due_at`` is
the start); ``RRULE:`` in front is accepted and dropped. Acknowledging an
occurrence makes the next one due at :func:`next_occurrence`.

Example:
    >>> from datetime import UTC, datetime
    >>> start = datetime(2031, 5, 5, 9, tzinfo=UTC)  # a Monday
    >>> rule("recurrence", "RRULE:FREQ=WEEKLY;BYDAY=MO")
    'FREQ=WEEKLY;BYDAY=MO'
    >>> next_occurrence("FREQ=WEEKLY;BYDAY=MO", start, after=datetime(2031, 5, 20, tzinfo=UTC)).isoformat()
    '2031-05-26T09:00:00+00:00'
"""

from __future__ import annotations

from datetime import UTC, datetime

from dateutil.rrule import rrule, rrulestr

from symfonic_graph.errors import ValidationError

__all__ = ["next_occurrence", "rule"]

_REFUSED = ("DTSTART", "RDATE", "EXDATE", "EXRULE", "\n", "\r")


def rule(field: str, value: object, start: datetime | None = None) -> str:
    """``value`` as one RRULE body (``FREQ=...``), checked by parsing it; a ``ValidationError`` naming ``field``."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(field, "must be an RRULE such as FREQ=WEEKLY;BYDAY=MO")
    body = value.strip()
    if body.upper().startswith("RRULE:"):
        body = body[len("RRULE:"):]
    if any(word in body.upper() for word in _REFUSED):
        raise ValidationError(field, "must be one RRULE without DTSTART (the first due_at is the start), "
                                     "e.g. FREQ=DAILY;COUNT=5")
    try:
        parsed = rrulestr(body, dtstart=start or datetime(2000, 1, 1, tzinfo=UTC))
    except (ValueError, TypeError) as exc:
        raise ValidationError(field, f"is not a valid RRULE ({exc})") from None
    if not isinstance(parsed, rrule):
        raise ValidationError(field, "must be one RRULE")
    return body


def next_occurrence(body: str, start: datetime, *, after: datetime) -> datetime | None:
    """The first occurrence of ``body`` (started at ``start``) strictly after ``after``, or None when it ended."""
    found = rrulestr(body, dtstart=start).after(after, inc=False)
    return found if isinstance(found, datetime) else None
