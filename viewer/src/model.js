// The VIZ dump model: parsing and checking a `tinyrw-viz` document (docs/viz-format.md), the graph
// of a call at each step (rebuilt lazily, one step at a time), and the text renders the viewer
// shows and diffs. No DOM here: tests/viz/test_model.mjs runs this file under Node.

export class DumpError extends Error {
  constructor(message) {
    super(message);
    this.name = 'DumpError';
  }
}

// ---- parsing and checking

function describeJsonError(text, err) {
  const msg = String(err && err.message ? err.message : err);
  const trimmed = text.replace(/\s+$/, '');
  if (trimmed.length === 0) return 'the file is empty';
  const truncated = /end of JSON input|Unterminated|unexpected end/i.test(msg) ||
      !/[}\]]$/.test(trimmed);
  return `it is not valid JSON (${msg})` +
      (truncated ? '. The file looks truncated: was the traced program killed before VIZ wrote ' +
                   'the whole dump, or is the file still being written?'
                 : '');
}

const isInt = (v) => Number.isInteger(v);
const isStr = (v) => typeof v === 'string';

// Checks the whole document; throws DumpError naming the first bad field (e.g.
// "calls[3].matches[7].after: 812 is not a node id (the dump has 500 nodes)").
export function checkDump(doc) {
  const fail = (where, what) => {
    throw new DumpError(`${where}: ${what}`);
  };
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc))
    fail('the document', 'is not a JSON object');
  if (doc.format !== 'tinyrw-viz')
    fail('format', `is ${JSON.stringify(doc.format)}, expected "tinyrw-viz" (is this a VIZ dump?)`);
  if (doc.version !== 1) fail('version', `is ${JSON.stringify(doc.version)}, this viewer reads version 1`);
  for (const key of ['nodes', 'groups', 'calls'])
    if (!Array.isArray(doc[key])) fail(key, 'is missing or not an array');
  const nn = doc.nodes.length, ng = doc.groups.length;
  const nodeRef = (where, v) => {
    if (!isInt(v) || v < 0 || v >= nn)
      fail(where, `${JSON.stringify(v)} is not a node id (the dump has ${nn} nodes)`);
  };
  doc.nodes.forEach((n, i) => {
    const w = `nodes[${i}]`;
    if (n === null || typeof n !== 'object') fail(w, 'is not an object');
    if (n.id !== i) fail(`${w}.id`, `is ${JSON.stringify(n.id)}, expected ${i}`);
    for (const k of ['op', 'dtype', 'arg'])
      if (!isStr(n[k])) fail(`${w}.${k}`, 'is missing or not a string');
    if (n.tag !== null && n.tag !== undefined && !isStr(n.tag)) fail(`${w}.tag`, 'is not a string or null');
    if (!Array.isArray(n.src)) fail(`${w}.src`, 'is missing or not an array');
    for (let j = 0; j < n.src.length; ++j) {
      const s = n.src[j];
      if (!isInt(s) || s < 0 || s >= i)
        fail(`${w}.src[${j}]`, `${JSON.stringify(s)} is not the id of an earlier node`);
    }
  });
  doc.groups.forEach((g, i) => {
    const w = `groups[${i}]`;
    if (g === null || typeof g !== 'object') fail(w, 'is not an object');
    if (g.id !== i) fail(`${w}.id`, `is ${JSON.stringify(g.id)}, expected ${i}`);
    if (!isStr(g.name)) fail(`${w}.name`, 'is missing or not a string');
    if (g.parent !== null && (!isInt(g.parent) || g.parent < 0 || g.parent >= i))
      fail(`${w}.parent`, `${JSON.stringify(g.parent)} is not null or the id of an earlier group`);
  });
  doc.calls.forEach((c, i) => {
    const w = `calls[${i}]`;
    if (c === null || typeof c !== 'object') fail(w, 'is not an object');
    if (c.id !== i) fail(`${w}.id`, `is ${JSON.stringify(c.id)}, expected ${i}`);
    if (c.group !== null && (!isInt(c.group) || c.group < 0 || c.group >= ng))
      fail(`${w}.group`, `${JSON.stringify(c.group)} is not null or a group id (the dump has ${ng} groups)`);
    for (const k of ['name', 'location', 'mode'])
      if (!isStr(c[k])) fail(`${w}.${k}`, 'is missing or not a string');
    if (!isInt(c.depth) || c.depth < 0) fail(`${w}.depth`, 'is not a non-negative integer');
    // Calls are listed as they started, so a call is at most one deeper than the one before.
    const maxDepth = i === 0 ? 0 : doc.calls[i - 1].depth + 1;
    if (c.depth > maxDepth)
      fail(`${w}.depth`, `is ${c.depth}, deeper than the calls before it allow (at most ${maxDepth})`);
    nodeRef(`${w}.root`, c.root);
    if (c.result !== null) nodeRef(`${w}.result`, c.result);
    if (!Array.isArray(c.matches)) fail(`${w}.matches`, 'is missing or not an array');
    for (let j = 0; j < c.matches.length; ++j) {
      const m = c.matches[j], mw = `${w}.matches[${j}]`;
      if (m === null || typeof m !== 'object') fail(mw, 'is not an object');
      nodeRef(`${mw}.before`, m.before);
      nodeRef(`${mw}.after`, m.after);
      const r = m.rule;
      if (r === null || typeof r !== 'object') fail(`${mw}.rule`, 'is missing or not an object');
      if (!isStr(r.name) || !isStr(r.file) || !isStr(r.source) || !isInt(r.line))
        fail(`${mw}.rule`, 'needs name, file, source (strings) and line (an integer)');
      if (typeof m.ns !== 'number' || !(m.ns >= 0) || !Number.isFinite(m.ns))
        fail(`${mw}.ns`, 'is missing or not a non-negative number');
    }
  });
}

