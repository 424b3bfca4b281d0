"""Identifiers and keys: node ids, staging write ids, and the unique keys of skills, triggers and tenants.

Every key a write takes is derived here, from the scope and the entry, never
from text a caller assembles.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from symfonic_graph.errors import ValidationError
from symfonic_graph.shape import _validate as v
from symfonic_graph.shape._limits import MAX_KEY_PART as MAX_KEY_PART
from symfonic_graph.shape.scope import MemoryScope

# The largest count a limit takes (Cypher integers are 64-bit).
MAX_COUNT = 2**62


def new_id() -> str:
    """A fresh node id."""
    return str(uuid.uuid4())


def check_write_id(write_id: object) -> str | None:
    """Validate an optional staging ``write_id``."""
    if write_id is None:
        return None
    if not isinstance(write_id, str) or not write_id:
        raise ValidationError("write_id", "must be a non-empty string or None")
    v.encodable("write_id", write_id)
    if len(write_id) > MAX_KEY_PART:
        raise ValidationError("write_id", f"must be at most {MAX_KEY_PART} characters")
    return write_id


def required_write_id(write_id: object) -> str:
    checked = check_write_id(write_id)
    if checked is None:
        raise ValidationError("write_id", "must be a non-empty string")
    return checked


def positive_count(field: str, value: object, *, most: int = MAX_COUNT) -> int:
    """``value`` if it is an int from 1 to ``most``, else a ValidationError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ValidationError(field, f"must be a whole number from 1 to {most}, got {value!r}")
    return value


def tenant_token(tenant_id: str) -> str:
    """The exact tenant token recall searches: ``t`` + the SHA-256 hex digest of the id.

    One alphanumeric word, so the full-text analyzer keeps it whole and a
    ``+symfonic_tenant_token:<token>`` clause matches this tenant only
    (``acme`` never matches ``acme-eu``, and ``---`` is a token like any other).

    Example:
        >>> tenant_token("acme")[:9], len(tenant_token("acme"))
        ('t822b33ad', 65)
    """
    return "t" + hashlib.sha256(tenant_id.encode("utf-8", "surrogatepass")).hexdigest()


def skill_key(scope: MemoryScope, identifier: str | None, fallback_id: str) -> str:
    """The unique key of a skill: (tenant, namespace, identifier), or its id."""
    if identifier is None:
        return json.dumps(["id", fallback_id], ensure_ascii=False)
    return json.dumps(["skill", scope.tenant_id, scope.namespace, identifier], ensure_ascii=False)


def trigger_key(scope: MemoryScope, identifier: str | None, fallback_id: str) -> str:
    """The unique key of a trigger: (tenant, namespace, identifier), or its id."""
    if identifier is None:
        return json.dumps(["trigger-id", fallback_id], ensure_ascii=False)
    return json.dumps(["trigger", scope.tenant_id, scope.namespace, identifier], ensure_ascii=False)


def content_key(kind: str, scope: MemoryScope, content: dict[str, Any]) -> str:
    """A stable key for an entry without an identifier: the hash of its validated content (seed files)."""
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]
    return json.dumps([f"{kind}-content", scope.tenant_id, scope.namespace, digest], ensure_ascii=False)


def staged_keys(key: str, write_id: str | None, *, stable: bool) -> tuple[str, str | None]:
    """``(key, base_key)`` of a write: a staged write of a stable key (an identifier, or content)
    waits beside the live node under a suffixed key until publish hands it the base key."""
    if write_id is not None and stable:
        return key + "\u0000staged:" + write_id, key
    return key, None
