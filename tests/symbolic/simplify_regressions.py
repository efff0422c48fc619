#!/usr/bin/env python3
"""Regressions of rw simplify (issue 22), checked by Python's exact integers.
Usage: simplify_regressions.py RW_BINARY (engine|cli)

engine: each case is simplified by the compiled and the interpreted rules; the run must succeed and,
wherever the input evaluates without an error (at every corner of the box and at random points),
the output must evaluate without an error to the same value.
cli: the command line's errors and exit statuses."""
import itertools, os, random, subprocess, sys, tempfile

RW, WHAT = sys.argv[1], sys.argv[2]
M = 2**63 - 1
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run(args, stdin=None, stdout=subprocess.PIPE):
    return subprocess.run([RW, 'simplify'] + args, input=stdin, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=600)


def value(expr, env):
    try:
        return ('ok', eval(expr, {'__builtins__': {'max': max, 'min': min}}, dict(env)))
    except ZeroDivisionError:
        return ('raises', None)


def flat_sum(expr):
    """A long sum as a function of the point (Python's compiler recurses once per operator, so each
    top-level term is compiled on its own)."""
    if expr.startswith('(') and expr.endswith(')'):
        depth = 0
        for k, ch in enumerate(expr):
            depth += {'(': 1, ')': -1}.get(ch, 0)
            if depth == 0 and k < len(expr) - 1:
                break
        else:
            expr = expr[1:-1]
    terms, depth, start = [], 0, 0
    for k, ch in enumerate(expr + '+'):
        depth += {'(': 1, ')': -1}.get(ch, 0)
        if ch == '+' and depth == 0:
            terms.append(compile(expr[start:k], '<term>', 'eval'))
            start = k + 1
    return lambda env: sum(eval(t, {}, dict(env)) for t in terms)


def points(box, rng, n=200):
    names = list(box)
    for corner in itertools.product(*[(lo, hi) for lo, hi in box.values()]):
        yield dict(zip(names, corner))
    for _ in range(n):
        yield {k: rng.choice([lo, hi, rng.randint(lo, hi)]) for k, (lo, hi) in box.items()}


# (box, expression): each once wrong, refused or too slow on main
ENGINE = [
    # a product beyond 128 bits: its saturated bounds "proved" x*x*x == x*x*x+1
    ({'x': (2**62, M)}, "x*x*x == x*x*x+1"),
    ({'x': (2**62, M)}, "x*x*x != x*x*x+1"),
    ({'x': (2**62, M)}, "x*x*x < x*x*x"),
    ({'x': (2**62, M), 'y': (0, 5)}, "max(x*x*x, x*x*x+y)"),
    ({'x': (-M, -2**62)}, "x*x*x == x*x*x-1"),
    # a constant product overflowed while folding // and %
    ({'x': (0, 10)}, f"{M}*{M}*3//1000"),
    ({'x': (0, 10)}, f"{M}*{M}*3%1000"),
    ({'x': (0, 10)}, f"({M}*{M}*3+x)//1000"),
    ({'x': (0, 10)}, f"(x*{M}*{M}*3)//1000"),
    # an unfoldable constant chain looped ("infinite loop")
    ({'x': (0, 10)}, f"x*{M}*{M}*{M}"),
    ({'x': (0, 10)}, f"x*({M}*{M}*{M})"),
    ({'x': (-5, 10)}, f"(x+{M}*{M})+{M}*{M}"),
    ({'x': (0, 10)}, f"x//({M}*{M})//({M}*{M})"),
    ({'x': (0, 10)}, f"(x//{M}+{M}*{M})//({M}*{M})"),
    ({'x': (0, 10)}, f"x*{M}*{M} < {M}*{M}*{M}"),
    ({'x': (0, 10)}, f"x//3 < {M}*{M}"),
    ({'x': (0, 10)}, f"x*{M}*{M} + x*{M}*{M}"),
    # a guarded modulo was hoisted into an & that evaluates both sides
    ({'y': (0, 3), 'x': (0, 10)}, "((x%y if x%y > 1 else 7) if y else 7)"),
    ({'y': (-2, 3), 'x': (0, 10)}, "((1 if x//y > 1 else 7) if y != 0 else 7)"),
    ({'y': (0, 3), 'x': (-9, 10)}, "((x if 0 < x%y else 2) if 0 < y else 2)"),
]

