// A small Chrome DevTools Protocol client over --remote-debugging-pipe (no npm packages, no
// network port): launches headless Chromium, opens pages, records console errors and uncaught
// exceptions, sends real key events, takes screenshots. Used by test_browser.mjs.
import {spawn} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// The Chromium to use: $CHROMIUM, or chromium / chromium-browser / google-chrome on PATH.
export function findChromium() {
  const names = ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable'];
  const cands = [];
  if (process.env.CHROMIUM) cands.push(process.env.CHROMIUM);
  for (const dir of (process.env.PATH || '/usr/bin').split(path.delimiter))
    for (const n of names) cands.push(path.join(dir, n));
  for (const c of cands) {
    try {
      fs.accessSync(c, fs.constants.X_OK);
      if (fs.statSync(c).isFile()) return c;
    } catch {
      // not there
    }
  }
  return null;
}

export async function launch(exe, {width = 1600, height = 1000} = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tinyrw-chromium-'));
  const args = [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-quic',
    '--no-first-run', '--no-default-browser-check', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-extensions', '--disable-default-apps',
    '--mute-audio', '--hide-scrollbars', '--remote-debugging-pipe', `--user-data-dir=${dir}`,
    `--window-size=${width},${height}`, 'about:blank',
  ];
  const proc = spawn(exe, args, {stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe']});
  const b = new Browser(proc, dir, width, height);
  // the first answer waits for chromium to start, which takes far longer on a loaded machine
  // (a CI run's other tests) than any later command
  await b.send('Browser.getVersion', {}, undefined, 120000);
  return b;
}

class Browser {
  constructor(proc, dir, width, height) {
    this.proc = proc;
    this.dir = dir;
    this.size = {width, height};
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = [];
    this.stderr = '';
    this.exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.stderr.on('data', (d) => {
      this.stderr = (this.stderr + d).slice(-8000);
    });
    let buf = '';
    proc.stdio[4].on('data', (chunk) => {
      buf += chunk.toString('utf8');
      let i;
      while ((i = buf.indexOf('\0')) >= 0) {
        const msg = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        if (msg.id !== undefined && this.pending.has(msg.id)) {
          const p = this.pending.get(msg.id);
          this.pending.delete(msg.id);
          clearTimeout(p.timer);
          if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message}`));
          else p.resolve(msg.result);
        } else {
          for (const l of this.listeners) l(msg);
        }
      }
    });
    proc.once('exit', (code) => {
      for (const p of this.pending.values()) {
        clearTimeout(p.timer);
        p.reject(new Error(`chromium exited (${code}) during ${p.method}\n${this.stderr}`));
      }
      this.pending.clear();
    });
  }

  send(method, params = {}, sessionId = undefined, timeoutMs = 30000) {
    const id = this.nextId++;
    const msg = {id, method, params};
    if (sessionId) msg.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method}: no answer from chromium in ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {resolve, reject, timer, method});
      this.proc.stdio[3].write(JSON.stringify(msg) + '\0');
    });
  }

  async newPage() {
    const {targetId} = await this.send('Target.createTarget', {url: 'about:blank'});
    const {sessionId} = await this.send('Target.attachToTarget', {targetId, flatten: true});
    const page = new Page(this, sessionId);
    await page.init();
    return page;
  }

  async close() {
    try {
      await this.send('Browser.close', {}, undefined, 5000);
    } catch {
      // killed below
    }
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(t);
    fs.rmSync(this.dir, {recursive: true, force: true});
  }
}

const KEYS = {ArrowLeft: 37, ArrowUp: 38, ArrowRight: 39, ArrowDown: 40, Home: 36, End: 35, PageUp: 33, PageDown: 34};

class Page {
  constructor(browser, sessionId) {
    this.b = browser;
    this.sid = sessionId;
    this.errors = [];
    browser.listeners.push((msg) => {
      if (msg.sessionId !== sessionId) return;
      const p = msg.params || {};
      if (msg.method === 'Runtime.consoleAPICalled' && (p.type === 'error' || p.type === 'assert')) {
        this.errors.push(`console.${p.type}: ${(p.args || []).map((a) => a.value ?? a.description).join(' ')}`);
      } else if (msg.method === 'Runtime.exceptionThrown') {
        const d = p.exceptionDetails || {};
        this.errors.push(`uncaught: ${d.exception ? d.exception.description : d.text}`);
      } else if (msg.method === 'Log.entryAdded' && p.entry && p.entry.level === 'error') {
        this.errors.push(`log: ${p.entry.text} ${p.entry.url || ''}`);
      }
    });
  }
  send(method, params = {}, timeoutMs = 30000) {
    return this.b.send(method, params, this.sid, timeoutMs);
  }
  async init() {
    await this.send('Runtime.enable');
    await this.send('Log.enable');
    await this.send('Page.enable');
    await this.send('Emulation.setDeviceMetricsOverride',
                    {...this.b.size, deviceScaleFactor: 1, mobile: false});
    await this.send('Page.bringToFront');
  }
  async goto(url) {
    const r = await this.send('Page.navigate', {url});
    if (r.errorText) throw new Error(`cannot open ${url}: ${r.errorText}`);
  }
  async eval(expression) {
    const r = await this.send('Runtime.evaluate', {expression, returnByValue: true, awaitPromise: true});
    if (r.exceptionDetails) throw new Error(`evaluating ${expression}: ${r.exceptionDetails.exception?.description || r.exceptionDetails.text}`);
    return r.result.value;
  }
  async waitFor(expression, timeoutMs = 20000, what = expression) {
    const end = Date.now() + timeoutMs;
    for (;;) {
      let v;
      try {
        v = await this.eval(expression);
      } catch {
        v = undefined;  // the page may be navigating
      }
      if (v) return v;
      if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 40));
    }
  }
  async key(key, {shift = false} = {}) {
    const code = KEYS[key] ?? key.toUpperCase().charCodeAt(0);
    const base = {key, code: KEYS[key] ? key : `Key${key.toUpperCase()}`, windowsVirtualKeyCode: code,
                  nativeVirtualKeyCode: code, modifiers: shift ? 8 : 0};
    await this.send('Input.dispatchKeyEvent', {type: 'rawKeyDown', ...base});
    if (!KEYS[key]) await this.send('Input.dispatchKeyEvent', {type: 'char', text: key, ...base});
    await this.send('Input.dispatchKeyEvent', {type: 'keyUp', ...base});
  }
  async screenshot(file) {
    const {data} = await this.send('Page.captureScreenshot', {format: 'png'});
    fs.writeFileSync(file, Buffer.from(data, 'base64'));
  }
}
