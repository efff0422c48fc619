#!/usr/bin/env python3
"""Writes a synthetic VIZ dump (docs/viz-format.md) with 100,000 matches, for the viewer's load tests.

Call 0 rewrites x+0 to x+50000 in 50,000 matches (one constant at a time); 500 more calls, in
50 groups (some nested, every fifth call at depth 1), take y+0 to y+100 in 100 matches each.
usage: make_large_dump.py OUT.json [BIG_CALL_MATCHES] [CALLS] [MATCHES_PER_CALL]
"""
import json
import sys


def main():
    out = sys.argv[1]
    big = int(sys.argv[2]) if len(sys.argv) > 2 else 50000
    ncalls = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    per = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    nodes = []

    def node(op, src=(), arg="None", dtype="dtypes.index"):
        nodes.append({"id": len(nodes), "op": op, "dtype": dtype, "src": list(src), "arg": arg, "tag": None})
        return len(nodes) - 1

    x = node("DEFINE_VAR", arg="('x', 0, 100)")
    y = node("DEFINE_VAR", arg="('y', 0, 100)")
    consts = [node("CONST", arg=str(i)) for i in range(max(big, per) + 1)]
    xs = [node("ADD", (x, consts[i])) for i in range(big + 1)]
    ys = [node("ADD", (y, consts[i])) for i in range(per + 1)]
    rule = {"name": "bump#0", "file": "rules/bump.rw", "line": 3, "source": "Add[x, c:Const] => x + (c + 1)"}

    def call(cid, group, depth, chain, n):
        return {"id": cid, "group": group, "name": "bump", "location": "make_large_dump.py:1", "depth": depth,
                "mode": "pm", "root": chain[0], "result": chain[n],
                "matches": [{"before": chain[i], "after": chain[i + 1], "rule": rule, "ns": 100 + i % 50}
                            for i in range(n)]}

    groups = [{"id": 0, "name": "big", "parent": None}]
    calls = [call(0, 0, 0, xs, big)]
    for g in range(50):
        groups.append({"id": len(groups), "name": f"batch {g}", "parent": None if g % 10 == 0 else 1 + g - g % 10})
    for i in range(ncalls):
        group = 1 + (i * 50) // max(ncalls, 1)
        depth = 1 if i % 5 == 1 else 0
        calls.append(call(len(calls), group, depth, ys, per))
    doc = {"format": "tinyrw-viz", "version": 1, "nodes": nodes, "groups": groups, "calls": calls}
    with open(out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{out}: {len(calls)} calls, {sum(len(c['matches']) for c in calls)} matches, {len(nodes)} nodes")


if __name__ == "__main__":
    main()
