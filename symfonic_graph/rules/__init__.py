"""Rules: the pure enforcement core, from a skill's preconditions to the gate's decision.

Reading a conversation once (``_messages``), the pure checks (``preconditions``),
a catalog compiled into rules (``ruleset``), the gate and its decisions (``gate``),
the pre-flight block (``preflight``) and rules checked against an agent's tools
(``lint``). Nothing here touches the store: every input is a value.
"""
