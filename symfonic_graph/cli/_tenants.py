"""``symfonic-graph tenants list|erase|erasures``, and the notice for a tenant that holds nothing."""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Any

import anyio

from symfonic_graph._store import GraphMemoryStore
from symfonic_graph.cli._common import actor_of, add_json_flag, add_who_flags, emit
from symfonic_graph.cli._connect import open_store
from symfonic_graph.errors import ValidationError
from symfonic_graph.shape.scope import MemoryScope, describe_scope


def register(sub: Any) -> None:
    tenants = sub.add_parser("tenants", help="list tenants, or erase a tenant or one namespace")
    actions = tenants.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every tenant: namespaces, skills, drafts and rejected rules apart, "
                                                  "triggers, facts, catalog version")
    add_json_flag(listing)
    listing.set_defaults(handler=lambda a: anyio.run(_list, a))
    erase = actions.add_parser(
        "erase", help="delete every node of a tenant (offboarding) or of one namespace (e.g. a GDPR request)",
        description="Deletes for good, in batches. With --namespace: exactly that namespace's nodes (never "
                    "tenant-wide ones or other namespaces). Without: the whole tenant, its catalog included.")
    erase.add_argument("--tenant", required=True, help="tenant id (exact)")
    erase.add_argument("--namespace", default=None, help="erase only this namespace (default: the whole tenant)")
    erase.add_argument("--yes", action="store_true", help="confirm: erasing cannot be undone")
    add_json_flag(erase)
    add_who_flags(erase)
    erase.set_defaults(handler=lambda a: anyio.run(_erase, a))
    erasures = actions.add_parser("erasures", help="the receipts of past erasures: tenant, namespace, counts, "
                                                   "when, who, why")
    erasures.add_argument("--tenant", default=None, help="only this tenant's (default: every tenant's)")
    add_json_flag(erasures)
    erasures.set_defaults(handler=lambda a: anyio.run(_erasures, a))


async def _list(args: argparse.Namespace) -> int:
    async with open_store() as store:
        rows = await store.read("tenants_list")
    lines = [f"{r['tenant_id']}  namespaces={len(r['namespaces'])}  skills={r['skills']}  drafts={r['drafts']}  "
             f"rejected={r['rejected']}  triggers={r['triggers']}  facts={r['facts']}  "
             f"catalog_version={r['catalog_version']}"
             + (f"  ({', '.join(r['namespaces'][:5])}{', ...' if len(r['namespaces']) > 5 else ''})"
                if r["namespaces"] else "")
             for r in rows]
    emit(args, rows, "\n".join(lines) or "(no tenants)")
    return 0


async def _erase(args: argparse.Namespace) -> int:
    scope = MemoryScope(args.tenant, args.namespace)
    what = f"tenant {scope.tenant_id} (whole)" if scope.namespace is None else describe_scope(scope)
    if not args.yes:
        raise ValidationError("--yes", f"erasing {what} deletes its nodes for good; add --yes to confirm")
    async with open_store() as store:
        await notice_if_empty(store, scope.tenant_id)
        counts = await store.erase(scope, actor=actor_of(args), reason=args.reason)
    total = sum(counts.values())
    detail = ", ".join(f"{label} {n}" for label, n in counts.items() if n)
    text = (f"erased {what}: {total} node(s)" + (f" ({detail})" if detail else "") if total
            else f"nothing to erase: {what} holds no node (0 nodes erased)")
    emit(args, {"tenant_id": scope.tenant_id, "namespace": scope.namespace, "whole_tenant": scope.namespace is None,
                "counts": counts}, text)
    return 0


async def _erasures(args: argparse.Namespace) -> int:
    async with open_store() as store:
        rows = await store.erasures(args.tenant)
    lines = [f"{r['at']}  {r['tenant_id']}{'/' + r['namespace'] if r['namespace'] else ' (whole)'}  "
             f"{sum(r['counts'].values())} node(s)  by {r['actor'] or '(unknown)'}"
             + (f": {r['reason']}" if r["reason"] else "") for r in rows]
    emit(args, rows, "\n".join(lines) or "(no erasures)")
    return 0


async def notice_if_empty(store: GraphMemoryStore, tenant_id: str | None, *, doing: str = "") -> None:
    """Print one line on stderr when ``tenant_id`` holds nothing, with the closest existing tenant id.

    A typo in a tenant id otherwise reads as an empty tenant: ``(no skills)``,
    ``allowed``, ``no problems found``.
    """
    if tenant_id is None:
        return
    MemoryScope(tenant_id)  # a bad id is the command's own error
    [row] = await store.read("tenant_holds", tenant_id=tenant_id)
    if row["holds"]:
        return
    [ids] = await store.read("tenant_ids")
    close = difflib.get_close_matches(tenant_id, ids["tenant_ids"], n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else " (`symfonic-graph tenants list` shows the tenants)"
    print(f"notice: tenant {tenant_id!r} holds nothing{doing}{hint}", file=sys.stderr)
