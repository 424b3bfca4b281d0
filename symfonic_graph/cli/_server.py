"""``symfonic-graph server start|stop|status``.

The server's home is ``$SYMFONIC_GRAPH_HOME``, else ``.symfonic-graph`` at the
root of the checkout the current folder is in (any subfolder works), else the
nearest ``.symfonic-graph`` above, else ``./.symfonic-graph``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from symfonic_graph.errors import SymfonicGraphError
from symfonic_graph.server import LocalNeo4j
from symfonic_graph.server._local import DEFAULT_PORT, PORT_VARIABLE


def register(sub: Any) -> None:
    server = sub.add_parser("server", help="run a local Neo4j for development and tests (no Docker needed)")
    actions = server.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("start", help='start (or reuse) it; use as: eval "$(symfonic-graph server start)"')
    start.add_argument(
        "--port", type=int, default=None,
        help=f"Bolt port on 127.0.0.1 (default: ${PORT_VARIABLE} when set, else the running server's, "
             f"else {DEFAULT_PORT}); another port than the running server's is an error",
    )
    start.add_argument(
        "--port-variable", default=PORT_VARIABLE, metavar="NAME",
        help=f"the environment variable that holds the port when --port is not given (default {PORT_VARIABLE})",
    )
    start.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for Bolt (default 180)")
    start.set_defaults(handler=_start)
    stop = actions.add_parser("stop", help="stop the server of this checkout (or of $SYMFONIC_GRAPH_HOME)")
    stop.set_defaults(handler=_stop)
    status = actions.add_parser("status", help="whether it runs, its version and URI (exit 1 when not running)")
    status.add_argument("--uri", action="store_true", help="print only its Bolt URI")
    status.set_defaults(handler=_status)


def _server() -> LocalNeo4j:
    server = LocalNeo4j()
    server.on_wait = lambda message: print(message, file=sys.stderr)
    return server


def _start(args: argparse.Namespace) -> int:
    server = _server()
    if server.state() is None:
        print(f"starting Neo4j in {server.home} (the first start downloads it from Maven Central)...",
              file=sys.stderr)
    try:
        state = server.start(port=args.port, timeout=args.timeout, port_variable=args.port_variable)
    except KeyboardInterrupt:
        print("interrupted: the starting Neo4j was stopped", file=sys.stderr)
        _failed_eval()
        return 130
    except SymfonicGraphError:
        _failed_eval()
        raise
    print(f"Neo4j {state.version} is up on {state.uri} (pid {state.pid}, data in {state.home})", file=sys.stderr)
    print(state.exports())
    return 0


def _failed_eval() -> None:
    """Under ``eval "$(symfonic-graph server start)"``, make the failure visible to the shell.

    The exports are what ``eval`` runs; on a failure there are none, and a
    later command would die on a missing ``NEO4J_URI``. So print a line that
    ``eval`` runs instead: it says nothing was exported and returns non-zero.
    """
    if not sys.stdout.isatty():
        print("echo 'symfonic-graph: the local Neo4j did not start (the error above says why); "
              "NEO4J_URI was not exported' >&2; false")


def _stop(args: argparse.Namespace) -> int:
    server = _server()
    stopped = server.stop()
    print(f"stopped the Neo4j of {server.home}" if stopped else f"not running (no server recorded in {server.home})")
    return 0


def _status(args: argparse.Namespace) -> int:
    server = LocalNeo4j()
    state = server.recorded()
    if state is None:
        if not args.uri:
            print(f"not running (no server recorded in {server.home})")
        return 1
    if not state.ready:
        if not args.uri:
            print(f"starting (or left by an interrupted start): pid {state.pid} on {state.uri}, data in {state.home}; "
                  f"`{server.stop_command()}` ends it")
        return 1
    if args.uri:
        print(state.uri)
    else:
        print(f"running: Neo4j {state.version} at {state.uri} (pid {state.pid}, data in {state.home})")
    return 0