// Parses and checks the text of a dump; throws DumpError with a message for people.
export function parseDump(text) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new DumpError(`This VIZ dump cannot be read: ${describeJsonError(text, e)}`);
  }
  try {
    checkDump(doc);
  } catch (e) {
    if (e instanceof DumpError) throw new DumpError(`This VIZ dump is malformed: ${e.message}`);
    throw e;
  }
  return new Dump(doc);
}

// ---- the dump

export class Dump {
  constructor(doc) {
    this.doc = doc;
    this.nodes = doc.nodes;  // grows: nodes rebuilt while applying matches are appended
    this.tableSize = doc.nodes.length;
    this.groups = doc.groups;
    this.calls = doc.calls;
    this.matchCount = 0;
    for (const c of doc.calls) this.matchCount += c.matches.length;
    this.intern = null;  // structure key -> node id, built on first use
    this.cache = new Map();  // "call:step" -> graph (a few, most recent last)
    this.mapCache = null;  // {call, k, map}: the replacements of the last step asked for
  }

  static key(op, dtype, arg, tag, src) {
    return `${op}\u0000${dtype}\u0000${arg}\u0000${tag === null || tag === undefined ? '\u0001' : tag}\u0000${src.join(',')}`;
  }

  // The node like `id` with sources `src`: a node of the table when one has that structure,
  // otherwise a new (rebuilt) node, marked `rebuilt`.
  rebuild(id, src) {
    if (!this.intern) {
      this.intern = new Map();
      for (const n of this.nodes) {
        const k = Dump.key(n.op, n.dtype, n.arg, n.tag, n.src);
        if (!this.intern.has(k)) this.intern.set(k, n.id);
      }
    }
    const n = this.nodes[id];
    const k = Dump.key(n.op, n.dtype, n.arg, n.tag, src);
    const hit = this.intern.get(k);
    if (hit !== undefined) return hit;
    const nid = this.nodes.length;
    this.nodes.push({id: nid, op: n.op, dtype: n.dtype, arg: n.arg, tag: n.tag ?? null, src, rebuilt: true});
    this.intern.set(k, nid);
    return nid;
  }

  groupPath(gid) {
    const path = [];
    for (let g = gid; g !== null && g !== undefined; g = this.groups[g].parent) path.unshift(g);
    return path;
  }

  // The parent call of call `i` (the closest earlier call one level up), or null.
  parentCall(i) {
    const d = this.calls[i].depth;
    if (d === 0) return null;
    for (let j = i - 1; j >= 0; --j) if (this.calls[j].depth === d - 1) return j;
    return null;
  }