# (expression, the output): one case for each named division, modulo and less-than rule of
# rules/symbolic.rw (issue 12), over x=0..9 y=1..5 z=0..3 b=0..1, in both executors
NAMED_BOX = {'x': (0, 9), 'y': (1, 5), 'z': (0, 3), 'b': (0, 1)}
NAMED = [
    # combine_divmod_terms: k*(x%c) + k*c*(x//c) == k*x, with terms between, the modulo or the
    # division on the side searched first, nested (x//2)%3 with x//6, negative k, two sub-sums
    ("(x%4)*2+y+(x//4)*8", "(x*2+y)"),
    ("(x//4)*8+y+(x%4)*2", "(x*2+y)"),
    ("((x//2)%3)+y*y+(x//6)*3", "(y*y+x//2)"),
    ("(x//6)*3+y*y+((x//2)%3)", "(y*y+x//2)"),
    ("(x%3)*-1+y*z+(x//3)*-3", "(x*-1+y*z)"),
    ("((x%3)+y*y)+(z*y+(x//3)*3)", "(y*y+y*z+x)"),
    ("(x%3)+y*y+(x//3)*2", "(y*y+x%3+x//3*2)"),          # no pair: k*c differs
    ("x//16", "0"),                                      # const_quotient
    ("(z+12)%8", "(z+4)"),                               # const_quotient (one period)
    ("(z+4)//(x//9+8)", "0"),                            # const_quotient (a variable divisor)
    ("(x*y+z)//y", "(z//y+x)"),                          # factor_remainder
    ("(x*y+z)%y", "(z%y)"),                              # factor_remainder
    ("(x*y+y*z)//y", "(x+z)"),                           # factor_remainder, every term
    ("(x*y+y*z)%y", "0"),                                # divide_exact, every term
    ("(x*y*2+z*y*4)//(y*2)", "(z*2+x)"),                 # divide_exact, product divisors
    ("(x*y*2+z)%(y*2)", "(z%(y*2))"),                    # factor_remainder, a product divisor
    ("x*3+z*2 >= 1", "(x+z>=1)"),                        # canonicalize_simplex
    ("x*3-z >= 1", "(x*3+z*-1>=1)"),                     # ... not with a negative factor
    ("(x*4+z*2)//(y*2)", "((x*2+z)//y)"),                # divide_by_gcd
    ("(x*4+z*2)%(y*2)", "((x*2+z)%y*2)"),                # divide_by_gcd
    ("(x*4+z)//8", "(x//2)"),                            # gcd_with_remainder
    ("(x*4+z)%8", "(x%2*4+z)"),                          # gcd_with_remainder
    ("(x*4-b+1)//8", "(x//2)"),                          # gcd_with_remainder, -b+1 in [0, 1]
    ("(x*4-b+1)%8", "((b*7+x*4+1)%8)"),                  # not for % when -b may be negative
    ("(b*3+1)%4", "(b*-1+1)"),                           # fold_binary_term
    ("(b*3+1)//4", "b"),                                 # fold_binary_term
    ("(b*3+x*4+1)%4", "(b*-1+1)"),                       # divmod_by_terms: congruence
    ("(b*3+x*4+1)//4", "(b+x)"),                         # ... congruence, x//c
    ("(x*3+z)%4", "((x*3+z)%4)"),                        # ... not past one period, unchanged
    ("(x*4+z+5)%4", "((z+1)%4)"),                        # ... quotient-remainder
    ("(x*4+z+5)//4", "((z+1)//4+x+1)"),                  # ... quotient-remainder, x//c
    ("(x*5+z)%4", "((x+z)%4)"),                          # ... quotient-remainder
    ("(x*2+z)%4", "((x*2+z)%4)"),                        # ... not when nothing leaves or shrinks
    ("(x%4*3+z)%6", "((x*3+z)%6)"),                      # ... f*(x%n) with c | f*n: f*x
    ("(x%4*-3+z)%6", "((x*3+z)%6)"),                     # ... f < 0
    ("((x+z)%4*3+y)%6", "(((x+z)%4*3+y)%6)"),            # ... not a sum with f != 1
    ("(x*2+z)//4", "((z//2+x)//2)"),                     # ... nested by a factor
    ("(x*2+z)//6", "((z//2+x)//3)"),                     # ... nested by a factor
    ("(x*6+z)//4", "((x*6+z)//4)"),                      # ... not by a factor that is not c's
    ("(x*4+z)<8", "(x<2)"),                              # lt_folding
    # recombine_divmod's congruent_base: a quotient and its remainder simplified apart (the
    # quotient nested by a factor) still recombine, whole or as digits
    ("((x*3//2+14)//6)*6+(x*3//2+14)%6", "(x*3//2+14)"),
    ("((x*2+y+z)//8%4)*8+(x*2+y+z)%8+7", "(x*2+y+z+7)"),
    ("((x+y*2)//2)*2+(x+y*2)%2+z", "(y*2+x+z)"),          # ... a quotient kept as (x//2+y)*2
    ("(x%(y*8)+z)%y", "((x+z)%y)"),                      # a modulo inside a modulo by a variable
    ("(x%y*7)%y", "(x*7%y)"),                            # a modulo inside a modulo by a variable, scaled
]

