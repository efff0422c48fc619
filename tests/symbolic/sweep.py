#!/usr/bin/env python3
"""The Python-oracle sweep of rw simplify (issue 22): random expressions using all of its syntax
(+ - * // % << >>, comparisons and their chains, & | ^ on ints and bools, max, min, if-else, True,
False, unary -, nesting) over small, int64-edge and huge (beyond 64 bits) ranges. Each batch is
simplified by the compiled rules and by the interpreter (--interp); the two outputs must be the
same text, and wherever the input evaluates without an error (at every corner of the box and at
random points) the output must evaluate without an error to the same value.

Usage: sweep.py RW_BINARY [SEED [BATCHES]]
  $TINYRW_SWEEP_SEED, when set, replaces SEED (default 1), so a CTest run can be repeated with
  another seed. A failure prints the seed, and each failing expression with the rw command that
  reproduces it. BATCHES (default 10) sets the work: 150 expressions, about 0.2 s, per batch."""
import itertools, os, random, subprocess, sys

RW = sys.argv[1]
SEED = int(os.environ.get('TINYRW_SWEEP_SEED') or (sys.argv[2] if len(sys.argv) > 2 else 1))
BATCHES = int(sys.argv[3]) if len(sys.argv) > 3 else 10
EXPRS_PER_BATCH, RANDOM_POINTS = 150, 40
rng = random.Random(SEED)
M = 2**63 - 1
BUILTINS = {'__builtins__': {'max': max, 'min': min, 'True': True, 'False': False}}

SMALL = [(-9, 12), (0, 15), (1, 4), (-20, -3), (0, 1), (-1, 1), (0, 0)]
EDGE = [(M - 20, M), (-M - 1, -M + 9), (0, M), (-M - 1, M), (M - 5, M + 5), (2**31 - 3, 2**31 + 3)]
HUGE = [(2**70, 2**90), (-2**100, 2**100), (-2**100, -2**99), (2**64 - 2, 2**64 + 2), (1, 2**100)]
CONSTS = ['0', '1', '2', '3', '-1', '-2', '7', '-7', '12', '64', '1000', str(M), f"-{M}",
          f"(-{M}-1)", f"{M}*{M}", f"{M}*{M}*{M}", '4294967296', '4611686018427387904']
DIVISORS = ['1', '2', '3', '-2', '7', '-7', '1000', str(M), f"{M}*{M}"]
CMP = ['<', '<=', '>', '>=', '==', '!=']


def leaf(names):
    r = rng.random()
    if r < 0.55:
        return rng.choice(names)
    if r < 0.93:
        return rng.choice(CONSTS)
    return rng.choice(['True', 'False'])


def cond(names, d):
    r = rng.random()
    if r < 0.6:
        return f"{expr(names, d)}{rng.choice(CMP)}{expr(names, d)}"
    if r < 0.75:
        return f"{expr(names, d)}{rng.choice(CMP)}{expr(names, d)}{rng.choice(CMP)}{expr(names, d)}"
    if r < 0.9:
        return f"({cond(names, d - 1)}) {rng.choice(['&', '|', '^'])} ({cond(names, d - 1)})"
    return expr(names, d)  # an int as a condition: Python truthiness


def expr(names, d):
    if d <= 0 or rng.random() < 0.12:
        return leaf(names)
    a = lambda: expr(names, d - 1)
    k = rng.randrange(21)
    if k == 19:  # shapes that rules rewrite, with constants of every size
        c = lambda: rng.choice(CONSTS + DIVISORS)
        x = a()
        return rng.choice([
            f"(({x} if {cond(names, d - 2)} else {c()}) if {cond(names, d - 2)} else {c()})",
            f"(({a()} if {cond(names, d - 2)} else {x}) if {cond(names, d - 2)} else {x})",
            f"(({a()} if {x}%{rng.choice(names)} else {c()}) if {rng.choice(names)} else {c()})",
            f"(({c()} if {cond(names, d - 2)} else {c()})+({c()} if {cond(names, d - 2)} else {c()}))",
            f"({x}*{c()}+{x}*{c()})", f"({x}+{x}*{c()})", f"({x}*{c()}+{a()}+{x})",
            f"({x}//{c()}//{c()})", f"(({x}//{c()}+{c()})//{c()})", f"(-{x}+{c()})//{c()}",
            f"({x}*{c()}<{c()})", f"({x}+{c()}<{c()})", f"({x}//{c()}<{c()})",
            f"max({x}, {x}+{c()})", f"({x}*{c()}*{c()}*{c()})", f"({x}%{c()}+{x}//{c()}*{c()})"])
    if k == 20:  # a where guarding a division by a variable that may be zero
        v = rng.choice(names)
        return f"(({a()}//{v} if {a()}%{v} > {c_small()} else {a()}) if {v} != 0 else {a()})"
    if k == 0: return f"({a()}+{a()})"
    if k == 1: return f"({a()}-{a()})"
    if k == 2: return f"({a()}*{a()})"
    if k == 3: return f"({a()}*{rng.choice(CONSTS)})"
    if k == 4: return f"({a()}//{rng.choice(DIVISORS + names)})"
    if k == 5: return f"({a()}%{rng.choice(DIVISORS + names)})"
    if k == 6: return f"({a()}//({a()}))"
    if k == 7: return f"({a()}%({a()}))"
    if k == 8: return f"max({a()}, {a()})"
    if k == 9: return f"min({a()}, {a()})"
    if k == 10: return f"({a()} if {cond(names, d - 2)} else {a()})"
    if k == 11: return f"({cond(names, d - 1)})"
    if k == 12: return f"({a()} {rng.choice(['&', '|', '^'])} {a()})"
    if k == 13: return f"-{a()}"
    if k == 14: return f"({a()}<<{rng.randrange(4)})"
    if k == 15: return f"({a()}>>{rng.randrange(4)})"
    if k == 16: return f"(({a()})*{rng.randint(-5, 5)}+{a()})"
    if k == 17: return f"(({a()})//{rng.choice(DIVISORS)}*{rng.choice(DIVISORS)}+({a()})%{rng.choice(DIVISORS)})"
    return f"({a()}+{rng.choice(CONSTS)})"