  // Replacements before -> after of matches 0..k-1 of call `ci` (a later match wins).
  replacements(ci, k) {
    const c = this.calls[ci];
    let mc = this.mapCache;
    if (!mc || mc.call !== ci || mc.k > k) mc = {call: ci, k: 0, map: new Map()};
    for (let i = mc.k; i < k; ++i) mc.map.set(c.matches[i].before, c.matches[i].after);
    mc.k = k;
    this.mapCache = mc;
    return mc.map;
  }

  // The graph of call `ci` at step k (0: before the first match; k: after match k, 1-based):
  // {root, order (ids, sources first), set}.
  graphAt(ci, k) {
    const key = `${ci}:${k}`;
    const hit = this.cache.get(key);
    if (hit) {
      this.cache.delete(key);
      this.cache.set(key, hit);
      return hit;
    }
    const root = substitute(this, this.calls[ci].root, this.replacements(ci, k));
    const order = toposort(this, root);
    const g = {root, order, set: new Set(order)};
    this.cache.set(key, g);
    while (this.cache.size > 8) this.cache.delete(this.cache.keys().next().value);
    return g;
  }

  // Nodes of step k's graph that were not in step k-1's (none for step 0).
  changedAt(ci, k) {
    if (k === 0) return new Set();
    const prev = this.graphAt(ci, k - 1), cur = this.graphAt(ci, k);
    const out = new Set();
    for (const n of cur.order) if (!prev.set.has(n)) out.add(n);
    return out;
  }
}

// Rewrites the graph under `root` with the replacements `map` (node -> node), rebuilding every
// node whose sources changed; a rebuilt node that is itself replaced is replaced in turn.
// Iterative, so deep graphs do not exhaust the stack.
export function substitute(d, root, map) {
  if (map.size === 0) return root;
  const memo = new Map(), active = new Set();
  const stack = [{n: root, phase: 0, r: -1}];
  const done = (f, v) => {
    memo.set(f.n, v);
    active.delete(f.n);
    stack.pop();
  };
  while (stack.length) {
    const f = stack[stack.length - 1];
    const n = f.n;
    if (f.phase === 0) {
      if (memo.has(n) || active.has(n)) {
        stack.pop();
        continue;
      }
      active.add(n);
      const t = map.get(n);
      if (t !== undefined && t !== n && !active.has(t)) {
        f.phase = 1;
        f.r = t;
        if (!memo.has(t)) stack.push({n: t, phase: 0, r: -1});
        continue;
      }
      f.phase = 2;
      const src = d.nodes[n].src;
      for (let i = src.length - 1; i >= 0; --i)
        if (!memo.has(src[i]) && !active.has(src[i])) stack.push({n: src[i], phase: 0, r: -1});
      continue;
    }
    if (f.phase === 1) {
      done(f, memo.has(f.r) ? memo.get(f.r) : f.r);
      continue;
    }
    const src = d.nodes[n].src;
    let changed = false;
    const ns = new Array(src.length);
    for (let i = 0; i < src.length; ++i) {
      const v = memo.has(src[i]) ? memo.get(src[i]) : src[i];
      ns[i] = v;
      if (v !== src[i]) changed = true;
    }
    const r = changed ? d.rebuild(n, ns) : n;
    if (r !== n && map.has(r) && !active.has(r)) {
      f.phase = 1;
      f.r = r;
      if (!memo.has(r)) stack.push({n: r, phase: 0, r: -1});
      continue;
    }
    done(f, r);
  }
  return memo.get(root);
}

// The nodes under root, sources first.
export function toposort(d, root) {
  const order = [], seen = new Set([root]);
  const stack = [[root, 0]];
  while (stack.length) {
    const top = stack[stack.length - 1];
    const src = d.nodes[top[0]].src;
    if (top[1] < src.length) {
      const s = src[top[1]++];
      if (!seen.has(s)) {
        seen.add(s);
        stack.push([s, 0]);
      }
      continue;
    }
    order.push(top[0]);
    stack.pop();
  }
  return order;
}

// ---- renders