# (expression, the output): the gate (valid) simplification of where, rules/symbolic.rw's
# simplify_given_valid, over a=0..9 b=0..9 c=-5..5, in both executors
VALID_BOX = {'a': (0, 9), 'b': (0, 9), 'c': (-5, 5)}
VALID = [
    ("((a//5) if a < 5 else b)", "(0 if a<5 else b)"),                       # v < c
    ("((a//5) if 5 <= a else b)", "(b if a<5 else 1)"),                      # !(v < c): flipped
    ("((a//5) if 4 < a else b)", "(1 if 4<a else b)"),                       # c < v
    ("((c//6) if c >= 0 else b)", "(b if c<0 else 0)"),                      # a negative range
    ("((a%4) if a < 4 else b)", "(a if a<4 else b)"),
    ("((a//5+b%10) if (a < 5)&(b >= 2) else 0)", "(b if (a<5)&(b>=2) else 0)"),  # a conjunction
    ("((a//5) if (a < 3)&(a < 7) else b)", "(0 if a<3 else b)"),             # the tightest bound
    ("(((a+1)//5) if (a < 4)&(0 < a) else b)", "(0 if (a<4)&(0<a) else b)"),   # both ends
    ("((a//5+b//2) if ((a < 5)&(b<2))&(c>=0) else c//6)", "(0 if (a<5)&(b<2)&(c>=0) else c//6)"),
    # the gate's own clauses, each under the ones before it (rules/symbolic.rw's simplify_valid,
    # as tinygrad's sym): an empty range is False, a clause narrows to the others' bounds
    ("((a//5) if (a < 3)&(a > 6) else b)", "b"),
    ("((a+b) if (a < 2)&((a+19)%21 < 20)&((a+19)%21%2 < 1) else c)", "c"),
    ("((a+b) if ((a+19)%21 < 20)&(a < 2) else c)", "(b if a<1 else c)"),
    # must not fire: a disjunction, a sum, a bound the range already has
    ("((a//5) if (a < 5)|(b < 2) else b)", "(a//5 if (a<5)|(b<2) else b)"),
    ("((a//5) if a+b < 5 else b)", "(a//5 if a+b<5 else b)"),
    ("((a//5) if a < 12 else b)", "(a//5)"),
    ("((a//5) if b < 3 else c)", "(a//5 if b<3 else c)"),
    # an inner where the outer condition decides: one of its | clauses (false in the else branch),
    # one of its & clauses (true in the then branch)
    ("((a+1) if (a<3)|(c<1) else (c if c<1 else a))", "(a+1 if (a<3)|(c<1) else a)"),
    ("((a if a*b<7 else 2) if (a*b<7)&(c<1) else 9)", "(a if (a*b<7)&(c<1) else 9)"),
]


