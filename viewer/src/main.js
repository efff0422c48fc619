// The VIZ viewer page: the list of groups and graph_rewrite calls, the steps of the chosen call,
// the graph at the chosen step (laid out by dagre, drawn with d3), the matched rule and a diff of
// the rendered graph. The dump is embedded in the page (rw viz --html) or fetched from the
// server (rw viz). State for tests lives on <body>: data-status (loading | ok | error),
// data-calls, data-call, data-step, data-steps, data-rendered ("call:step" once drawn),
// data-load-ms.
import {select, zoom, zoomIdentity, line, curveBasis} from 'd3';
import {Graph, layout} from '@dagrejs/dagre';
import {
  DumpError, parseDump, exprText, prettyLines, diffLines, hunks, nodeLabel, formatNs, basename, layoutCost,
} from './model.js';

const t0 = performance.now();
const body = document.body;
const $ = (sel) => document.querySelector(sel);
// Graphs whose estimated layout cost (nodes + dummy nodes, see layoutCost) is above this are laid
// out on request; above DUP_LEAVES, leaves used many times (constants, variables) are drawn once
// per use, which removes most long edges.
const LAYOUT_LIMIT = 2500;
const DUP_LEAVES = 600;
const ROW_H = 22;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function showError(message) {
  body.dataset.status = 'error';
  $('#app').hidden = true;
  const box = $('#error');
  box.querySelector('.msg').textContent = message;
  box.hidden = false;
}

function readConfig() {
  const text = $('#tinyrw-config').textContent.trim();
  if (!text || text.startsWith('@@')) return {};
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}

async function loadDump(cfg) {
  if (cfg.dumpUrl) {
    let r;
    try {
      r = await fetch(cfg.dumpUrl, {cache: 'no-store'});
    } catch (e) {
      throw new DumpError(`Could not fetch ${cfg.dumpUrl} (${e.message}). Is rw viz still running?`);
    }
    const text = await r.text();
    if (!r.ok) throw new DumpError(`Could not fetch ${cfg.dumpUrl}: HTTP ${r.status} ${text.trim()}`);
    return parseDump(text);
  }
  const text = $('#tinyrw-dump').textContent;
  if (text.startsWith('@@')) throw new DumpError('This page has no dump in it: open it with rw viz DUMP.json or rw viz --html OUT.html DUMP.json.');
  return parseDump(text);
}

// ---- a virtual list: only the visible rows exist in the DOM, so 100,000 rows stay cheap

class VList {
  constructor(root, renderRow, onPick) {
    this.root = root;
    this.renderRow = renderRow;
    this.n = 0;
    this.sel = -1;
    this.inner = el('div', 'vinner');
    root.appendChild(this.inner);
    root.addEventListener('scroll', () => this.draw());
    root.addEventListener('click', (e) => {
      const r = e.target.closest('.row');
      if (r) onPick(Number(r.dataset.i));
    });
    new ResizeObserver(() => this.draw()).observe(root);
  }
  setCount(n) {
    this.n = n;
    this.inner.style.height = `${n * ROW_H}px`;
    this.draw();
  }
  select(i) {
    this.sel = i;
    if (i >= 0) {
      const top = i * ROW_H, r = this.root;
      if (top < r.scrollTop) r.scrollTop = top;
      else if (top + ROW_H > r.scrollTop + r.clientHeight) r.scrollTop = top + ROW_H - r.clientHeight;
    }
    this.draw();
  }
  draw() {
    const r = this.root;
    const first = Math.max(0, Math.floor(r.scrollTop / ROW_H) - 4);
    const last = Math.min(this.n, Math.ceil((r.scrollTop + (r.clientHeight || 800)) / ROW_H) + 4);
    const rows = [];
    for (let i = first; i < last; ++i) {
      const row = el('div', 'row');
      row.dataset.i = i;
      row.style.top = `${i * ROW_H}px`;
      this.renderRow(i, row);
      if (i === this.sel) row.classList.add('sel');
      rows.push(row);
    }
    this.inner.replaceChildren(...rows);
  }
}

// ---- the application