// tinygrad's UOp repr, one node a line; a node used more than once is written `xID:=UOp(...)` the
// first time and `xID` after (ID is the node's id in the dump, so names are stable across steps).
export function prettyLines(d, root, maxLines = 4000) {
  const refs = new Map(), seen = new Set([root]), order = [root];
  for (let i = 0; i < order.length; ++i) {
    for (const s of d.nodes[order[i]].src) {
      refs.set(s, (refs.get(s) || 0) + 1);
      if (!seen.has(s)) {
        seen.add(s);
        order.push(s);
      }
    }
  }
  const lines = [], printed = new Set();
  const stack = [{n: root, depth: 0, i: -1}];
  const finish = () => {
    stack.pop();
    if (stack.length) lines[lines.length - 1] += ',';
  };
  while (stack.length) {
    if (lines.length >= maxLines) {
      lines.push(`... (render cut at ${maxLines} lines)`);
      break;
    }
    const f = stack[stack.length - 1];
    const node = d.nodes[f.n];
    if (f.i === -1) {
      const ind = ' '.repeat(f.depth);
      if (printed.has(f.n)) {
        lines.push(`${ind}x${f.n}`);
        finish();
        continue;
      }
      printed.add(f.n);
      const name = (refs.get(f.n) || 0) > 1 ? `x${f.n}:=` : '';
      const tag = node.tag === null || node.tag === undefined ? '' : `, tag=${node.tag}`;
      lines.push(`${ind}${name}UOp(Ops.${node.op}, ${node.dtype}, arg=${node.arg}${tag}, src=(`);
      f.i = 0;
    }
    if (f.i < node.src.length) {
      stack.push({n: node.src[f.i++], depth: f.depth + 2, i: -1});
      continue;
    }
    lines[lines.length - 1] += '))';
    finish();
  }
  return lines;
}

const BINARY = {
  ADD: ['+', 11], SUB: ['-', 11], MUL: ['*', 12], FLOORDIV: ['//', 12], FLOORMOD: ['%', 12],
  CMPLT: ['<', 6], CMPNE: ['!=', 6], CMPEQ: ['==', 6], AND: ['&', 9], OR: ['|', 7],
  XOR: ['^', 8], SHL: ['<<', 10], SHR: ['>>', 10],
};
const CALLS = {MAX: 'max', CDIV: 'cdiv', CMOD: 'cmod'};

// A RANGE's label as ir/axis.cpp's range_label writes it: the axis type's letter, then the ids
// joined by '_' (a negative id as m<id>): (0, 'WEAK') -> L0, (1, 2, 'REDUCE') -> R1_2.
const AXIS_LETTERS = {
  DEVICE: 'd', GLOBAL: 'g', WARP: 'w', LOCAL: 'l', WEAK: 'L', GROUP_REDUCE: 'G', REDUCE: 'R',
  UPCAST: 'u', UNROLL: 'r', THREAD: 't', PLACEHOLDER: 'p', LOOP: 'L',
};
function rangeLabel(arg) {
  const m = /^\((-?\d+(?:, -?\d+)*), '([A-Z_]+)'\)$/.exec(arg);
  if (!m || !(m[2] in AXIS_LETTERS)) return null;
  return AXIS_LETTERS[m[2]] + m[1].split(', ').map((i) => (i[0] === '-' ? 'm' + i.slice(1) : i)).join('_');
}

function leafName(arg) {
  const m = /^\(?'((?:[^'\\]|\\.)*)'/.exec(arg);
  return m ? m[1] : arg;
}

