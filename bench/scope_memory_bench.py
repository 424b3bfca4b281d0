"""What one cached scope costs a TurnMemory, in bytes (a script, not a test).

Run ``eval "$(symfonic-graph server start)"`` first, then::

    python -m bench.scope_memory_bench            # 500 tenants, 500 end users of one tenant
    python -m bench.scope_memory_bench --quick    # 100 of each

Each tenant holds ``--skills`` (20) tenant-wide skills shaped like
``turn_bench``'s and ``--triggers`` (3) tenant-wide reminders. Two figures,
each measured with ``tracemalloc`` around the ``begin()`` calls of one
``TurnMemory`` and divided by the number of scopes:

* **tenant scope**: one turn in each of ``--n`` tenants (every tenant's
  catalog is its own);
* **namespaced scope**: one turn for each of ``--n`` end users of a tenant
  whose catalog is already cached, each end user holding ``--own`` (3)
  reminders of its own besides the tenant's.

Every tenant the run creates (``bench-mem-<hex>-...``) is deleted at the end.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import tracemalloc
import uuid

import anyio

from bench.turn_bench import Env, grow, limited
from symfonic_graph import GraphMemoryStore, MemoryScope
from symfonic_graph.memory.layers.prospective import trigger_row
from symfonic_graph.memory.turn import TurnMemory


async def per_scope(memory: TurnMemory, scopes: list[MemoryScope]) -> float:
    """Bytes held per scope after one ``begin()`` in each of ``scopes``."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]

    async def one(i: int) -> None:
        await memory.begin(scopes[i])

    await limited(len(scopes), 16, one)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held / len(scopes)


async def main(args: argparse.Namespace) -> None:
    uri = os.environ["NEO4J_URI"]
    auth = (os.environ.get("NEO4J_USER", "neo4j"), os.environ["NEO4J_PASSWORD"])
    prefix = f"bench-mem-{uuid.uuid4().hex[:8]}"
    async with GraphMemoryStore.connect(uri, *auth, database=os.environ.get("NEO4J_DATABASE") or None,
                                        query_timeout=120.0) as store:
        env = Env(store, prefix, args.skills, args.triggers)
        try:
            await grow(env, args.n, per_tx=20)
            home = MemoryScope(env.tenants[0])
            users = [MemoryScope(home.tenant_id, f"user-{i}") for i in range(args.n)]
            rows = [trigger_row(u, condition=f"mentions order {k}", task=f"Ask about order {k}.")
                    for u in users for k in range(args.own)]
            for i in range(0, len(rows), 5000):
                await store.write([("triggers_write", {"rows": rows[i:i + 5000]})])
            warmup = TurnMemory(store, max_scopes=10 * args.n)
            await warmup.begin(MemoryScope(env.tenants[-1]))  # code paths and query texts loaded once
            memory = TurnMemory(store, max_scopes=10 * args.n)
            tenant = await per_scope(memory, [MemoryScope(t) for t in env.tenants])
            random.Random(0).shuffle(users)
            namespaced = await per_scope(memory, users)
            print(f"{args.skills} skills and {args.triggers} reminders per tenant, {args.own} of each end user's own")
            print(f"  tenant scope     : {tenant / 1024:6.1f} KB per cached scope ({args.n} tenants)")
            print(f"  namespaced scope : {namespaced / 1024:6.1f} KB per cached scope "
                  f"({args.n} end users of one tenant)")
        finally:
            for tenant_id in env.tenants:
                await store.erase(MemoryScope(tenant_id))

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=500, help="tenants, and end users of one tenant")
    parser.add_argument("--skills", type=int, default=20)
    parser.add_argument("--triggers", type=int, default=3)
    parser.add_argument("--own", type=int, default=3, help="reminders of each end user's own")
    parser.add_argument("--quick", action="store_true", help="100 tenants and end users")
    ns = parser.parse_args()
    if ns.quick:
        ns.n = 100
    anyio.run(main, ns)
