#!/usr/bin/env python3
"""The rw simplify contract, checked by Python itself: random expressions (bools mixed with ints,
chained comparisons, floor division and modulo by negative and variable divisors, large
constants) are simplified in one --batch run, and every output must evaluate in Python to the
input's value at random points within the bounds (points where the input raises are skipped).
Usage: python_contract.py RW_BINARY SEED"""
import random, subprocess, sys
RW = sys.argv[1]
random.seed(int(sys.argv[2]))
V = {'a': (-7, 9), 'b': (0, 15), 'c': (1, 4), 'n': (-20, -3)}
def leaf():
    r = random.random()
    if r < 0.5: return random.choice(list(V))
    if r < 0.9: return str(random.randint(-9, 12))
    return str(random.choice([10**15, -10**15, 2**40, 2**62]))
def cmpop(): return random.choice(['<','<=','>','>=','==','!='])
def e(d):
    if d <= 0 or random.random() < 0.15: return leaf()
    a, b = e(d-1), e(d-1)
    k = random.randint(0, 16)
    if k == 0: return f"({a}+{b})"
    if k == 1: return f"({a}-{b})"
    if k == 2: return f"({a}*{b})"
    if k == 3: return f"({a}//{random.choice(['3','-2','7','1','c','n','b'])})"
    if k == 4: return f"({a}%{random.choice(['3','-2','7','1','c','n','b'])})"
    if k == 5: return f"max({a}, {b})"
    if k == 6: return f"min({a}, {b})"
    if k == 7: return f"({a} if {e(d-2)}{cmpop()}{e(d-2)} else {b})"
    if k == 8: return f"(({a}{cmpop()}{b}) & ({e(d-2)}{cmpop()}{b}))"
    if k == 9: return f"(({a}{cmpop()}{b}) | ({e(d-2)}{cmpop()}{b}))"
    if k == 10: return f"({a} ^ {b})"
    if k == 11: return f"({a} & {b})"
    if k == 12: return f"-{a}"
    if k == 13: return f"({a}{cmpop()}{b}{cmpop()}{e(d-2)})"
    if k == 14: return f"({a}<<2)"
    if k == 15: return f"({a}>>1)"
    return f"({a}*{random.randint(-5,5)}+{b})"
exprs = [e(4) for _ in range(800)]
args = [RW, 'simplify'] + sum([['--var', f"{k}={lo}..{hi}"] for k,(lo,hi) in V.items()], []) + ['--batch', '-']
p = subprocess.run(args, input='\n'.join(exprs)+'\n', capture_output=True, text=True)
outs = p.stdout.split('\n')
bad = 0
errs = [l for l in p.stderr.split('\n') if 'error' in l]
import itertools
for i, (src, out) in enumerate(zip(exprs, outs)):
    if out == '':
        continue
    for _ in range(60):
        env = {k: random.randint(lo, hi) for k,(lo,hi) in V.items()}
        try: want = eval(src, {}, env)
        except ZeroDivisionError: continue
        except Exception as ex: print("PYERR", src, ex); break
        try: got = eval(out, {}, env)
        except Exception as ex:
            print("OUTERR", src, "->", out, ex); bad += 1; break
        if want != got:
            print("MISMATCH", src, "->", out, env, want, got); bad += 1; break
print("rc", p.returncode, "errors", len(errs), "bad", bad)
for l in errs[:5]: print(l)
sys.exit(0 if p.returncode == 0 and not errs and bad == 0 else 1)