class App {
  constructor(d, cfg) {
    this.d = d;
    this.cfg = cfg;
    this.call = -1;
    this.step = 0;
    this.onlyMatches = false;
    this.forceLayout = null;
    this.picked = null;
    this.pending = false;
    this.first = true;

    $('#source').textContent = cfg.source || '';
    $('#summary').textContent =
        `${d.calls.length} calls · ${d.matchCount} matches · ${d.tableSize} nodes · ${d.groups.length} groups`;
    body.dataset.calls = d.calls.length;

    this.callsList = new VList($('#calls'), (i, row) => this.renderCallRow(i, row), (i) => {
      const r = this.rows[i];
      if (r.kind === 'call') this.go(r.call, 0);
      else if (r.firstCall !== undefined) this.go(r.firstCall, 0);
    });
    this.stepsList = new VList($('#steps'), (i, row) => this.renderStepRow(i, row), (i) => this.go(this.call, i));
    $('#only-matches').addEventListener('change', (e) => {
      this.onlyMatches = e.target.checked;
      this.buildRows();
      if (this.onlyMatches && !this.d.calls[this.call].matches.length && this.callOrder.length)
        this.go(this.callOrder[0], 0);
      else this.go(this.call, this.step);
    });
    this.initGraph();
    window.addEventListener('keydown', (e) => this.onKey(e));
    this.buildRows();
  }

  // Rows of the calls list: group headers (nested) and calls (indented by depth).
  buildRows() {
    const d = this.d;
    this.rows = [];
    this.rowOfCall = new Map();
    this.callOrder = [];
    let chain = [];
    for (const c of d.calls) {
      if (this.onlyMatches && !c.matches.length) continue;
      const path = d.groupPath(c.group);
      let i = 0;
      while (i < chain.length && i < path.length && chain[i] === path[i]) ++i;
      for (let j = i; j < path.length; ++j) this.rows.push({kind: 'group', group: path[j], indent: j, firstCall: c.id});
      chain = path;
      this.rowOfCall.set(c.id, this.rows.length);
      this.callOrder.push(c.id);
      this.rows.push({kind: 'call', call: c.id, indent: path.length + c.depth});
    }
    this.posInOrder = new Map(this.callOrder.map((c, i) => [c, i]));
    this.callsList.setCount(this.rows.length);
  }

  renderCallRow(i, row) {
    const r = this.rows[i];
    row.style.paddingLeft = `${6 + r.indent * 14}px`;
    if (r.kind === 'group') {
      row.classList.add('group');
      row.append(el('span', 'name', `▾ ${this.d.groups[r.group].name}`));
      return;
    }
    const c = this.d.calls[r.call];
    if (!c.matches.length) row.classList.add('empty');
    row.title = `call ${c.id}: ${c.name} (${c.mode}) at ${c.location}, depth ${c.depth}`;
    row.append(el('span', 'num', `#${c.id}`), el('span', 'name', c.name), el('span', 'meta', c.mode),
               el('span', c.matches.length ? 'count some' : 'count', String(c.matches.length)));
  }

  renderStepRow(i, row) {
    row.style.paddingLeft = '4px';
    if (i === 0) {
      row.append(el('span', 'num', '0'), el('span', 'name', 'initial graph'));
      return;
    }
    const m = this.d.calls[this.call].matches[i - 1];
    row.title = `${m.rule.name} at ${m.rule.file}:${m.rule.line}\n${m.rule.source}`;
    row.append(el('span', 'num', String(i)), el('span', 'name', m.rule.name),
               el('span', 'meta', m.rule.file ? `${basename(m.rule.file)}:${m.rule.line}` : ''));
  }

  // ---- navigation

  go(call, step) {
    const d = this.d;
    if (!d.calls.length) return;
    call = Math.max(0, Math.min(d.calls.length - 1, call));
    const n = d.calls[call].matches.length;
    step = Math.max(0, Math.min(n, step));
    const callChanged = call !== this.call;
    this.call = call;
    this.step = step;
    body.dataset.call = call;
    body.dataset.step = step;
    body.dataset.steps = n + 1;
    if (callChanged) {
      this.picked = null;
      this.stepsList.root.scrollTop = 0;
      this.stepsList.setCount(n + 1);
      $('#steps-head').textContent = `Steps of call #${call} (${n} match${n === 1 ? '' : 'es'})`;
      this.renderCallInfo();
    }
    this.callsList.select(this.rowOfCall.has(call) ? this.rowOfCall.get(call) : -1);
    this.stepsList.select(step);
    try {
      history.replaceState(null, '', `#call=${call}&step=${step}`);
    } catch {
      // file:// pages may refuse; the state is only a convenience
    }
    this.schedule();
  }

