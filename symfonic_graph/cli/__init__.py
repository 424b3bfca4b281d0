"""The ``symfonic-graph`` command.

Exit codes: 0 success, 1 the command ran and found a problem (e.g. ``doctor
--strict``), 2 any error: bad usage or input, bad credentials, Neo4j
unreachable or refusing a query, the local server unable to run. An error is
reported as exactly one line on stderr (``error: ...``), never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from neo4j.exceptions import DriverError, Neo4jError

from symfonic_graph.cli import (
    _decisions,
    _inspect,
    _operator,
    _rules,
    _rules_trust,
    _server,
    _store_commands,
    _tenants,
    _triggers,
)
from symfonic_graph.cli._common import one_line
from symfonic_graph.errors import SymfonicGraphError

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2  # argparse also exits 2 on bad usage


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="symfonic-graph",
        description="Procedural and prospective memory for multi-tenant agents, in Neo4j.",
        epilog="Exit codes: 0 ok, 1 a problem was found (doctor --strict), 2 an error (one line on stderr).",
    )
    parser.add_argument("--version", action="version", version=f"symfonic-graph {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _server.register(sub)
    _store_commands.register(sub)
    _operator.register(sub)
    _triggers.register(sub)
    skills = _group(sub, "skills", "list skills; approve, reject, shadow or enforce one")
    _operator.register_skills(skills)
    _inspect.register(sub)
    _tenants.register(sub)
    rules = _group(sub, "rules", "check a scope's rules, replay them over recorded conversations, mine new ones")
    _rules.register(rules)
    _rules_trust.register(rules, skills)
    _decisions.register(sub, rules)
    return parser


def _group(sub: Any, name: str, helptext: str) -> Any:
    """A command whose actions several modules add (``skills``, ``rules``): its action subparsers."""
    return sub.add_parser(name, help=helptext).add_subparsers(dest="action", required=True, metavar="ACTION")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("symfonic-graph")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    # The library reports every failure as one typed error; the driver's own
    # log lines (retries, routing failures) would only repeat it, at length.
    logging.getLogger("neo4j").setLevel(logging.CRITICAL)
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except (SymfonicGraphError, ValueError) as exc:
        print(f"error: {one_line(exc) or type(exc).__name__}", file=sys.stderr)
        return EXIT_ERROR
    except (Neo4jError, DriverError) as exc:  # a command that used the driver directly
        print(f"error: Neo4j: {one_line(exc) or type(exc).__name__}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as the Python docs advise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())
