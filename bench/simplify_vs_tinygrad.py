#!/usr/bin/env python3
"""`rw simplify` against tinygrad's UOp.simplify() on one random corpus, in one run.

Generates N random index expressions (seeded; every value non-negative, so tinygrad's C-style
// and % agree with Python's floor // and % on every input), then:
- tinygrad: builds each expression as UOps from its source tree, simplify(), render(), timed per
  expression (build + simplify + render) in one Python process, after a warm-up expression;
- tinyrw: `rw simplify --batch` over the same expressions, timed whole (median of --repeats runs),
  less the median of a one-expression run (process start-up and rule loading);
- sizes: the nodes of each result's Python parse tree (operators, calls, names, constants; the
  test's token count in tests/symbolic/test_tinygrad_cases.cpp gives the same totals here), the mean and geometric mean of tinyrw's size over tinygrad's, and how many results are
  larger, equal and smaller; values of both results are compared with the input on random points.

With --write-corpus FILE it also writes the corpus with tinygrad's results in the format of
tests/symbolic/tinygrad_cases.txt (VARS | INPUT | TINYGRAD); test_symbolic's TinygradCorpus test
reads tests/symbolic/tinygrad_corpus.txt, made this way.

  python3 bench/simplify_vs_tinygrad.py [--n 2000] [--rw build/bin/rw] [--tinygrad-path /tmp/tg]

tinygrad's source, from the mirror: mkdir -p /tmp/tg &&
  git -C /work/.mirror/tinygrad+tinygrad/repo archive HEAD tinygrad | tar x -C /tmp/tg
"""
import argparse
import ast
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

VARS = {'a': (0, 100), 'b': (0, 50), 'c': (1, 9), 'd': (0, 20)}


# ---- the corpus: trees, and their Python text
def generate(n, seed):
  rng = random.Random(seed)

  def leaf():
    return ('var', rng.choice('abcd')) if rng.random() < 0.8 else ('const', rng.randint(0, 20))

  def k():
    return rng.randint(1, 8)

  def gen(depth):
    if depth <= 0: return leaf()
    r = rng.random()
    sub = lambda: gen(depth - 1 - (rng.random() < 0.4))
    if r < 0.08: return leaf()
    if r < 0.24: return ('add', [sub() for _ in range(rng.randint(2, 4))])
    if r < 0.36: return ('mul', sub(), k())
    if r < 0.48: return ('div', sub(), k())
    if r < 0.58: return ('mod', sub(), k())
    if r < 0.65: return ('max', sub(), sub())
    if r < 0.73: return ('where', ('lt', sub(), sub()), sub(), sub())
    if r < 0.77: return ('div', sub(), ('var', 'c'))
    if r < 0.80: return ('mod', sub(), ('var', 'c'))
    # shapes index math is made of: digit splits and recombinations, nested divisions
    x, p = sub(), rng.randint(0, 7)
    if p == 0:
      kk = k(); return ('add', [('mul', ('div', x, kk), kk), ('mod', x, kk)])
    if p == 1:
      m = k(); return ('add', [('vmul', ('mod', ('div', x, ('var', 'c')), m), ('var', 'c')), ('mod', x, ('var', 'c'))])
    if p == 2:
      kk = k(); return ('add', [('mul', ('div', x, kk), kk), ('mod', x, kk), sub()])
    if p == 3:
      k1, m = k(), k(); return ('add', [('mul', ('mod', ('div', x, k1), m), k1), ('mod', x, k1)])
    if p == 4:
      kk = k(); return ('div', ('add', [('mul', x, kk), sub()]), kk)
    if p == 5:
      kk = k(); return ('mod', ('add', [('mul', x, kk), sub()]), kk)
    if p == 6:
      return ('div', ('div', x, k()), k())
    k1, k2 = k(), k(); return ('div', ('mod', x, k1 * k2), k1)

  return [gen(rng.randint(2, 5)) for _ in range(n)]


