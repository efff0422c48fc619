// Headless-Chromium tests of the VIZ viewer (rw viz). Exits 77 (CTest SKIP_RETURN_CODE) when no
// Chromium is installed.
//
//   node test_browser.mjs SCENARIO RW SOURCE_DIR
//     html       --html page of a dump from rw simplify --viz: loads with zero console errors,
//                lists the calls, keys move between steps and calls, highlights, rule, diff
//     server     the page served by rw viz --port 0 loads from 127.0.0.1 with zero console errors
//     truncated  truncated and malformed dumps show a clear error in the page
//     large      a 100,000-match dump loads, and its 50,000-match call steps, in bounded time
//   node test_browser.mjs screenshot RW DUMP.json OUT.png [#call=N&step=K]
import {spawn, spawnSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {fileURLToPath, pathToFileURL} from 'node:url';
import {findChromium, launch} from './cdp.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const [scenario, rw, srcDir, ...rest] = process.argv.slice(2);
if (!scenario || !rw) {
  console.error('usage: node test_browser.mjs (html|server|truncated|large) RW SOURCE_DIR');
  process.exit(2);
}
const chromium = findChromium();
if (!chromium) {
  console.log('skipped: chromium not installed (Debian package chromium; or set $CHROMIUM)');
  process.exit(77);
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tinyrw-viz-test-'));
let failures = 0;
function check(cond, what) {
  if (cond) {
    console.log(`ok    ${what}`);
  } else {
    console.log(`FAIL  ${what}`);
    ++failures;
  }
}
function run(cmd, args) {
  const r = spawnSync(cmd, args, {encoding: 'utf8', timeout: 120000, maxBuffer: 1 << 30});
  if (r.error) throw r.error;
  return r;
}
function realDump() {
  const file = path.join(tmp, 'd.json');
  const r = run(rw, ['simplify', '--var', 'x=0..100', '--var', 'y=0..50', '--var', 'z=1..10', '--viz', file,
                     '--batch', path.join(srcDir, 'examples/index_expressions.txt')]);
  if (r.status !== 0) throw new Error(`rw simplify failed: ${r.stderr}`);
  return file;
}
function htmlOf(dump, name = 'page.html') {
  const out = path.join(tmp, name);
  const r = run(rw, ['viz', '--html', out, dump]);
  if (r.status !== 0) throw new Error(`rw viz --html failed (${r.status}): ${r.stderr}`);
  return out;
}
const state = (page) => page.eval(`({...document.body.dataset})`);
async function waitLoaded(page, timeoutMs = 20000) {
  await page.waitFor(`document.body && document.body.dataset.status !== 'loading' && document.body.dataset.status`,
                     timeoutMs, 'the page to load');
  return state(page);
}
async function waitRendered(page, call, step, timeoutMs = 10000) {
  await page.waitFor(`document.body.dataset.rendered === '${call}:${step}'`, timeoutMs, `step ${call}:${step} drawn`);
}

async function scenarioHtml(browser) {
  const dumpFile = realDump();
  const doc = JSON.parse(fs.readFileSync(dumpFile, 'utf8'));
  const page = await browser.newPage();
  await page.goto(pathToFileURL(htmlOf(dumpFile)).href);
  const s = await waitLoaded(page);
  check(s.status === 'ok', `the --html page loads (status ${s.status})`);
  check(Number(s.calls) === doc.calls.length && doc.calls.length > 0, `it knows the ${doc.calls.length} calls (data-calls ${s.calls})`);
  const rows = await page.eval(`[...document.querySelectorAll('#calls .row:not(.group)')].map(r => r.textContent)`);
  check(rows.length === doc.calls.length && rows.every((t, i) => t.includes(`#${i}`) && t.includes(doc.calls[i].name)),
        `the calls list shows every call with its name (${rows.length} rows)`);
  const groups = await page.eval(`document.querySelectorAll('#calls .row.group').length`);
  check(groups === doc.groups.length, `the calls list shows the groups (${groups})`);

  const first = doc.calls.findIndex((c) => c.matches.length > 0);
  check(Number(s.call) === first && s.step === '0', `it opens the first call with matches at step 0 (call ${s.call})`);
  await waitRendered(page, first, 0);
  const call = doc.calls.findIndex((c, i) => i > first && c.matches.length >= 2);
  const n = doc.calls[call].matches.length;
  for (let c = first + 1; c <= call; ++c) {
    await page.key('ArrowDown');
    await waitRendered(page, c, 0);
  }
  check((await state(page)).call === String(call), `ArrowDown moves down the calls to call ${call}`);
  const nodes0 = await page.eval(`document.querySelectorAll('#graph .node').length`);
  check(nodes0 > 1, `the graph is drawn (${nodes0} nodes)`);
  const edges = await page.eval(`document.querySelectorAll('#graph path.edge').length`);
  check(edges > 0, `with edges (${edges})`);

  await page.key('ArrowRight');
  await waitRendered(page, call, 1);
  check((await state(page)).step === '1', 'ArrowRight moves to step 1');
  const m0 = doc.calls[call].matches[0];
  const rule = await page.eval(`document.querySelector('#rule').textContent`);
  check(rule.includes(`${m0.rule.file}:${m0.rule.line}`) && rule.includes(m0.rule.source.split('\n')[0]),
        `the rule panel shows ${m0.rule.file}:${m0.rule.line} and the rule's source`);
  const changed = await page.eval(`document.querySelectorAll('#graph .node.changed').length`);
  check(changed > 0, `the nodes changed by the step are highlighted (${changed})`);
  const diff = await page.eval(`({add: document.querySelectorAll('#diff .add').length, del: document.querySelectorAll('#diff .del').length})`);
  check(diff.add + diff.del > 0, `the diff shows the change (+${diff.add} -${diff.del})`);
  check((await page.eval(`document.querySelector('#steps .row.sel').textContent`)).includes(m0.rule.name),
        'the steps list selects step 1');

  await page.key('End');
  await waitRendered(page, call, n);
  const last = await page.eval(`document.querySelector('#rule').textContent`);
  check(last.includes("the call's result"), `End goes to step ${n}, whose graph is the call's recorded result`);
  await page.key('ArrowLeft');
  await waitRendered(page, call, n - 1);
  check(true, 'ArrowLeft goes back one step');
  await page.key('Home');
  await waitRendered(page, call, 0);
  check(true, 'Home goes to step 0');
  await page.key('ArrowDown');
  await waitRendered(page, call + 1, 0);
  check((await state(page)).call === String(call + 1), 'ArrowDown selects the next call');
  await page.key('ArrowUp');
  await waitRendered(page, call, 0);
  check((await state(page)).call === String(call), 'ArrowUp selects the previous call');
  await page.key('l');
  await waitRendered(page, call, 1);
  check(true, "'l' steps forward too");

  // Clicking a call in the list and a node in the graph.
  await page.eval(`document.querySelectorAll('#calls .row:not(.group)')[${call + 1}].click()`);
  await waitRendered(page, call + 1, 0);
  check(true, 'clicking a call in the list opens it');
  await page.eval(`document.querySelector('#graph .node').dispatchEvent(new MouseEvent('click', {bubbles: true}))`);
  const info = await page.eval(`document.querySelector('#node-info').hidden ? '' : document.querySelector('#node-info').textContent`);
  check(/^n\d+/.test(info), 'clicking a node shows its details');

  // The text mode prints the same calls and rules.
  const text = run(rw, ['viz', '--text', dumpFile]).stdout;
  check(doc.calls.every((c, i) => text.includes(`call #${i} ${c.name}`)) && text.includes(`${m0.rule.file}:${m0.rule.line}`),
        'rw viz --text lists the same calls and rule locations');
  check(page.errors.length === 0, `zero console errors (${page.errors.join(' | ') || 'none'})`);
}

async function scenarioServer(browser) {
  const dumpFile = realDump();
  const doc = JSON.parse(fs.readFileSync(dumpFile, 'utf8'));
  const server = spawn(rw, ['viz', '--port', '0', dumpFile], {stdio: ['ignore', 'pipe', 'pipe']});
  const exited = new Promise((resolve) => server.once('exit', (code, sig) => resolve({code, sig})));
  try {
    const url = await new Promise((resolve, reject) => {
      let out = '';
      const t = setTimeout(() => reject(new Error(`rw viz printed no URL in 10 s: ${out}`)), 10000);
      server.stdout.on('data', (d) => {
        out += d;
        const m = /http:\/\/127\.0\.0\.1:(\d+)\//.exec(out);
        if (m) {
          clearTimeout(t);
          resolve(m[0]);
        }
      });
      server.once('exit', () => reject(new Error(`rw viz exited: ${out}`)));
    });
    check(true, `rw viz --port 0 serves on ${url}`);
    const page = await browser.newPage();
    await page.goto(url);
    const s = await waitLoaded(page);
    check(s.status === 'ok' && Number(s.calls) === doc.calls.length, `the served page loads the dump from 127.0.0.1 (${s.calls} calls)`);
    await waitRendered(page, s.call, 0);
    await page.key('ArrowRight');
    await waitRendered(page, s.call, 1);
    check(true, 'keys work on the served page');
    check(page.errors.length === 0, `zero console errors (${page.errors.join(' | ') || 'none'})`);
  } finally {
    server.kill('SIGTERM');
    const t = setTimeout(() => server.kill('SIGKILL'), 5000);
    const r = await exited;
    clearTimeout(t);
    check(r.code === 0, `the server stops on SIGTERM (exit ${r.code}, signal ${r.sig})`);
  }
}

async function scenarioTruncated(browser) {
  const dumpFile = realDump();
  const text = fs.readFileSync(dumpFile, 'utf8');
  const cut = path.join(tmp, 'cut.json');
  fs.writeFileSync(cut, text.slice(0, Math.floor(text.length / 2)));
  const page = await browser.newPage();
  await page.goto(pathToFileURL(htmlOf(cut, 'cut.html')).href);
  let s = await waitLoaded(page);
  let msg = await page.eval(`document.querySelector('#error').hidden ? '' : document.querySelector('#error').textContent`);
  check(s.status === 'error', `a truncated dump sets status error (${s.status})`);
  check(/not valid JSON/.test(msg) && /truncated/.test(msg) && msg.includes('cut.json'),
        `and shows a clear error: "${msg.slice(0, 160)}…"`);
  check(await page.eval(`document.querySelector('#app').hidden`), 'instead of the viewer');

  const doc = JSON.parse(text);
  doc.calls[0].matches[0].after = 99999;
  const bad = path.join(tmp, 'bad.json');
  fs.writeFileSync(bad, JSON.stringify(doc));
  await page.goto(pathToFileURL(htmlOf(bad, 'bad.html')).href);
  s = await waitLoaded(page);
  msg = await page.eval(`document.querySelector('#error').textContent`);
  check(s.status === 'error' && msg.includes('calls[0].matches[0].after') && msg.includes('99999'),
        `a dump with a bad node reference names the field: "${msg.slice(0, 160)}"`);

  const empty = path.join(tmp, 'empty.json');
  fs.writeFileSync(empty, '');
  await page.goto(pathToFileURL(htmlOf(empty, 'empty.html')).href);
  s = await waitLoaded(page);
  msg = await page.eval(`document.querySelector('#error').textContent`);
  check(s.status === 'error' && msg.includes('empty'), `an empty file says so: "${msg.slice(0, 120)}"`);
  check(page.errors.length === 0, `no console errors or uncaught exceptions (${page.errors.join(' | ') || 'none'})`);
}

async function scenarioLarge(browser) {
  const big = path.join(tmp, 'big.json');
  const g = run('python3', [path.join(here, 'make_large_dump.py'), big]);
  if (g.status !== 0) throw new Error(`make_large_dump.py failed: ${g.stderr}`);
  const t0 = Date.now();
  const html = htmlOf(big, 'big.html');
  const tHtml = Date.now() - t0;
  check(tHtml < 20000, `rw viz --html on 100,000 matches takes ${tHtml} ms (< 20 s)`);
  const page = await browser.newPage();
  const t1 = Date.now();
  await page.goto(pathToFileURL(html).href);
  const s = await waitLoaded(page, 60000);
  const tLoad = Date.now() - t1;
  check(s.status === 'ok' && s.calls === '501', `the page loads (status ${s.status}, ${s.calls} calls)`);
  check(tLoad < 30000 && Number(s.loadMs) < 15000,
        `within a bounded time: ${tLoad} ms to load, ${s.loadMs} ms in the page (< 30 s, < 15 s)`);
  check(s.steps === '50001', `the big call has 50,001 steps (${s.steps})`);
  const rowsInDom = await page.eval(`document.querySelectorAll('#steps .row').length`);
  check(rowsInDom < 200, `only the visible steps are in the DOM (${rowsInDom})`);
  let t = Date.now();
  await page.key('End');
  await waitRendered(page, 0, 50000, 30000);
  const tEnd = Date.now() - t;
  const last = await page.eval(`document.querySelector('#rule').textContent`);
  check(tEnd < 10000 && last.includes("the call's result"),
        `End jumps to step 50,000 in ${tEnd} ms (< 10 s) and its graph is the recorded result`);
  t = Date.now();
  for (let i = 0; i < 20; ++i) await page.key('ArrowLeft');
  await waitRendered(page, 0, 49980, 30000);
  const tSteps = Date.now() - t;
  check(tSteps < 10000, `20 steps back take ${tSteps} ms (< 10 s)`);
  t = Date.now();
  await page.key('ArrowDown');
  await waitRendered(page, 1, 0, 30000);
  check(Date.now() - t < 5000, `the next call opens in ${Date.now() - t} ms (< 5 s)`);
  const text = run(rw, ['viz', '--text', big]);
  check(text.status === 0 && text.stdout.includes('call #500 bump'), 'rw viz --text prints the large dump');
  check(page.errors.length === 0, `zero console errors (${page.errors.join(' | ') || 'none'})`);
}

async function screenshot(browser) {
  const [dump, out, hash = ''] = [srcDir, ...rest];
  const html = htmlOf(path.resolve(dump), 'shot.html');
  const page = await browser.newPage();
  await page.goto(pathToFileURL(html).href + hash);
  const s = await waitLoaded(page);
  if (s.status === 'ok' && s.call !== undefined) await waitRendered(page, s.call, s.step);
  await new Promise((r) => setTimeout(r, 200));
  await page.screenshot(out);
  console.log(`wrote ${out} (status ${s.status}, call ${s.call}, step ${s.step}); console errors: ${page.errors.length}`);
}

const scenarios = {html: scenarioHtml, server: scenarioServer, truncated: scenarioTruncated, large: scenarioLarge,
                   screenshot};
if (!scenarios[scenario]) {
  console.error(`unknown scenario '${scenario}'`);
  process.exit(2);
}
const browser = await launch(chromium);
try {
  await scenarios[scenario](browser);
} catch (e) {
  console.log(`FAIL  ${e.stack || e}`);
  ++failures;
} finally {
  await browser.close();
  fs.rmSync(tmp, {recursive: true, force: true});
}
if (scenario !== 'screenshot') console.log(failures ? `${failures} check(s) failed` : 'all checks passed');
process.exit(failures ? 1 : 0);
