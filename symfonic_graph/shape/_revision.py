"""What the library last wrote of a skill: a digest of its content, carried in its revision stamp.

A library write stamps a skill and its preconditions with ``symfonic_rev``,
``"<uuid>:<digest>/<count>"``: the uuid tells one write from another (torn
reads), the digest is a hash of the content written (label, steps, action
tool, context, source and every precondition node with its position). A
skill whose graph no longer hashes to its stamp's digest was edited by hand
since: ``doctor`` names it, and ``seed`` says it reverted a hand edit. Stamps
of earlier releases (``"<uuid>/<count>"``) carry no digest: nothing is
compared.

Example:
    >>> content = {"label": "Refund", "steps": ["refund"], "action_tool": "refund", "context": "",
    ...            "source": "authored:ops", "preconditions": []}
    >>> rev = revision("0b7c", content)
    >>> rev_digest(rev) == content_digest(content)
    True
    >>> rev_digest("0b7c/0") is None
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["content_digest", "graph_digest", "rev_digest", "revision"]

_SKILL_FIELDS = ("label", "steps", "action_tool", "context", "source")
_PRECONDITION_FIELDS = ("position", "kind", "tool", "same_args", "within", "tools", "path", "op", "value",
                        "if_missing", "text")
_NEWER_FIELDS = ("same_args_from", "where", "latest", "voided_by", "message", "alternatives", "max_calls",
                 "max_sum", "sum", "per", "window")
"""The :Precondition columns of the rules over results, arguments and counts: they count in a digest only
when set, so the digest of a node written before them is unchanged."""


def _digest(skill: Mapping[str, Any], preconditions: Sequence[Mapping[str, Any]]) -> str:
    body = [[skill.get(k) for k in _SKILL_FIELDS],
            [[p.get(k) for k in _PRECONDITION_FIELDS] + [[k, p[k]] for k in _NEWER_FIELDS if p.get(k) is not None]
             for p in preconditions]]
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def content_digest(content: Mapping[str, Any]) -> str:
    """The digest of a write row's content (``preconditions`` as the node rows written)."""
    return _digest(content, content.get("preconditions") or [])


def revision(write: str, content: Mapping[str, Any]) -> str:
    """The ``symfonic_rev`` of one write of ``content``: ``"<write>:<digest>/<count>"``."""
    return f"{write}:{content_digest(content)}/{len(content.get('preconditions') or [])}"


def rev_digest(rev: object) -> str | None:
    """The content digest a stamp carries, or None (no stamp, or a stamp of an earlier release)."""
    if not isinstance(rev, str):
        return None
    head, _, _ = rev.rpartition("/")
    _, colon, digest = head.partition(":")
    return digest or None if colon else None


def graph_digest(row: Mapping[str, Any]) -> str:
    """The digest of a skill as the graph holds it: one ``skill_row`` projection, in position order."""
    skill = row.get("skill")
    raw = row.get("preconditions") or []
    return _digest(skill if isinstance(skill, Mapping) else {}, [p for p in raw if isinstance(p, Mapping)])
