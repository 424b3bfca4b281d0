"""Helpers shared by the operator commands: scope flags and output."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any

from symfonic_graph.shape.scope import MemoryScope


def add_scope_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", required=True, help="tenant id (exact)")
    parser.add_argument("--namespace", default=None, help="namespace inside the tenant (default: tenant-wide)")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")


def add_who_flags(parser: argparse.ArgumentParser, *, reason: bool = True) -> None:
    """``--actor`` (default: the OS user) and ``--reason``: recorded with the change (``skills history``)."""
    parser.add_argument("--actor", default=None, help="who makes the change (default: the OS user)")
    if reason:
        parser.add_argument("--reason", default=None, help="why (recorded with the change)")


def actor_of(args: argparse.Namespace) -> str | None:
    """``--actor``, else the OS user, else None (unknown)."""
    if args.actor is not None:
        return str(args.actor)
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in the environment nor the password database
        return None


def scope_of(args: argparse.Namespace) -> MemoryScope:
    return MemoryScope(args.tenant, args.namespace)


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """Print ``data`` as JSON under ``--json``, else ``text``."""
    print(json.dumps(data, default=str, indent=None) if getattr(args, "json", False) else text)


class Progress:
    """A one-line progress bar on stderr, shown only for long work."""

    def __init__(self, total: int, label: str, *, threshold: int = 200) -> None:
        self.total, self.label, self.done = total, label, 0
        self.visible = (total >= threshold and sys.stderr.isatty()) or total >= threshold * 10

    def advance(self, n: int) -> None:
        self.done += n
        if self.visible:
            width = 30
            filled = int(width * self.done / max(self.total, 1))
            bar = "#" * filled + "-" * (width - filled)
            print(f"\r{self.label} [{bar}] {self.done}/{self.total}", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.visible:
            print(file=sys.stderr)


def one_line(message: object) -> str:
    """``message`` on one line: newlines and runs of whitespace become one space.

    Example:
        >>> one_line("Invalid input '(':\\n  RETURN nonsense(")
        "Invalid input '(': RETURN nonsense("
    """
    return " ".join(str(message).split())