def to_text(t):
  op = t[0]
  if op == 'var': return t[1]
  if op == 'const': return str(t[1])
  if op == 'add': return '(' + '+'.join(to_text(s) for s in t[1]) + ')'
  if op == 'mul': return f'({to_text(t[1])}*{t[2]})'
  if op == 'vmul': return f'({to_text(t[1])}*{to_text(t[2])})'
  if op in ('div', 'mod'):
    d = t[2] if isinstance(t[2], int) else to_text(t[2])
    return f'({to_text(t[1])}{"//" if op == "div" else "%"}{d})'
  if op == 'max': return f'max({to_text(t[1])}, {to_text(t[2])})'
  if op == 'lt': return f'({to_text(t[1])}<{to_text(t[2])})'
  if op == 'where': return f'({to_text(t[2])} if {to_text(t[1])} else {to_text(t[3])})'
  raise ValueError(op)


# ---- tinygrad, in a subprocess over the trees
TINYGRAD_SNIPPET = r'''
import json, sys, time
from tinygrad.uop.ops import UOp
VARS = %r
def build(t, V):
  op = t[0]
  if op == 'var': return V[t[1]]
  if op == 'const': return V['a'].const_like(t[1])
  if op == 'add':
    r = build(t[1][0], V)
    for s in t[1][1:]: r = r + build(s, V)
    return r
  if op == 'mul': return build(t[1], V) * t[2]
  if op == 'vmul': return build(t[1], V) * build(t[2], V)
  if op in ('div', 'mod'):
    d = t[2] if isinstance(t[2], int) else build(t[2], V)
    x = build(t[1], V)
    return x // d if op == 'div' else x %% d
  if op == 'max': return build(t[1], V).maximum(build(t[2], V))
  if op == 'lt': return build(t[1], V) < build(t[2], V)
  if op == 'where': return build(t[1], V).where(build(t[2], V), build(t[3], V))
  raise ValueError(op)
def run(t):
  V = {n: UOp.variable(n, lo, hi) for n, (lo, hi) in VARS.items()}
  return build(t, V).simplify().render()
trees = json.load(open(sys.argv[1]))
run(trees[0])  # warm-up: imports and pattern matcher compilation
outs, times = [], []
for t in trees:
  t0 = time.perf_counter()
  outs.append(run(t).replace('\n', ' '))
  times.append(time.perf_counter() - t0)
json.dump({'outs': outs, 'times': times}, open(sys.argv[2], 'w'))
'''


def run_tinygrad(trees, tinygrad_path, tmp):
  tree_file, out_file = os.path.join(tmp, 'trees.json'), os.path.join(tmp, 'tg.json')
  json.dump(trees, open(tree_file, 'w'))
  snippet = os.path.join(tmp, 'tg.py')
  open(snippet, 'w').write(TINYGRAD_SNIPPET % (VARS,))
  env = dict(os.environ, PYTHONPATH=tinygrad_path)
  subprocess.run([sys.executable, snippet, tree_file, out_file], env=env, check=True)
  return json.load(open(out_file))


# ---- tinyrw
def var_flags():
  return [f for n, (lo, hi) in VARS.items() for f in ('--var', f'{n}={lo}..{hi}')]


def run_rw(rw, text_file, repeats):
  times, out = [], None
  for _ in range(repeats):
    t0 = time.perf_counter()
    r = subprocess.run([rw, 'simplify', *var_flags(), '--batch', text_file], capture_output=True,
                       text=True, check=True)
    times.append(time.perf_counter() - t0)
    out = r.stdout.splitlines()
  return out, statistics.median(times)


# ---- sizes and values
COUNTED = (ast.BinOp, ast.Compare, ast.IfExp, ast.Call, ast.Name, ast.Constant, ast.UnaryOp,
           ast.BoolOp)


def size(text):
  return sum(isinstance(n, COUNTED) for n in ast.walk(ast.parse(text, mode='eval')))


def cdiv(x, y):
  q = abs(x) // abs(y)
  return q if (x >= 0) == (y >= 0) else -q


class CStyle(ast.NodeTransformer):
  """tinygrad's results use C-style // and %: evaluate them so."""
  def visit_BinOp(self, n):
    self.generic_visit(n)
    if isinstance(n.op, (ast.FloorDiv, ast.Mod)):
      fn = 'cdiv' if isinstance(n.op, ast.FloorDiv) else 'cmod'
      return ast.copy_location(ast.Call(ast.Name(fn, ast.Load()), [n.left, n.right], []), n)
    return n


def evaluator(text, c_style):
  tree = ast.parse(text, mode='eval')
  if c_style: tree = ast.fix_missing_locations(CStyle().visit(tree))
  code = compile(tree, '<expr>', 'eval')
  env = {'cdiv': cdiv, 'cmod': lambda x, y: x - cdiv(x, y) * y, 'max': max, 'min': min}
  return lambda p: int(eval(code, env, dict(p)))