// One line of Python syntax, as `rw simplify` prints (ir/render.cpp); ops without Python syntax
// are written OP(src..., arg=...). Cut at maxLen characters.
export function exprText(d, root, maxLen = 400) {
  const precMemo = new Map();
  const prec = (n) => {
    if (precMemo.has(n)) return precMemo.get(n);
    const u = d.nodes[n];
    let p = 20;
    if (BINARY[u.op]) p = BINARY[u.op][1];
    else if (u.op === 'CONST') p = u.arg.startsWith('-') ? 13 : 20;
    else if (u.op === 'NEG') p = 13;
    else if (u.op === 'BIND' && u.src.length) p = prec(u.src[0]);
    precMemo.set(n, p);
    return p;
  };
  let out = '';
  const stack = [];  // strings or [node, paren]
  const emitNode = (n, paren) => stack.push([n, paren]);
  const negated = (u) => {
    if (u.op !== 'CMPNE' || u.src.length !== 2) return null;
    const c = d.nodes[u.src[1]], a = d.nodes[u.src[0]];
    if (c.op !== 'CONST' || c.arg !== 'True') return null;
    if (a.src.length && d.nodes[a.src[0]].dtype === 'dtypes.bool') return null;
    return {CMPLT: '>=', CMPNE: '==', CMPEQ: '!='}[a.op] || null;
  };
  emitNode(root, !!BINARY[d.nodes[root].op]);
  let depth = 0;
  while (stack.length) {
    if (out.length > maxLen) return out.slice(0, maxLen) + '…';
    if (++depth > 200000) break;
    const item = stack.pop();
    if (typeof item === 'string') {
      out += item;
      continue;
    }
    const [n, paren] = item;
    const u = d.nodes[n];
    const parts = [];
    const child = (i, p) => parts.push([u.src[i], p]);
    if (paren) {
      stack.push(')', [n, false], '(');
      continue;
    }
    const neg = negated(u);
    if (neg) {
      const cmp = d.nodes[u.src[0]];
      parts.push([cmp.src[0], prec(cmp.src[0]) <= 6], neg, [cmp.src[1], prec(cmp.src[1]) <= 6]);
    } else if (BINARY[u.op] && u.src.length === 2) {
      const [sym, p] = BINARY[u.op];
      const l = prec(u.src[0]), r = prec(u.src[1]);
      child(0, l < p || (p === 6 && l === 6));
      parts.push(sym);
      child(1, r <= p);
    } else if (u.op === 'CONST' && !u.src.length) {
      parts.push(['inf', '-inf', 'nan'].includes(u.arg) ? `float('${u.arg}')` : u.arg);
    } else if ((u.op === 'DEFINE_VAR' || u.op === 'SPECIAL')) {
      parts.push(leafName(u.arg));
    } else if (u.op === 'RANGE' && rangeLabel(u.arg)) {
      parts.push(rangeLabel(u.arg));
    } else if (u.op === 'BIND' && u.src.length) {
      child(0, false);
    } else if (u.op === 'NEG' && u.src.length === 1) {
      parts.push('-');
      child(0, prec(u.src[0]) < 13);
    } else if (u.op === 'WHERE' && u.src.length === 3) {
      parts.push('(');
      child(1, false);
      parts.push(' if ');
      child(0, false);
      parts.push(' else ');
      child(2, false);
      parts.push(')');
    } else {
      let fn = CALLS[u.op] && u.src.length === 2 ? CALLS[u.op] : u.op;
      if (u.op === 'CAST' && u.src.length === 1) {
        fn = u.dtype === 'dtypes.bool' ? 'bool'
           : /^dtypes\.(float|half|double|bfloat16|fp8)/.test(u.dtype) ? 'float' : 'int';
      }
      parts.push(fn + '(');
      u.src.forEach((_, i) => {
        if (i) parts.push(', ');
        child(i, false);
      });
      if (fn === u.op && u.arg !== 'None') parts.push((u.src.length ? ', ' : '') + 'arg=' + u.arg);
      parts.push(')');
    }
    for (let i = parts.length - 1; i >= 0; --i) stack.push(parts[i]);
  }
  return out;
}

// About how much work laying out the graph `order` is for dagre: its nodes plus the dummy nodes
// that edges spanning several ranks need (ranks by longest path). With dupLeaves, a leaf (a node
// without sources) used more than once counts once per use, as the viewer then draws it.
export function layoutCost(d, order, dupLeaves) {
  const rank = new Map(), uses = new Map();
  for (const id of order) {
    let r = 0;
    for (const s of d.nodes[id].src) {
      r = Math.max(r, rank.get(s) + 1);
      uses.set(s, (uses.get(s) || 0) + 1);
    }
    rank.set(id, r);
  }
  const dup = (id) => dupLeaves && d.nodes[id].src.length === 0 && (uses.get(id) || 0) > 1;
  let cost = 0;
  for (const id of order) {
    cost += dup(id) ? uses.get(id) : 1;
    for (const s of d.nodes[id].src) if (!dup(s)) cost += rank.get(id) - rank.get(s) - 1;
  }
  return {cost, uses};
}

