"""The driver side: transport, typed failures, the write protocol, keys and guards, schema, markers, staging.

Its users import from here; the modules inside import each other directly.
"""

from symfonic_graph._store.changes import skill_change, who
from symfonic_graph._store.guards import held_keys, owned_by, refuse_held_keys, refuse_published
from symfonic_graph._store.keys import (
    MAX_COUNT,
    MAX_KEY_PART,
    check_write_id,
    content_key,
    new_id,
    positive_count,
    skill_key,
    staged_keys,
    tenant_token,
    trigger_key,
)
from symfonic_graph._store.staging import STAGE_BATCH
from symfonic_graph._store.steps import Check, Row, Statement, Step, Written
from symfonic_graph._store.store import GraphMemoryStore
from symfonic_graph._store.transport import within_deadline

__all__ = [
    "MAX_COUNT",
    "MAX_KEY_PART",
    "STAGE_BATCH",
    "Check",
    "GraphMemoryStore",
    "Row",
    "Statement",
    "Step",
    "Written",
    "check_write_id",
    "content_key",
    "held_keys",
    "new_id",
    "owned_by",
    "positive_count",
    "refuse_held_keys",
    "refuse_published",
    "skill_change",
    "skill_key",
    "staged_keys",
    "tenant_token",
    "trigger_key",
    "who",
    "within_deadline",
]