def main():
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('--n', type=int, default=2000)
  ap.add_argument('--seed', type=int, default=12345)
  ap.add_argument('--rw', default='build/bin/rw')
  ap.add_argument('--tinygrad-path', default=os.environ.get('TINYGRAD_PATH', '/tmp/tg'))
  ap.add_argument('--repeats', type=int, default=5)
  ap.add_argument('--points', type=int, default=100, help='random points per value check')
  ap.add_argument('--write-corpus', help='write VARS | INPUT | TINYGRAD lines to this file')
  args = ap.parse_args()

  trees = generate(args.n, args.seed)
  texts = [to_text(t) for t in trees]
  with tempfile.TemporaryDirectory() as tmp:
    text_file = os.path.join(tmp, 'exprs.txt')
    open(text_file, 'w').write('\n'.join(texts) + '\n')
    one_file = os.path.join(tmp, 'one.txt')
    open(one_file, 'w').write(texts[0] + '\n')
    tg = run_tinygrad(trees, args.tinygrad_path, tmp)
    rw_out, rw_all = run_rw(args.rw, text_file, args.repeats)
    _, rw_one = run_rw(args.rw, one_file, args.repeats)

  n = len(texts)
  rng = random.Random(7)
  points = [{v: rng.randint(lo, hi) for v, (lo, hi) in VARS.items()} for _ in range(args.points)]
  disagree, ratios, larger, equal = [], [], [], 0
  for src, ours, theirs in zip(texts, rw_out, tg['outs']):
    f_in, f_rw, f_tg = evaluator(src, False), evaluator(ours, False), evaluator(theirs, True)
    for p in points:
      if not f_in(p) == f_rw(p) == f_tg(p):
        disagree.append((src, ours, theirs, p))
        break
    s_rw, s_tg = size(ours), size(theirs)
    ratios.append(s_rw / s_tg)
    equal += s_rw == s_tg
    if s_rw > s_tg: larger.append((s_rw, s_tg, src, ours, theirs))

  rw_per = (rw_all - rw_one) / (n - 1)
  tg_per = statistics.mean(tg['times'])
  print(f'corpus: {n} expressions (seed {args.seed}), variables {VARS}')
  print(f'tinygrad build+simplify+render: mean {tg_per * 1e6:.1f} us/expr, '
        f'median {statistics.median(tg["times"]) * 1e6:.1f} us')
  print(f'rw simplify --batch: {rw_all * 1e3:.1f} ms for all, {rw_one * 1e3:.1f} ms for one '
        f'(start-up) -> {rw_per * 1e6:.1f} us/expr (parse+simplify+render)')
  print(f'speed: tinyrw is {tg_per / rw_per:.1f}x tinygrad per expression')
  print(f'size tinyrw/tinygrad: mean {statistics.mean(ratios):.4f}, geomean '
        f'{statistics.geometric_mean(ratios):.4f}; larger {len(larger)} ({len(larger) / n:.2%}), '
        f'equal {equal}, smaller {n - equal - len(larger)}')
  print(f'value disagreements on {args.points} random points: {len(disagree)}')
  for d in disagree[:10]: print('  DISAGREE', d)
  for s_rw, s_tg, src, ours, theirs in sorted(larger, reverse=True)[:10]:
    print(f'  larger {s_rw} vs {s_tg}: {src}\n    tinyrw   {ours}\n    tinygrad {theirs}')

  if args.write_corpus:
    spec = ' '.join(f'{v}={lo}..{hi}' for v, (lo, hi) in VARS.items())
    with open(args.write_corpus, 'w') as f:
      f.write('# A random corpus of index expressions with tinygrad\'s simplify().render() of each\n'
              f'# (bench/simplify_vs_tinygrad.py --n {n} --seed {args.seed}; tinygrad from its source\n'
              '# tree). Format as tinygrad_cases.txt: VARS | INPUT | TINYGRAD. Inputs are\n'
              '# non-negative everywhere, so C-style and floor // and % agree on them.\n')
      for src, theirs in zip(texts, tg['outs']):
        f.write(f'{spec} | {src} | {theirs}\n')
    print(f'wrote {args.write_corpus}')
  return 1 if disagree else 0


if __name__ == '__main__':
  sys.exit(main())