// A short label for a node in the graph drawing: [op, arg or '', dtype without "dtypes."].
export function nodeLabel(node) {
  const dt = node.dtype.startsWith('dtypes.') ? node.dtype.slice(7) : node.dtype;
  let arg = node.arg === 'None' ? '' : node.arg;
  if (arg.length > 32) arg = arg.slice(0, 31) + '…';
  return [node.op, arg, dt];
}

// ---- diff

// Myers' O(ND) line diff. Returns [{t: ' ' | '-' | '+', s: line}]; when more than maxD edits
// are needed the result is "all removed, all added".
export function diffLines(a, b, maxD = 3000) {
  const n = a.length, m = b.length;
  let lo = 0;
  while (lo < n && lo < m && a[lo] === b[lo]) ++lo;
  let ea = n, eb = m;
  while (ea > lo && eb > lo && a[ea - 1] === b[eb - 1]) {
    --ea;
    --eb;
  }
  const head = a.slice(0, lo).map((s) => ({t: ' ', s}));
  const tail = a.slice(ea).map((s) => ({t: ' ', s}));
  const A = a.slice(lo, ea), B = b.slice(lo, eb);
  const N = A.length, M = B.length, max = N + M;
  const mid = [];
  if (N === 0 || M === 0) {
    for (const s of A) mid.push({t: '-', s});
    for (const s of B) mid.push({t: '+', s});
    return head.concat(mid, tail);
  }
  const off = max + 1;
  let v = new Int32Array(2 * max + 3);
  const trace = [];
  let found = -1;
  for (let D = 0; D <= Math.min(max, maxD); ++D) {
    trace.push(v.slice());
    for (let k = -D; k <= D; k += 2) {
      let x = k === -D || (k !== D && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      while (x < N && y < M && A[x] === B[y]) {
        ++x;
        ++y;
      }
      v[off + k] = x;
      if (x >= N && y >= M) {
        found = D;
        break;
      }
    }
    if (found >= 0) break;
  }
  if (found < 0) {
    for (const s of A) mid.push({t: '-', s});
    for (const s of B) mid.push({t: '+', s});
    return head.concat(mid, tail);
  }
  // Backtrack.
  let x = N, y = M;
  const rev = [];
  for (let D = found; D > 0; --D) {
    const vv = trace[D];
    const k = x - y;
    const prevK = k === -D || (k !== D && vv[off + k - 1] < vv[off + k + 1]) ? k + 1 : k - 1;
    const px = vv[off + prevK], py = px - prevK;
    while (x > px && y > py) {
      rev.push({t: ' ', s: A[--x]});
      --y;
    }
    if (x === px) rev.push({t: '+', s: B[--y]});
    else rev.push({t: '-', s: A[--x]});
  }
  while (x > 0 && y > 0) {
    rev.push({t: ' ', s: A[--x]});
    --y;
  }
  for (let i = rev.length - 1; i >= 0; --i) mid.push({t: rev[i].t, s: rev[i].s});
  return head.concat(mid, tail);
}

// Groups a diff into hunks with `context` unchanged lines around each change:
// [{skipped: count} | {t, s}].
export function hunks(diff, context = 3) {
  const keep = new Uint8Array(diff.length);
  diff.forEach((l, i) => {
    if (l.t !== ' ')
      for (let j = Math.max(0, i - context); j <= Math.min(diff.length - 1, i + context); ++j) keep[j] = 1;
  });
  const out = [];
  let skipped = 0;
  diff.forEach((l, i) => {
    if (keep[i]) {
      if (skipped) out.push({skipped});
      skipped = 0;
      out.push(l);
    } else {
      ++skipped;
    }
  });
  if (skipped) out.push({skipped});
  return out;
}

export function formatNs(ns) {
  if (ns < 1e3) return `${ns} ns`;
  if (ns < 1e6) return `${(ns / 1e3).toFixed(1)} µs`;
  if (ns < 1e9) return `${(ns / 1e6).toFixed(1)} ms`;
  return `${(ns / 1e9).toFixed(2)} s`;
}

export function basename(path) {
  const i = path.lastIndexOf('/');
  return i < 0 ? path : path.slice(i + 1);
}
