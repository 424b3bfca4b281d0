"""The texts of the gate's error results: what a blocked call tells the model.

Each ends with the gate's content marker, so the gate recognises its own
errors in a history that lost their status and metadata. Ordering blocks say
what to call ("not executed yet: call X, then retry"); facts, checks and
limits that no further call can satisfy say "Not allowed: <message>" so the
model stops retrying and tells the user.
"""

from __future__ import annotations

from collections.abc import Sequence

from symfonic_graph.rules._messages import GATE_CONTENT_MARKER, MISSING_PREFIX, NOT_ALLOWED_PREFIX, UNAVAILABLE_PREFIX

__all__ = ["missing_precondition_content", "not_allowed_content", "unavailable_content"]


def missing_precondition_content(
    action_tool: str,
    missing: Sequence[str],
    label: str | None,
    *,
    failed: Sequence[str] = (),
    unreadable: Sequence[str] = (),
) -> str:
    """The recovery text of a blocked call; its first sentence is fixed by the spec.

    It ends with :data:`GATE_CONTENT_MARKER`, so the gate recognises its own
    errors in a history that lost their status and metadata.

    Example:
        >>> missing_precondition_content("x", ["a", "b"], "L").split(" `")[0]
        'Missing precondition: call a, b before x (skill: L).'
        >>> "failed" in missing_precondition_content("x", ["a"], None, failed=["a"])
        True
        >>> missing_precondition_content("x", ["a (same id)", "b or c"], None).split(" before")[0]
        'Missing precondition: call a (same id) and one of (b or c)'
    """
    if len(missing) > 1 and any(" or " in m for m in missing):
        # An any-of group beside other requirements: all of them are needed, one tool of the group.
        parts = [f"one of ({m})" if " or " in m else m for m in missing]
        tools = ", ".join(parts[:-1]) + " and " + parts[-1]
    else:
        tools = ", ".join(missing)
    skill = f" (skill: {label})" if label else ""
    notes = "".join(
        f"The earlier call of `{tool}` failed, and a failed call does not count. " for tool in dict.fromkeys(failed)
    )
    if unreadable:  # never met: telling the model to call something and retry would loop forever
        reasons = "; ".join(dict.fromkeys(unreadable))
        return (
            f"{MISSING_PREFIX}call {tools} before {action_tool}{skill}. {notes}`{action_tool}` was not executed: "
            f"a misconfigured rule blocks this tool; ask an operator (symfonic-graph doctor reports it: {reasons}). "
            f"Do not retry `{action_tool}` until the rule is fixed. {GATE_CONTENT_MARKER}"
        )
    return (
        f"{MISSING_PREFIX}call {tools} before {action_tool}{skill}. {notes}"
        f"`{action_tool}` was not executed. Call {tools} first and wait for the "
        f"result (calls made in the same batch as `{action_tool}` do not count), "
        f"then retry `{action_tool}`. {GATE_CONTENT_MARKER}"
    )


def not_allowed_content(action_tool: str, refused: Sequence[str], errors: Sequence[str], label: str | None) -> str:
    """The text of a call a fact, check or limit refuses: final, so the model stops retrying and tells the user.

    Example:
        >>> not_allowed_content("cancel", ["Only pending orders can be cancelled."], [], "Cancel").split(" `")[0]
        'Not allowed: Only pending orders can be cancelled. (skill: Cancel)'
    """
    skill = f" (skill: {label})" if label else ""
    if refused:
        reasons = " ".join(_sentence(r) for r in dict.fromkeys(refused))
        return (f"{NOT_ALLOWED_PREFIX}{reasons}{skill} `{action_tool}` was not executed, and no further call "
                f"makes this call allowed: do not retry it; tell the user why. {GATE_CONTENT_MARKER}")
    reasons = "; ".join(dict.fromkeys(errors))
    return (f"{NOT_ALLOWED_PREFIX}a rule could not be evaluated, so `{action_tool}` was not executed{skill}: "
            f"{reasons}. Do not retry `{action_tool}`; tell the user it cannot be done now (an operator can "
            f"see the rule in symfonic-graph doctor). {GATE_CONTENT_MARKER}")


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text[-1:] in ".!?" else text + "."


def unavailable_content(action_tool: str) -> str:
    """The text of a call blocked in strict mode because the skill lookup failed.

    Example:
        >>> unavailable_content("deploy").startswith("Precondition check unavailable")
        True
    """
    return (
        f"{UNAVAILABLE_PREFIX}the precondition store could not be read, so "
        f"`{action_tool}` was not executed. Retry `{action_tool}` later. {GATE_CONTENT_MARKER}"
    )
