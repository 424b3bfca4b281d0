"""Memory: what an agent reads each turn and what it writes.

A turn's one read (``turn``, with ``_catalog`` compiling shipped rows and
``_coalesce`` batching concurrent turns), where a turn finds its scope
(``turn_scope``), pending reminders (``triggers``), full-text recall
(``recall``), prompt composition (``composition``) and the write layers
(``layers/``). Built on the store and the rules below it.
"""
