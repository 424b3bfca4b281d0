"""Times and durations of write input: an instant is an aware datetime, a duration a number of seconds.

A trigger's ``due_at``, ``expires_at`` and a snooze's ``until`` take an aware
``datetime``, epoch seconds, or an ISO 8601 string with an offset (a seed
file); ``due_in`` takes a ``timedelta``, seconds, or ``30m``, ``2h``, ``1d``,
``1w``. Instants are stored as epoch milliseconds on the write row and
become Neo4j ``DATETIME`` values (UTC) in the query.

Example:
    >>> instant("due_at", 0).isoformat(), seconds("due_in", "90m")
    ('1970-01-01T00:00:00+00:00', 5400.0)
    >>> instant("due_at", datetime(2026, 1, 1))
    Traceback (most recent call last):
    ...
    symfonic_graph.errors.ValidationError: due_at: must be timezone-aware (a naive datetime has no instant)
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

from symfonic_graph.errors import ValidationError

__all__ = ["MAX_EPOCH", "epoch_millis", "from_millis", "instant", "seconds"]

MAX_EPOCH = 253402300799.0
"""The last second of year 9999: later instants are refused."""
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def instant(field: str, value: object) -> datetime:
    """``value`` as an aware UTC datetime; a ``ValidationError`` naming ``field`` otherwise."""
    if isinstance(value, bool):
        raise ValidationError(field, "must be an aware datetime or epoch seconds, not a bool")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or not 0 <= value <= MAX_EPOCH:
            raise ValidationError(field, f"must be epoch seconds from 0 to {MAX_EPOCH:.0f}, got {value!r}")
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValidationError(field, f"must be an ISO 8601 time with an offset, got {value!r}") from None
    if not isinstance(value, datetime):
        raise ValidationError(field, f"must be an aware datetime or epoch seconds, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(field, "must be timezone-aware (a naive datetime has no instant): add an offset, "
                                     "e.g. 2031-06-01T09:00+02:00 or 2031-06-01T09:00Z")
    return value.astimezone(UTC)


def seconds(field: str, value: object) -> float:
    """A positive duration (``timedelta``, seconds, or ``30m``/``2h``/``1d``/``1w``) in seconds."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            raise ValidationError(field, f"must be a duration such as 30m, 2h, 1d, 1w or seconds, got {value!r}")
        value = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(field, f"must be a timedelta or seconds, got {type(value).__name__}")
    if not math.isfinite(value) or not 0 <= value <= MAX_EPOCH:
        raise ValidationError(field, f"must be from 0 to {MAX_EPOCH:.0f} seconds, got {value!r}")
    return float(value)


def epoch_millis(value: datetime) -> int:
    """Milliseconds since the epoch of an aware datetime (what a write row carries)."""
    return round(value.timestamp() * 1000)


def from_millis(value: int) -> datetime:
    """The aware UTC datetime of epoch milliseconds."""
    return datetime.fromtimestamp(value / 1000, UTC)