  moveCall(delta, withMatches) {
    const order = this.callOrder;
    if (!order.length) return;
    let p = this.posInOrder.get(this.call);
    if (p === undefined) {  // the current call is filtered out: start from its neighbour
      p = order.findIndex((c) => c > this.call);
      if (p < 0) p = order.length;
      if (delta > 0) --p;
    }
    for (let q = p + delta; q >= 0 && q < order.length; q += delta) {
      if (!withMatches || this.d.calls[order[q]].matches.length) {
        this.go(order[q], 0);
        return;
      }
    }
  }

  onKey(e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.target && e.target.matches && e.target.matches('input[type=text], textarea')) return;
    const n = this.d.calls.length ? this.d.calls[this.call].matches.length : 0;
    switch (e.key) {
      case 'ArrowRight': case 'l': this.go(this.call, this.step + 1); break;
      case 'ArrowLeft': case 'h': this.go(this.call, this.step - 1); break;
      case 'ArrowDown': case 'j': this.moveCall(1, e.shiftKey); break;
      case 'ArrowUp': case 'k': this.moveCall(-1, e.shiftKey); break;
      case 'n': this.moveCall(1, true); break;
      case 'p': this.moveCall(-1, true); break;
      case 'PageDown': this.go(this.call, this.step + 10); break;
      case 'PageUp': this.go(this.call, this.step - 10); break;
      case 'Home': this.go(this.call, 0); break;
      case 'End': this.go(this.call, n); break;
      case 'f': this.fit(true); break;
      case 'Escape': this.pick(null); break;
      default: return;
    }
    e.preventDefault();
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    setTimeout(() => {
      this.pending = false;
      this.render();
    }, 0);
  }

  // ---- drawing one step

  render() {
    const t = performance.now();
    const d = this.d, ci = this.call, k = this.step;
    const g = d.graphAt(ci, k);
    const changed = d.changedAt(ci, k);
    this.renderRule(g);
    this.renderGraph(g, changed);
    this.renderDiff(g);
    body.dataset.graphNodes = g.order.length;
    body.dataset.changed = changed.size;
    body.dataset.renderMs = Math.round(performance.now() - t);
    body.dataset.rendered = `${ci}:${k}`;
    if (this.first) {
      this.first = false;
      body.dataset.loadMs = Math.round(performance.now() - t0);
      body.dataset.status = 'ok';
    }
  }

  renderCallInfo() {
    const d = this.d, c = d.calls[this.call];
    const box = $('#call-info');
    box.replaceChildren();
    box.append(el('span', 'title', `call #${c.id} ${c.name}`), el('span', 'dim', c.mode));
    const group = d.groupPath(c.group).map((g) => d.groups[g].name).join(' › ');
    if (group) box.append(el('span', 'dim', `in ${group}`));
    if (c.depth) {
      const p = d.parentCall(c.id);
      box.append(el('span', 'dim', `depth ${c.depth}${p === null ? '' : ` (inside call #${p})`}`));
    }
    box.append(el('span', 'dim', `at ${c.location}`));
    box.title = `call #${c.id} ${c.name} (${c.mode}) at ${c.location}`;
  }

  renderRule(g) {
    const d = this.d, c = d.calls[this.call], k = this.step, n = c.matches.length;
    const box = $('#rule');
    box.replaceChildren();
    const line2 = (key, value, cls = 'expr') => {
      const r = el('div', 'row2');
      r.append(el('span', 'k', key), el('span', cls, value));
      box.append(r);
    };
    if (k === 0) {
      box.append(el('h3', '', n ? `Step 0 of ${n}: before the first match` : 'This call matched nothing'));
      line2('root', `n${c.root}  ${exprText(d, c.root)}`);
    } else {
      const m = c.matches[k - 1];
      box.append(el('h3', '', `Step ${k} of ${n}: ${m.rule.name}`));
      const loc = m.rule.file ? `${m.rule.file}:${m.rule.line}` : '(rule location unknown)';
      box.append(el('div', 'loc', loc));
      box.append(el('pre', '', m.rule.source || '(no source text: a C++ lambda rule)'));
      line2('before', `n${m.before}  ${exprText(d, m.before)}`);
      line2('after', `n${m.after}  ${exprText(d, m.after)}`);
      line2('time', formatNs(m.ns), '');
    }
    if (k === n) {
      if (c.result === null) {
        line2('result', 'none: the call did not finish (it threw)', 'warn');
      } else if (g.root === c.result) {
        line2('result', `n${c.result}  ${exprText(d, c.result)}  ✓ the call's result`, 'ok');
      } else {
        line2('result', `n${c.result}  ${exprText(d, c.result)}  (the recorded result differs from this graph: ` +
              'some rewrites were not matches, e.g. cached)', 'warn');
      }
    } else {
      line2('graph', `n${g.root}  ${exprText(d, g.root)}`);
    }
  }

  renderDiff(g) {
    const d = this.d, k = this.step;
    const pre = $('#diff');
    const out = [];
    const add = (cls, text) => out.push(el('div', cls, text));
    const cur = prettyLines(d, g.root);
    if (k === 0) {
      $('#diff-head').textContent = `Graph at step 0 (${g.order.length} nodes)`;
      for (const l of cur) add('', l);
    } else {
      const prev = prettyLines(d, d.graphAt(this.call, k - 1).root);
      $('#diff-head').textContent = `Diff of the rendered graph: step ${k - 1} → step ${k}`;
      add('hdr', `--- step ${k - 1}`);
      add('hdr', `+++ step ${k}`);
      const hs = hunks(diffLines(prev, cur), 3);
      if (!hs.some((h) => h.t === '+' || h.t === '-')) add('hdr', '(the rendered graphs are the same)');
      for (const h of hs) {
        if (h.skipped) add('skip', `… ${h.skipped} unchanged line${h.skipped === 1 ? '' : 's'}`);
        else add(h.t === '+' ? 'add' : h.t === '-' ? 'del' : '', `${h.t} ${h.s}`);
      }
    }
    pre.replaceChildren(...out);
    pre.scrollTop = 0;
  }

  initGraph() {
    const svg = select('#graph');
    this.svg = svg;
    const defs = svg.append('defs');
    for (const [id, color] of [['arrow', '#9ca3af'], ['arrow-changed', '#16a34a']]) {
      defs.append('marker').attr('id', id).attr('viewBox', '0 0 10 10').attr('refX', 9).attr('refY', 5)
          .attr('markerWidth', 7).attr('markerHeight', 7).attr('orient', 'auto')
          .append('path').attr('d', 'M0,0L10,5L0,10z').attr('fill', color);
    }
    this.viewport = svg.append('g');
    this.zoom = zoom().scaleExtent([0.02, 4]).on('zoom', (e) => this.viewport.attr('transform', e.transform));
    svg.call(this.zoom).on('dblclick.zoom', null);
    svg.on('click', (e) => {
      if (e.target === svg.node()) this.pick(null);
    });
    new ResizeObserver(() => this.fit()).observe(svg.node());
  }

  // Fits the graph in view; a graph too big to read that way is shown around the first changed
  // node (or the root) instead, unless `whole` (the f key).
  fit(whole = false) {
    if (!this.size) return;
    const box = this.svg.node().getBoundingClientRect();
    if (!box.width || !box.height) return;
    const {w, h} = this.size;
    let s = Math.min(box.width / (w + 40), box.height / (h + 40), 1.5);
    let tx = (box.width - w * s) / 2, ty = (box.height - h * s) / 2;
    if (!whole && s < 0.3 && this.focus) {
      s = 0.8;
      tx = box.width / 2 - this.focus.x * s;
      ty = box.height / 2 - this.focus.y * s;
    }
    this.svg.call(this.zoom.transform, zoomIdentity.translate(tx, ty).scale(s));
  }

  pick(id) {
    this.picked = id;
    const info = $('#node-info');
    this.viewport.selectAll('.node').classed('picked', (n) => n === id);
    if (id === null) {
      info.hidden = true;
      return;
    }
    const d = this.d, u = d.nodes[id];
    info.textContent = `n${id}${u.rebuilt ? '* (rebuilt: not in the dump\'s node table)' : ''}  ${u.op}  ${u.dtype}\n` +
        `arg  ${u.arg}${u.tag === null || u.tag === undefined ? '' : `\ntag  ${u.tag}`}\n` +
        `src  (${u.src.map((s) => `n${s}`).join(', ')})\n${exprText(d, id, 600)}`;
    info.hidden = false;
  }

  renderGraph(g, changed) {
    const d = this.d, c = d.calls[this.call], k = this.step;
    const note = $('#graph-note');
    const key = `${this.call}:${k}`;
    this.viewport.selectAll('*').remove();
    $('#node-info').hidden = true;
    let plan = layoutCost(d, g.order, false), dup = false;
    if (plan.cost > DUP_LEAVES) {
      const p2 = layoutCost(d, g.order, true);
      if (p2.cost < plan.cost) {
        plan = p2;
        dup = true;
      }
    }
    body.dataset.layoutCost = plan.cost;
    if (plan.cost > LAYOUT_LIMIT && this.forceLayout !== key) {
      note.replaceChildren(el('div', '', `The graph at this step has ${g.order.length} nodes; laying it out ` +
                                            'may take a while. The diff below shows it as text.'));
      const b = el('button', '', 'Lay it out');
      b.addEventListener('click', () => {
        this.forceLayout = key;
        this.render();
      });
      note.append(b);
      note.hidden = false;
      this.size = null;
      return;
    }
    note.hidden = true;
    const next = k < c.matches.length ? c.matches[k].before : -1;
    const isDup = (id) => dup && d.nodes[id].src.length === 0 && (plan.uses.get(id) || 0) > 1;
    const gl = new Graph({multigraph: true});
    gl.setGraph({rankdir: 'TB', nodesep: 22, ranksep: 38, edgesep: 10, marginx: 16, marginy: 16});
    gl.setDefaultEdgeLabel(() => ({}));
    const labels = new Map(), real = new Map();  // layout key -> node id
    const addNode = (lk, id) => {
      if (!labels.has(id)) {
        const [op, arg, dt] = nodeLabel(d.nodes[id]);
        const lines = [`${op}  n${id}${d.nodes[id].rebuilt ? '*' : ''}`];
        if (arg) lines.push(arg);
        lines.push(dt);
        labels.set(id, lines);
      }
      const lines = labels.get(id);
      real.set(lk, id);
      gl.setNode(lk, {width: Math.max(...lines.map((s) => s.length)) * 7.3 + 18, height: lines.length * 15 + 10});
    };
    for (const id of g.order) if (!isDup(id)) addNode(String(id), id);
    for (const id of g.order) {
      d.nodes[id].src.forEach((s, i) => {
        let from = String(s);
        if (isDup(s)) addNode(from = `${s}@${id}.${i}`, s);
        gl.setEdge(from, String(id), {i}, `${from}>${id}>${i}`);
      });
    }
    layout(gl);
    const gg = gl.graph();
    this.size = {w: gg.width || 1, h: gg.height || 1};

    const vp = this.viewport;
    const path = line().x((p) => p.x).y((p) => p.y).curve(curveBasis);
    for (const e of gl.edges()) {
      const ed = gl.edge(e);
      const target = real.get(e.w), isChanged = changed.has(target);
      vp.append('path').attr('class', isChanged ? 'edge changed' : 'edge').attr('d', path(ed.points))
          .attr('marker-end', `url(#${isChanged ? 'arrow-changed' : 'arrow'})`);
      if (d.nodes[target].src.length > 1) {
        // The source's index, beside the edge a little before the arrowhead.
        const p = ed.points[ed.points.length - 1], q = ed.points[Math.max(0, ed.points.length - 2)];
        const len = Math.hypot(q.x - p.x, q.y - p.y) || 1, ux = (q.x - p.x) / len, uy = (q.y - p.y) / len;
        const side = q.x <= p.x ? -1 : 1;
        vp.append('text').attr('class', 'edge-index').attr('text-anchor', side < 0 ? 'end' : 'start')
            .attr('x', p.x + ux * 16 + side * 5).attr('y', p.y + uy * 16 + 3).text(String(e.name.split('>')[2]));
      }
    }
    this.focus = null;
    for (const lk of gl.nodes()) {
      const id = real.get(lk), nd = gl.node(lk), u = d.nodes[id];
      if (changed.has(id) && (!this.focus || this.focus.root)) this.focus = {x: nd.x, y: nd.y};
      if (id === g.root && !this.focus) this.focus = {x: nd.x, y: nd.y, root: true};
      const cls = ['node', opClass(u.op)];
      if (changed.has(id)) cls.push('changed');
      if (id === next) cls.push('next');
      if (u.rebuilt) cls.push('rebuilt');
      const ng = vp.append('g').datum(id).attr('class', cls.join(' '))
          .attr('transform', `translate(${nd.x - nd.width / 2},${nd.y - nd.height / 2})`);
      ng.append('title').text(`n${id} ${u.op} ${u.dtype} arg=${u.arg}`);
      ng.append('rect').attr('width', nd.width).attr('height', nd.height).attr('rx', 5);
      labels.get(id).forEach((s, i, all) => {
        ng.append('text').attr('class', i === 0 ? 'op' : i === all.length - 1 ? 'dim' : '')
            .attr('x', nd.width / 2).attr('y', 17 + i * 15).attr('text-anchor', 'middle').text(s);
      });
      if (id === g.root) {
        vp.append('text').attr('class', 'root-tag').attr('x', nd.x).attr('y', nd.y + nd.height / 2 + 14)
            .attr('text-anchor', 'middle').text('root');
        this.size.h = Math.max(this.size.h, nd.y + nd.height / 2 + 20);
      }
      ng.on('click', (e) => {
        e.stopPropagation();
        this.pick(id);
      });
    }
    this.fit();
  }
}

function opClass(op) {
  if (op === 'CONST' || op === 'VCONST') return 'const';
  if (op === 'DEFINE_VAR' || op === 'SPECIAL' || op === 'RANGE' || op === 'BIND') return 'var';
  if (op.startsWith('CMP')) return 'cmp';
  if (['ADD', 'SUB', 'MUL', 'FLOORDIV', 'FLOORMOD', 'CDIV', 'CMOD', 'MAX', 'NEG', 'AND', 'OR', 'XOR', 'SHL',
       'SHR', 'WHERE', 'CAST'].includes(op))
    return 'alu';
  return 'other';
}

function initialState(d) {
  const m = /call=(\d+)(?:&step=(\d+))?/.exec(location.hash);
  if (m && Number(m[1]) < d.calls.length) return [Number(m[1]), Number(m[2] || 0)];
  const first = d.calls.findIndex((c) => c.matches.length > 0);
  return [Math.max(0, first), 0];
}

async function main() {
  const cfg = readConfig();
  if (cfg.source) {
    $('#source').textContent = cfg.source;
    document.title = `tinyrw VIZ: ${basename(cfg.source)}`;
  }
  let d;
  try {
    d = await loadDump(cfg);
  } catch (e) {
    if (e instanceof DumpError) {
      showError(cfg.source ? `${cfg.source}: ${e.message}` : e.message);
      return;
    }
    throw e;
  }
  $('#app').hidden = false;
  const app = new App(d, cfg);
  window.tinyrwViz = app;  // for tests and the console
  if (!d.calls.length) {
    $('#call-info').textContent = 'This dump has no graph_rewrite calls.';
    body.dataset.loadMs = Math.round(performance.now() - t0);
    body.dataset.status = 'ok';
    return;
  }
  const [call, step] = initialState(d);
  app.go(call, step);
}

main().catch((e) => {
  showError(`Unexpected error in the viewer: ${e && e.stack ? e.stack : e}`);
});
