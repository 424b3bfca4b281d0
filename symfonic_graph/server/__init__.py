"""The local development Neo4j (``symfonic-graph server start|stop|status``)."""

from symfonic_graph.server._local import LocalNeo4j, ServerState, checkout_root, default_home

__all__ = ["LocalNeo4j", "ServerState", "checkout_root", "default_home"]
