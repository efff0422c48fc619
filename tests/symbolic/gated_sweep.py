#!/usr/bin/env python3
"""Gated wheres for rw simplify: `(x if cond else y)` with cond a conjunction of bounds on the
variables (`a < 5`, `2 <= b`, `not`-style `>=`), x and y index math with // and %. Each batch runs
the compiled rules and the interpreter (--interp): the outputs must be the same text, and must
evaluate in Python to the input's value wherever the input evaluates. With BASE_RW (another rw
binary), each output must also be no longer than BASE_RW's (the rules may only shrink results).

Usage: gated_sweep.py RW [N [SEED [BASE_RW]]]   (N expressions, default 1500)"""
import itertools, random, subprocess, sys

RW = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 12
BASE = sys.argv[4] if len(sys.argv) > 4 else None
rng = random.Random(SEED)
BOX = {'a': (0, 15), 'b': (-4, 9), 'c': (0, 63), 'd': (1, 8)}
BUILTINS = {'__builtins__': {'max': max, 'min': min}}


def bound():
    v = rng.choice(list(BOX))
    lo, hi = BOX[v]
    k = rng.randint(lo - 2, hi + 2)
    return rng.choice([f"{v} < {k}", f"{v} <= {k}", f"{v} > {k}", f"{v} >= {k}", f"{k} < {v}",
                       f"{v}+{rng.randint(1, 3)} < {k}", f"{v}*2 < {k}", f"{v} != {k}"])


def cond():
    cs = [bound() for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.1:
        return f"({cs[0]}) | ({bound()})"
    return '&'.join(f"({c})" for c in cs)


def term():
    v = rng.choice(list(BOX))
    r = rng.random()
    if r < 0.3:
        return f"{v}*{rng.randint(1, 8)}"
    if r < 0.5:
        return f"({v}+{rng.randint(-3, 5)})"
    if r < 0.6:
        return f"{v}//{rng.choice([2, 3, 4, 8])}"
    return v


def value_expr(depth=2):
    s = '+'.join(term() for _ in range(rng.randint(1, 3)))
    r = rng.random()
    if r < 0.35:
        s = f"({s})//{rng.choice([2, 3, 4, 5, 8, 16, 64])}"
    elif r < 0.7:
        s = f"({s})%{rng.choice([2, 3, 4, 5, 8, 16, 64])}"
    elif r < 0.8:
        s = f"({s}) < {rng.randint(-2, 40)}"
    elif r < 0.85:
        s = f"max({s}, {rng.randint(0, 9)})"
    if depth > 0 and rng.random() < 0.3:
        s = f"({s}) + ({gated(depth - 1)})"
    return s


def gated(depth=2):
    return f"({value_expr(depth)} if {cond()} else {value_expr(0)})"


def run(rw, mode, exprs):
    args = sum([['--var', f"{k}={lo}..{hi}"] for k, (lo, hi) in BOX.items()], [])
    p = subprocess.run([rw, 'simplify'] + args + mode + ['--batch', '-'], capture_output=True,
                       text=True, input='\n'.join(exprs) + '\n', timeout=900)
    if p.returncode != 0:
        sys.exit(f"{rw} simplify {' '.join(mode)}: exit {p.returncode}: {p.stderr[:1000]}")
    return p.stdout.split('\n')[:len(exprs)]


def evaluate(code, env):
    try:
        return ('ok', int(eval(code, BUILTINS, dict(env))))
    except ZeroDivisionError:
        return ('raises', None)


exprs = [gated() for _ in range(N)]
out, interp = run(RW, [], exprs), run(RW, ['--interp'], exprs)
base = run(BASE, [], exprs) if BASE else None
fails, smaller, same = [], 0, 0
corners = [dict(zip(BOX, c)) for c in itertools.product(*BOX.values())]
for k, src in enumerate(exprs):
    if out[k] != interp[k]:
        fails.append(f"compiled and interpreted differ: {src}\n  {out[k]}\n  {interp[k]}")
        continue
    if base is not None:
        if len(out[k]) > len(base[k]):
            fails.append(f"larger than the baseline: {src}\n  now  {out[k]}\n  base {base[k]}")
        smaller += len(out[k]) < len(base[k])
        same += out[k] == base[k]
    sc, oc = compile(src, '<in>', 'eval'), compile(out[k], '<out>', 'eval')
    pts = corners + [{v: rng.randint(lo, hi) for v, (lo, hi) in BOX.items()} for _ in range(30)]
    for env in pts:
        want = evaluate(sc, env)
        if want[0] == 'ok' and evaluate(oc, env) != want:
            fails.append(f"value differs at {env}: {src}\n  -> {out[k]}")
            break
print(f"gated sweep seed {SEED}: {N} expressions, {len(fails)} failure(s)" +
      (f"; vs baseline {same} identical, {smaller} smaller" if base is not None else ""))
for f in fails[:20]:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
