"""The ``symfonic-graph`` command.

Exit codes: 0 success, 1 the command ran and found a problem (e.g. ``doctor
--strict``), 2 bad usage or input, 3 Neo4j unavailable or the local server
could not run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from symfonic_graph.cli import _inspect, _operator, _server, _store_commands
from symfonic_graph.errors import LocalServerError, StoreUnavailableError, SymfonicGraphError

EXIT_OK, EXIT_FOUND, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="symfonic-graph",
        description="Procedural and prospective memory for multi-tenant agents, in Neo4j.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _server.register(sub)
    _store_commands.register(sub)
    _operator.register(sub)
    _inspect.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except (StoreUnavailableError, LocalServerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except (SymfonicGraphError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())
