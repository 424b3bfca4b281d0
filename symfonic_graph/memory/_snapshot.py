"""A scope's last rules on local disk, for a process that starts while the store is down.

``TurnMemory(store, snapshot_dir=...)`` keeps, per scope, the last catalog it
read in one JSON file: the skills as typed ``Skill`` records, the tools its
rules guarded, the catalog version and the wall-clock time the skills were
read. The file is named by a hash of (tenant, namespace), written through a
temporary file and ``os.replace`` (a reader never sees half a file), and read
only during an outage, once per scope. A file that cannot be read, or that
names another scope, is treated as absent, with a WARNING.

Example:
    >>> folder = SnapshotDir(tmp_path)  # doctest: +SKIP
    >>> folder.save(MemoryScope("acme"), 7, rules, read_at=time.time())  # doctest: +SKIP
    >>> folder.load(MemoryScope("acme")).guarded  # doctest: +SKIP
    frozenset({'cancel_reservation'})
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError as PydanticValidationError

from symfonic_graph.errors import StoreUnavailableError, ValidationError
from symfonic_graph.rules.ruleset import RuleSet
from symfonic_graph.shape.models import Skill
from symfonic_graph.shape.names import is_tool_name
from symfonic_graph.shape.scope import MemoryScope

__all__ = ["FORMAT", "Saved", "SnapshotDir", "guarded_by", "name_guarded"]

log = logging.getLogger("symfonic_graph.turn")

FORMAT: Final = 1
"""The snapshot file's format; a file of another format is ignored (with a WARNING)."""
MAX_FILE_BYTES: Final = 256 * 1024 * 1024  # far above a full scope (2,000 skills); a bigger file is no snapshot


def name_guarded(exc: StoreUnavailableError, guarded: frozenset[str] | None) -> StoreUnavailableError:
    """``exc`` (an outage ``TurnMemory`` cannot bridge), naming in ``exc.guarded`` the tools to refuse.

    ``guarded`` is what the scope's rules guarded when last seen (in memory or
    in the snapshot file, however old), None when the scope was never seen:
    what the gate's ``strict="guarded"`` refuses. The error keeps its type and
    cause.

    Example:
        >>> name_guarded(StoreUnavailableError("down"), frozenset({"deploy"})).guarded
        frozenset({'deploy'})
    """
    exc.guarded = guarded  # type: ignore[attr-defined]  # read with getattr by the gate
    return exc


def guarded_by(rules: RuleSet) -> frozenset[str]:
    """The tools some enforced (not shadow) rule of ``rules`` guards.

    Example:
        >>> sorted(guarded_by(RuleSet([{"metadata": {"action_tool": "deploy", "precondition": ["test"]}}])))
        ['deploy']
    """
    return frozenset(rule.action_tool for rule in rules.rules if rule.action_tool is not None and not rule.shadow)


@dataclass(frozen=True, slots=True)
class Saved:
    """One scope's snapshot as read back from disk."""

    version: int | None
    read_at: float
    """Wall-clock seconds (``time.time()``) when the skills were read from the store."""
    guarded: frozenset[str]
    skills: tuple[Skill, ...] | None
    """None when a skill could not be read back: the rules are then not enforced, ``guarded`` still is."""


class SnapshotDir:
    """The folder of snapshot files, one per scope.

    Raises:
        ValidationError: ``path`` is no path, or names something that is not a folder.
    """

    __slots__ = ("path",)

    def __init__(self, path: str | Path) -> None:
        if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)) or not str(path):
            raise ValidationError("snapshot_dir", f"must be a folder path (str or Path), got {path!r}")
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValidationError("snapshot_dir", f"{str(path)!r} is not a folder this process can create or "
                                  f"use ({exc.strerror or exc}); pass a writable folder") from None

    def file_of(self, scope: MemoryScope) -> Path:
        """The scope's snapshot file: a hash of (tenant, namespace), so no id reaches the file system."""
        key = json.dumps([scope.tenant_id, scope.namespace], ensure_ascii=True)
        return self.path / f"rules-{hashlib.sha256(key.encode('ascii')).hexdigest()[:40]}.json"

    def save(self, scope: MemoryScope, version: int | None, rules: RuleSet, read_at: float) -> bool:
        """Write the scope's snapshot atomically; False (with a WARNING) when it could not be written."""
        target = self.file_of(scope)
        try:
            skills = [_skill(each).model_dump(mode="json") for each in rules]
            text = json.dumps({"format": FORMAT, "tenant_id": scope.tenant_id, "namespace": scope.namespace,
                               "version": version, "read_at": read_at, "guarded": sorted(guarded_by(rules)),
                               "skills": skills}, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            log.warning("rules snapshot of %s not written: its skills are not serialisable (%s)", scope, exc)
            return False
        temp = None
        try:
            with tempfile.NamedTemporaryFile("w", encoding="ascii", dir=self.path, prefix=".rules-",
                                             suffix=".tmp", delete=False) as out:
                temp = out.name
                out.write(text)
            os.replace(temp, target)
            return True
        except OSError as exc:
            log.warning("rules snapshot of %s not written to %s (%s)", scope, target, exc)
            if temp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
            return False

    def load(self, scope: MemoryScope) -> Saved | None:
        """The scope's snapshot, or None: absent, or unreadable (then with a WARNING naming the file)."""
        target = self.file_of(scope)
        try:
            if target.stat().st_size > MAX_FILE_BYTES:
                raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
            data = json.loads(target.read_bytes())
            return _saved(scope, data, target)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("rules snapshot %s of %s is unreadable (%s); treated as absent", target, scope, exc)
            return None


def _skill(value: Any) -> Skill:
    if not isinstance(value, Skill):
        raise TypeError(f"{type(value).__name__} is no Skill")
    return value


def _saved(scope: MemoryScope, data: Any, target: Path) -> Saved:
    """The snapshot held by ``data`` (a file's JSON); ValueError/TypeError/KeyError when it is none."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a rules snapshot of format {FORMAT}")
    if data["tenant_id"] != scope.tenant_id or data["namespace"] != scope.namespace:
        raise ValueError(f"it holds the rules of {data['tenant_id']!r}/{data['namespace']!r}")
    version, read_at, guarded = data["version"], data["read_at"], data["guarded"]
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise ValueError(f"version {version!r} is no integer")
    if isinstance(read_at, bool) or not isinstance(read_at, (int, float)) or not math.isfinite(read_at):
        raise ValueError(f"read_at {read_at!r} is no time")
    if not isinstance(guarded, list) or not all(is_tool_name(tool) for tool in guarded):
        raise ValueError("guarded is no list of tool names")
    rows = data["skills"]
    if not isinstance(rows, list):
        raise ValueError("skills is no list")
    skills: tuple[Skill, ...] | None
    try:
        skills = tuple(Skill.model_validate(row) for row in rows)
    except (PydanticValidationError, ValueError, TypeError) as exc:
        log.warning("rules snapshot %s of %s holds a skill this process cannot read (%s); its rules are not "
                    "enforced, the tools they guarded still count as guarded", target, scope,
                    str(exc).splitlines()[0])
        skills = None
    return Saved(version, float(read_at), frozenset(guarded), skills)