def simplify_batch(box, mode, sources):
    """The outputs of sources, one batch run of one executor over one box (an interpreter start
    per expression made this test slow under the sanitizers)."""
    args = sum([['--var', f"{k}={lo}..{hi}"] for k, (lo, hi) in box.items()], []) + mode
    p = run(args + ['--batch', '-'], stdin=''.join(src + '\n' for src in sources))
    outs = p.stdout.split('\n')[:len(sources)]
    check(p.returncode == 0 and len(outs) == len(sources),
          f"{mode} batch of {len(sources)}: rc {p.returncode} {p.stderr.strip()[:300]}")
    return [out.strip() for out in outs] + [''] * (len(sources) - len(outs))


def engine():
    rng = random.Random(22)
    boxes = {}
    for box, src in ENGINE:
        boxes.setdefault(tuple(box.items()), []).append(src)
    for mode in ([], ['--interp']):
        for box_items, sources in boxes.items():
            box = dict(box_items)
            for src, out in zip(sources, simplify_batch(box, mode, sources)):
                check(out, f"{mode} {src}: no output")
                if not out:
                    continue
                for env in points(box, rng):
                    want = value(src, env)
                    if want[0] == 'raises':
                        continue
                    got = value(out, env)
                    if got != want:
                        check(False, f"{mode} {src} -> {out} at {env}: want {want[1]}, got {got}")
                        break
    for box, cases in ((NAMED_BOX, NAMED), (VALID_BOX, VALID)):
        for mode in ([], ['--interp']):
            outs = simplify_batch(box, mode, [src for src, _ in cases])
            for (src, want), out in zip(cases, outs):
                check(out == want, f"{mode} {src}: {out}, want {want}")
                for env in points(box, rng, 50):
                    check(value(out, env) == value(src, env), f"{mode} {src} -> {out} at {env}")
    # long flat sums: simplified (a pair 1000 terms apart still combines), not left hanging
    terms = ['x', 'y', 'z', 'x*y', '(x%3)', '(y//2)', 'z*5', '7', '(x//3)']
    src = '+'.join(rng.choice(terms) for _ in range(20000))
    box = {'x': (0, 3), 'y': (-5, 9), 'z': (1, 100)}
    args = sum([['--var', f"{k}={lo}..{hi}"] for k, (lo, hi) in box.items()], [])
    p = run(args + ['--batch', '-'], stdin=src + '\n')
    out = p.stdout.strip()
    check(p.returncode == 0 and out, f"20000-term sum: rc {p.returncode} {p.stderr[:200]}")
    want, got = flat_sum(src), flat_sum(out)
    for env in list(points(box, rng, 20)):
        check(want(env) == got(env), f"20000-term sum differs at {env}")
    p = run(['--var', 'x=0..9', '--var', 'y=0..9',
             '(x%3)+' + '+'.join(['y'] * 1000) + '+(x//3)*3'])
    check(p.stdout.strip() == '(y*1000+x)', f"a far pair: {p.stdout.strip()[:200]}")
    for mode in ([], ['--interp']):  # the modulo last (searched first), its partner 1000 terms down
        p = run(['--var', 'x=0..9', '--var', 'y=0..9'] + mode +
                ['(x//3)*3+' + '+'.join(['y'] * 1000) + '+(x%3)'])
        check(p.stdout.strip() == '(y*1000+x)', f"{mode} a far pair: {p.stdout.strip()[:200]}")
        # the search limit (docs/limits.md, kMaxSpineNodes = 1024): distinct terms between
        for n, combined in ((1000, True), (1030, False)):
            mods = '+'.join(f"(y%{k})" for k in range(2, n + 2))
            p = run(['--var', 'x=0..9', '--var', 'y=0..100000'] + mode + [f"(x%3)+{mods}+(x//3)*3"])
            out = p.stdout.strip()
            check(p.returncode == 0 and out.endswith('+x)' if combined else '+x//3*3)'),
                  f"{mode} a pair {n} terms apart: {out[-60:]}")


