"""Graph shape: the records of each node type (skills, preconditions, triggers, facts), the scope, and their bounds.

The ground floor of the house: these modules import only ``symfonic_graph.errors``
and each other, never the store or anything above it.
"""