def c_small():
    return str(rng.randint(-3, 3))


def evaluate(code, env):
    try:
        return ('ok', int(eval(code, BUILTINS, dict(env))))
    except (ZeroDivisionError, ValueError):  # x//0, x%0; x<<-1
        return ('raises', None)


def run_batch(batch_no):
    kinds = [rng.choice([SMALL, SMALL, EDGE, HUGE]) for _ in range(3)]
    box = {n: rng.choice(kind) for n, kind in zip(['a', 'b', 'c'], kinds)}
    names = list(box)
    exprs = [expr(names, rng.randint(1, 5)) for _ in range(EXPRS_PER_BATCH)]
    var_args = sum([['--var', f"{n}={lo}..{hi}"] for n, (lo, hi) in box.items()], [])
    outs, errors = {}, {}
    for mode in ([], ['--interp']):
        p = subprocess.run([RW, 'simplify'] + var_args + mode + ['--batch', '-'],
                           input='\n'.join(exprs) + '\n', capture_output=True, text=True, timeout=600)
        lines = p.stdout.split('\n')
        if p.returncode not in (0, 1) or len(lines) < len(exprs):
            return [f"rw simplify {' '.join(mode)} exited {p.returncode}: {p.stderr[:2000]}"], 0
        outs[tuple(mode)] = lines[:len(exprs)]
        # a refused line (no generated expression should be) fails with its message
        for err in p.stderr.split('\n'):
            if err.startswith('<stdin>:') and ': error: ' in err:
                errors.setdefault(int(err.split(':')[1]) - 1, f"{' '.join(mode)} {err[:300]}")
    repro = ' '.join(['rw', 'simplify'] + var_args)
    bad, checked = [], 0
    corners = [dict(zip(names, c)) for c in itertools.product(*[(lo, hi) for lo, hi in box.values()])]
    for k, (src, out, out_interp) in enumerate(zip(exprs, outs[()], outs[('--interp',)])):
        if k in errors:
            bad.append(f"refused: {errors[k]}\n  {repro} -- '{src}'")
            continue
        if out != out_interp:
            bad.append(f"compiled and interpreted differ:\n  {repro} -- '{src}'\n  compiled: {out}\n  interp:   {out_interp}")
            continue
        try:
            src_code, out_code = compile(src, '<in>', 'eval'), compile(out, '<out>', 'eval')
        except SyntaxError as e:
            bad.append(f"output is no Python expression ({e}):\n  {repro} -- '{src}'\n  -> {out}")
            continue
        pts = corners + [{n: rng.choice([lo, hi, rng.randint(lo, hi), rng.randint(lo, min(hi, lo + 3))])
                          for n, (lo, hi) in box.items()} for _ in range(RANDOM_POINTS)]
        for env in pts:
            want = evaluate(src_code, env)
            if want[0] == 'raises':
                continue
            checked += 1
            got = evaluate(out_code, env)
            if got != want:
                bad.append(f"value differs at {env}: input {want[1]}, output {got}\n  {repro} -- '{src}'\n  -> {out}")
                break
    return bad, checked


failures, checked = [], 0
for b in range(BATCHES):
    bad, n = run_batch(b)
    failures += bad
    checked += n
print(f"sweep seed {SEED}: {BATCHES} batches, {BATCHES * EXPRS_PER_BATCH} expressions, "
      f"{checked} points checked, {len(failures)} failure(s)")
for f in failures[:20]:
    print("FAIL:", f)
if failures:
    print(f"reproduce with: TINYRW_SWEEP_SEED={SEED} python3 {sys.argv[0]} RW {SEED} {BATCHES}")
sys.exit(1 if failures else 0)
