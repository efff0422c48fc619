// Unit tests of the viewer's model (viewer/src/model.js) under Node: parsing and checking dumps,
// the graph at each step, the renders and the diff. Also checks that `rw viz --text` prints the
// same renders as the page.
//   node test_model.mjs RW SOURCE_DIR
import assert from 'node:assert/strict';
import {spawnSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const [rw, srcDir] = process.argv.slice(2);
const M = await import(pathToFileURL(path.join(srcDir, 'viewer/src/model.js')).href);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tinyrw-viz-model-'));
let failures = 0;
function test(name, fn) {
  try {
    fn();
    console.log(`ok    ${name}`);
  } catch (e) {
    console.log(`FAIL  ${name}\n${e.stack}`);
    ++failures;
  }
}

const exprFile = path.join(srcDir, 'examples/index_expressions.txt');
const dumpFile = path.join(tmp, 'd.json');
const sim = spawnSync(rw, ['simplify', '--var', 'x=0..100', '--var', 'y=0..50', '--var', 'z=1..10', '--viz', dumpFile,
                           '--batch', exprFile], {encoding: 'utf8'});
assert.equal(sim.status, 0, sim.stderr);
const dumpText = fs.readFileSync(dumpFile, 'utf8');

const node = (id, op, src = [], arg = 'None') => ({id, op, dtype: 'dtypes.index', src, arg, tag: null});
const rule = {name: 'r', file: 'f.rw', line: 1, source: 's'};
const doc = (nodes, calls, groups = []) => JSON.stringify({format: 'tinyrw-viz', version: 1, nodes, groups, calls});
const call = (root, result, matches) => ({id: 0, group: null, name: 'c', location: 'l:1', depth: 0, mode: 'pm', root, result,
                                          matches: matches.map(([before, after]) => ({before, after, rule, ns: 1}))});

test('a real dump parses, and every call ends on its recorded result', () => {
  const d = M.parseDump(dumpText);
  assert.ok(d.calls.length > 0 && d.matchCount > 0);
  for (const c of d.calls) assert.equal(d.graphAt(c.id, c.matches.length).root, c.result, `call ${c.id}`);
});

test('the results render as rw simplify prints them', () => {
  const d = M.parseDump(dumpText);
  const lines = sim.stdout.trimEnd().split('\n');
  assert.equal(d.calls.length, lines.length);
  d.calls.forEach((c, i) => assert.equal(M.exprText(d, c.result), lines[i]));
});

test('rw viz --text prints the same before/after renders as the page', () => {
  const d = M.parseDump(dumpText);
  const out = spawnSync(rw, ['viz', '--text', dumpFile], {encoding: 'utf8'}).stdout;
  for (const c of d.calls) {
    for (const m of c.matches) {
      assert.ok(out.includes(`n${String(m.before).padEnd(4)} ${M.exprText(d, m.before)}`), `before of call ${c.id}`);
      assert.ok(out.includes(`n${String(m.after).padEnd(4)} ${M.exprText(d, m.after)}`), `after of call ${c.id}`);
    }
  }
  const full = spawnSync(rw, ['viz', '--text', '--call', '3', dumpFile], {encoding: 'utf8'}).stdout;
  for (const l of M.prettyLines(d, d.calls[3].root)) assert.ok(full.includes(l), l);
});

test('truncated, empty and malformed dumps give clear errors', () => {
  assert.throws(() => M.parseDump(dumpText.slice(0, 500)), /not valid JSON.*truncated/s);
  assert.throws(() => M.parseDump(''), /the file is empty/);
  assert.throws(() => M.parseDump('{"format": "other"}'), /format: is "other"/);
  assert.throws(() => M.parseDump(doc([node(0, 'CONST', [1])], [])), /nodes\[0\]\.src\[0\]: 1 is not the id of an earlier node/);
  assert.throws(() => M.parseDump(doc([node(0, 'CONST')], [call(0, 3, [])])), /calls\[0\]\.result: 3 is not a node id/);
  assert.throws(() => M.parseDump(doc([node(0, 'CONST')], [{...call(0, 0, []), matches: [{before: 0, after: 0, ns: 1}]}])),
                /calls\[0\]\.matches\[0\]\.rule/);
  // The same structural checks as rw viz --text: depth follows the calls before it, ns is a time.
  assert.throws(() => M.parseDump(doc([node(0, 'CONST')], [{...call(0, 0, []), depth: 1e9}])),
                /calls\[0\]\.depth: is 1000000000, deeper than the calls before it allow \(at most 0\)/);
  assert.throws(() => M.parseDump(doc([node(0, 'CONST')], [{...call(0, 0, [[0, 0]]), matches: [{before: 0, after: 0, rule, ns: -1}]}])),
                /calls\[0\]\.matches\[0\]\.ns/);
});

test('steps rebuild parents: a pm rewrite of a source changes the root', () => {
  // root = ADD(MUL(x, 1), 0); match 0: MUL(x,1) -> x; match 1: ADD(x, 0) -> x (ADD(x,0) is in the table).
  const nodes = [node(0, 'DEFINE_VAR', [], "('x', 0, 9)"), node(1, 'CONST', [], '1'), node(2, 'MUL', [0, 1]),
                 node(3, 'CONST', [], '0'), node(4, 'ADD', [2, 3]), node(5, 'ADD', [0, 3])];
  const d = M.parseDump(doc(nodes, [call(4, 0, [[2, 0], [5, 0]])]));
  assert.equal(M.exprText(d, d.graphAt(0, 0).root), '(x*1+0)');
  assert.equal(d.graphAt(0, 1).root, 5, 'the rebuilt ADD(x, 0) is the table node 5');
  assert.deepEqual([...d.changedAt(0, 1)], [5]);
  assert.equal(d.graphAt(0, 2).root, 0);
  assert.equal(d.nodes.length, 6, 'nothing rebuilt that the table has');
  // Without node 5 in the table the rebuilt node is new and marked.
  const d2 = M.parseDump(doc(nodes.slice(0, 5), [call(4, null, [[2, 0]])]));
  const r = d2.graphAt(0, 1).root;
  assert.ok(r >= 5 && d2.nodes[r].rebuilt && M.exprText(d2, r) === '(x+0)');
  assert.equal(d2.graphAt(0, 1).root, r, 'the same step gives the same node');
});

test('a cycle of replacements does not hang', () => {
  const nodes = [node(0, 'CONST', [], '1'), node(1, 'CONST', [], '2'), node(2, 'NEG', [0])];
  const d = M.parseDump(doc(nodes, [call(2, null, [[0, 1], [1, 0]])]));
  assert.ok(d.graphAt(0, 2).order.length >= 2);
});

test('deep graphs do not exhaust the stack', () => {
  const nodes = [node(0, 'DEFINE_VAR', [], "('x', 0, 9)"), node(1, 'CONST', [], '1'), node(2, 'CONST', [], '2')];
  for (let i = 0; i < 50000; ++i) nodes.push(node(nodes.length, 'ADD', [nodes.length - 1, 1]));
  nodes[3].src = [0, 1];
  const top = nodes.length - 1;
  const d = M.parseDump(doc(nodes, [call(top, null, [[1, 2]])]));
  const g = d.graphAt(0, 1);
  assert.equal(g.order.length, 50000 + 2);
  assert.ok(M.prettyLines(d, g.root).length > 100);
  assert.ok(M.exprText(d, g.root).length > 10);
});

test('prettyLines names shared nodes, as tinygrad does', () => {
  const nodes = [node(0, 'DEFINE_VAR', [], "('x', 0, 9)"), node(1, 'ADD', [0, 0])];
  const d = M.parseDump(doc(nodes, [call(1, 1, [])]));
  assert.deepEqual(M.prettyLines(d, 1), [
    'UOp(Ops.ADD, dtypes.index, arg=None, src=(',
    "  x0:=UOp(Ops.DEFINE_VAR, dtypes.index, arg=('x', 0, 9), src=()),",
    '  x0,))',
  ]);
});

test('exprText follows Python precedence like ir/render.cpp', () => {
  const nodes = [node(0, 'DEFINE_VAR', [], "('a', 0, 9)"), node(1, 'DEFINE_VAR', [], "('b', 0, 9)"),
                 node(2, 'SUB', [0, 1]), node(3, 'SUB', [0, 2]), node(4, 'FLOORDIV', [3, 1]),
                 node(5, 'CMPLT', [0, 1]), node(6, 'CONST', [], 'True'), node(7, 'CMPNE', [5, 6]),
                 node(8, 'WHERE', [7, 0, 1]), node(9, 'MAX', [8, 4]), node(10, 'SINK', [9], 'None')];
  const d = M.parseDump(doc(nodes, [call(10, 10, [])]));
  assert.equal(M.exprText(d, 4), '((a-(a-b))//b)');
  assert.equal(M.exprText(d, 7), '(a>=b)');
  assert.equal(M.exprText(d, 10), 'SINK(max((a if a>=b else b), (a-(a-b))//b))');
});

test('exprText writes a RANGE as its axis letter and ids, like ir/axis.cpp', () => {
  const nodes = [node(0, 'CONST', [], '4'), node(1, 'RANGE', [0], "(0, 'WEAK')"),
                 node(2, 'RANGE', [0], "(1, 2, 'REDUCE')"), node(3, 'RANGE', [0], "(-1, 'DEVICE')"),
                 node(4, 'MUL', [1, 0]), node(5, 'ADD', [4, 2]), node(6, 'ADD', [5, 3]),
                 node(7, 'RANGE', [0], "(0, 'SIDEWAYS')"), node(8, 'SINK', [6, 7], 'None')];
  const text = doc(nodes, [call(8, 8, [[6, 5]])]);
  const d = M.parseDump(text);
  assert.equal(M.exprText(d, 6), '(L0*4+R1_2+dm1)');
  assert.ok(M.exprText(d, 7).startsWith('RANGE('), 'an unknown axis type is written as the op');
  // rw viz --text (tools/rw/viz.cpp) writes them the same
  const file = path.join(tmp, 'ranges.json');
  fs.writeFileSync(file, text);
  const out = spawnSync(rw, ['viz', '--text', file], {encoding: 'utf8'});
  assert.equal(out.status, 0, out.stderr);
  assert.ok(out.stdout.includes('(L0*4+R1_2+dm1)'), out.stdout);
  assert.ok(out.stdout.includes('(L0*4+R1_2)'), out.stdout);
});

test('layoutCost: a constant shared by a long chain is cheap once drawn per use', () => {
  const nodes = [node(0, 'DEFINE_VAR', [], "('x', 0, 9)"), node(1, 'CONST', [], '1')];
  for (let i = 0; i < 300; ++i) nodes.push(node(nodes.length, 'ADD', [i ? nodes.length - 1 : 0, 1]));
  const d = M.parseDump(doc(nodes, [call(nodes.length - 1, null, [])]));
  const order = d.graphAt(0, 0).order;
  const shared = M.layoutCost(d, order, false).cost, dup = M.layoutCost(d, order, true).cost;
  assert.ok(shared > 40000, `one CONST node: ~n^2/2 dummy nodes (${shared})`);
  assert.equal(dup, 302 - 1 + 300, 'one CONST per use: no dummies');
});

test('diffLines: applying the diff turns a into b', () => {
  let seed = 7;
  const rnd = (n) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  for (let t = 0; t < 300; ++t) {
    const a = Array.from({length: rnd(12)}, () => 'l' + rnd(4));
    const b = Array.from({length: rnd(12)}, () => 'l' + rnd(4));
    const d = M.diffLines(a, b);
    assert.deepEqual(d.filter((l) => l.t !== '+').map((l) => l.s), a);
    assert.deepEqual(d.filter((l) => l.t !== '-').map((l) => l.s), b);
  }
  assert.deepEqual(M.diffLines(['a', 'b', 'c'], ['a', 'x', 'c']).map((l) => l.t + l.s), [' a', '-b', '+x', ' c']);
  const h = M.hunks(M.diffLines([...'abcdefghij'], [...'abcdeXghij']), 1);
  assert.deepEqual(h.map((l) => (l.skipped ? `@${l.skipped}` : l.t + l.s)), ['@4', ' e', '-f', '+X', ' g', '@3']);
});

fs.rmSync(tmp, {recursive: true, force: true});
console.log(failures ? `${failures} test(s) failed` : 'all checks passed');
process.exit(failures ? 1 : 0);