def cli():
    # output lost to a full disk is an error
    if os.path.exists('/dev/full'):
        with open('/dev/full', 'w') as full:
            p = run(['--var', 'x=0..3', 'x+1'], stdout=full)
        check(p.returncode != 0 and 'cannot write' in p.stderr, f"/dev/full: rc {p.returncode}")
        for cmd in ['ops', 'demo']:  # the other commands of rw too
            with open('/dev/full', 'w') as full:
                p = subprocess.run([RW, cmd], stdout=full, stderr=subprocess.PIPE, text=True)
            check(p.returncode != 0 and 'No space left' in p.stderr, f"rw {cmd} > /dev/full: rc {p.returncode}")
    # a directory is no batch file
    with tempfile.TemporaryDirectory() as d:
        p = run(['--var', 'x=0..3', '--batch', d])
        check(p.returncode != 0 and 'is a directory' in p.stderr, f"--batch DIR: {p.stderr}")
    p = run(['--var', 'x=0..3', '--batch', '/nonexistent/file'])
    check(p.returncode != 0 and 'cannot open' in p.stderr, f"--batch missing: {p.stderr}")
    # an unknown function is named as a function, at its column
    p = run(['--var', 'x=0..3', 'x + foo(x)'])
    check(p.returncode == 1 and "<expr>:1:5: error: unknown function 'foo'" in p.stderr,
          f"unknown function: {p.stderr}")
    p = run(['--var', 'x=0..3', 'x + bar'])
    check(p.returncode == 1 and "<expr>:1:5: error: unknown variable 'bar'" in p.stderr,
          f"unknown variable: {p.stderr}")
    # --var: documented limits, a clear error beyond them, each variable once
    p = run(['--help'])
    check(p.returncode == 0 and '2**100' in p.stdout and '--' in p.stdout, f"--help: {p.stdout}")
    p = run(['--var', f"x=0..{2**100}", 'x'])
    check(p.returncode == 0 and p.stdout.strip() == 'x', f"--var at the limit: {p.stderr}")
    p = run(['--var', f"x=0..{2**100 + 1}", 'x'])
    check(p.returncode == 2 and 'limit of 2**100' in p.stderr, f"--var beyond: {p.stderr}")
    p = run(['--var', f"x={-2**100 - 1}..0", 'x'])
    check(p.returncode == 2 and 'limit of 2**100' in p.stderr, f"--var beyond: {p.stderr}")
    p = run(['--var', 'x=0..3', '--var', 'x=0..5', 'x'])
    check(p.returncode == 2 and "variable 'x' is given twice" in p.stderr, f"--var twice: {p.stderr}")
    p = run(['--var', 'x=5..3', 'x'])
    check(p.returncode == 2 and 'LO is greater than HI' in p.stderr, f"--var LO>HI: {p.stderr}")
    # -- ends the options
    p = run(['--var', 'x=0..3', '--', '-x+1'])
    check(p.returncode == 0 and p.stdout.strip() == '(x*-1+1)', f"-- EXPR: {p.stdout} {p.stderr}")
    p = run(['--var', 'x=0..3', '-x+1'])
    check(p.returncode == 2 and "after '--'" in p.stderr, f"-EXPR without --: {p.stderr}")
    # nesting beyond the limit is a located error naming it; long input is no crash
    for src in ['(' * 100000 + 'x' + ')' * 100000, '-' * 100000 + 'x',
                '1 if x else ' * 100000 + '1', 'max(' * 100000 + 'x' + ',1)' * 100000]:
        p = run(['--var', 'x=0..3', '--batch', '-'], stdin=src + '\n')
        check(p.returncode == 1 and '<stdin>:1:' in p.stderr and 'nesting depth limit' in p.stderr,
              f"deep input {src[:20]}: rc {p.returncode} {p.stderr[:300]}")


    p = run(['--var', 'x=0..3', '--batch', '-'], stdin='+'.join(['x'] * 600000) + '\n')
    check(p.returncode == 1 and '<stdin>:1:1000001: error:' in p.stderr and
          'expression size limit' in p.stderr, f"a 1.2M-token line: {p.stderr[:300]}")


{'engine': engine, 'cli': cli}[WHAT]()
print(f"{WHAT}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
