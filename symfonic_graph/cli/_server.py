"""``symfonic-graph server start|stop|status``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from symfonic_graph.server import LocalNeo4j


def register(sub: Any) -> None:
    server = sub.add_parser("server", help="run a local Neo4j for development and tests (no Docker needed)")
    actions = server.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("start", help='start (or reuse) it; use as: eval "$(symfonic-graph server start)"')
    start.add_argument("--port", type=int, default=7687, help="Bolt port on 127.0.0.1 (default 7687)")
    start.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for Bolt (default 180)")
    start.set_defaults(handler=_start)
    stop = actions.add_parser("stop", help="stop the server this folder started (by its pid file)")
    stop.set_defaults(handler=_stop)
    status = actions.add_parser("status", help="whether it runs, its version and URI")
    status.set_defaults(handler=_status)


def _start(args: argparse.Namespace) -> int:
    print("starting Neo4j (the first start downloads it from Maven Central)...", file=sys.stderr)
    state = LocalNeo4j().start(port=args.port, timeout=args.timeout)
    print(f"Neo4j {state.version} is up on {state.uri} (pid {state.pid})", file=sys.stderr)
    print(state.exports())
    return 0


def _stop(args: argparse.Namespace) -> int:
    stopped = LocalNeo4j().stop()
    print("stopped" if stopped else "not running")
    return 0


def _status(args: argparse.Namespace) -> int:
    state = LocalNeo4j().state()
    if state is None:
        print("not running")
        return 1
    print(f"running: Neo4j {state.version} at {state.uri} (pid {state.pid}, data in {state.home})")
    return 0
