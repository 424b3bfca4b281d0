"""Integrations: the memory and the gate wired into agent frameworks.

``langgraph`` (the guarded tool node, ``build_agent_graph``), ``langchain``
(``MemoryMiddleware`` for ``create_agent``), and ``_shared``, what both do alike.
"""
