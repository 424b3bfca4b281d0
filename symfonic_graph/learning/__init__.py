"""Learning: rules from what agents did. Traces read from files, rules mined from them, rules replayed on them.

Built on the rules (the gate's decisions, the conversation reader); nothing
here writes: a mined rule is a proposal an operator approves.
"""
