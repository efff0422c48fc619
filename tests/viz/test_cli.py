#!/usr/bin/env python3
"""Tests of `rw viz` without a browser: --text, --html and the server on 127.0.0.1.

usage: test_cli.py RW SOURCE_DIR (text|errors|html|server|large)
Prints one line per check and "all checks passed" at the end; exits 1 when a check fails.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

RW, SRC, WHAT = sys.argv[1], sys.argv[2], sys.argv[3]
HERE = os.path.dirname(os.path.abspath(__file__))
TMP = tempfile.mkdtemp(prefix="tinyrw-viz-cli-")
failures = 0


def check(cond, what):
    global failures
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures += 1


def rw(*args, timeout=120):
    return subprocess.run([RW, *args], capture_output=True, text=True, timeout=timeout)


def real_dump():
    path = os.path.join(TMP, "d.json")
    r = rw("simplify", "--var", "x=0..100", "--var", "y=0..50", "--var", "z=1..10", "--viz", path,
           "--batch", os.path.join(SRC, "examples/index_expressions.txt"))
    assert r.returncode == 0, r.stderr
    return path


def test_text():
    path = real_dump()
    doc = json.load(open(path))
    r = rw("viz", "--text", path)
    check(r.returncode == 0, f"rw viz --text exits 0 ({r.returncode})")
    out = r.stdout
    check(f"{len(doc['calls'])} calls" in out.splitlines()[0], "the first line counts the calls")
    check(all(f"call #{i} {c['name']}" in out for i, c in enumerate(doc["calls"])), "every call is listed")
    check(all(f"group {g['name']}" in out for g in doc["groups"]), "every group is listed")
    locs = {f"{m['rule']['file']}:{m['rule']['line']}" for c in doc["calls"] for m in c["matches"]}
    check(all(loc in out for loc in locs), f"every matched rule's location is printed ({len(locs)})")
    check(out.count("    match ") == sum(len(c["matches"]) for c in doc["calls"]), "one entry per match")
    check("((x*2+1)%5)" in out and "before" in out and "after" in out, "before/after renders in Python syntax")
    src = doc["calls"][1]["matches"][0]["rule"]["source"].split("\n")[0]
    check(src in out, "the rule's source text is printed")
    r = rw("viz", "--text", "--call", "3", path)
    out = r.stdout
    check(r.returncode == 0 and "call #3" in out and "call #2" not in out, "--call 3 prints only call 3")
    n = len(doc["calls"][3]["matches"])
    check(all(f"step {k}:" in out for k in range(n + 1)), f"with its {n + 1} steps")
    check("UOp(Ops.ADD, dtypes.index" in out and re.search(r"^\s+- ", out, re.M) and re.search(r"^\s+\+ ", out, re.M),
          "full renders and a diff per step")
    check("final graph" in out and "the call's result" in out, "the last step is the call's result")
    check(rw("viz", "--text", "--call", "999", path).returncode == 2, "--call out of range is an error")


def test_errors():
    path = real_dump()
    text = open(path).read()
    cut = os.path.join(TMP, "cut.json")
    open(cut, "w").write(text[: len(text) // 2])
    r = rw("viz", "--text", cut)
    check(r.returncode == 1, f"a truncated dump: exit 1 ({r.returncode})")
    check("not valid JSON" in r.stderr and "truncated" in r.stderr and cut in r.stderr,
          f"and a clear error on stderr: {r.stderr.strip()[:150]}")
    check(r.stdout == "", "and nothing on stdout")
    # cut inside a string whose text so far ends in `]` and blanks: still called truncated
    at = text.index('"source":"') + len('"source":"')
    open(cut, "w").write(text[:at] + "Mul[x, 1]      ")
    r = rw("viz", "--text", cut)
    check(r.returncode == 1 and "truncated" in r.stderr, f"a cut inside a string: {r.stderr.strip()[:150]}")
    doc = json.loads(text)
    doc["calls"][2]["matches"][1]["before"] = 12345
    bad = os.path.join(TMP, "bad.json")
    json.dump(doc, open(bad, "w"))
    r = rw("viz", "--text", bad)
    check(r.returncode == 1 and "calls[2].matches[1].before" in r.stderr and "12345" in r.stderr,
          f"a bad reference names the field: {r.stderr.strip()[:150]}")
    other = os.path.join(TMP, "other.json")
    json.dump({"hello": 1}, open(other, "w"))
    r = rw("viz", "--text", other)
    check(r.returncode == 1 and "tinyrw-viz" in r.stderr, "a JSON file that is not a dump says so")
    empty = os.path.join(TMP, "empty.json")
    open(empty, "w").close()
    r = rw("viz", "--text", empty)
    check(r.returncode == 1 and "empty" in r.stderr, "an empty file says so")
    r = rw("viz", "--text", os.path.join(TMP, "missing.json"))
    check(r.returncode == 2 and "cannot open" in r.stderr, "a missing file: exit 2")
    r = rw("viz", "--html", os.path.join(TMP, "cut.html"), cut)
    check(r.returncode == 0 and "warning" in r.stderr and os.path.exists(os.path.join(TMP, "cut.html")),
          "--html on a truncated dump warns and still writes the page (which shows the error)")
    # Fields the text output trusts are checked before anything is allocated by them.
    doc = json.loads(text)
    doc["calls"][0]["depth"] = 10**9  # used to allocate 2 GB of indentation per line
    json.dump(doc, open(bad, "w"))
    r = rw("viz", "--text", bad, timeout=30)
    check(r.returncode == 1 and "calls[0].depth: is 1000000000" in r.stderr and bad in r.stderr,
          f"a call deeper than the calls before it allow: {r.stderr.strip()[:150]}")
    doc = json.loads(text)
    doc["calls"][1]["matches"][0]["ns"] = -1e300
    json.dump(doc, open(bad, "w"))
    r = rw("viz", "--text", bad, timeout=30)
    check(r.returncode == 1 and "calls[1].matches[0].ns" in r.stderr, f"a negative time: {r.stderr.strip()[:150]}")
    deep = os.path.join(TMP, "deep.json")
    open(deep, "w").write('{"format":' + "[" * 200000 + "]" * 200000 + "}")
    r = rw("viz", "--text", deep, timeout=30)
    check(r.returncode == 1 and "format: is an array" in r.stderr,
          f"a deeply nested value is named, not printed (that recursed): {r.stderr.strip()[:150]}")
    r = rw("viz", "--text", TMP, timeout=30)
    check(r.returncode == 2 and "it is a directory" in r.stderr, f"a directory: exit 2 ({r.stderr.strip()[:100]})")
    check(rw("viz", "--bogus", path).returncode == 2, "unknown option: exit 2")
    check(rw("viz").returncode == 2 and rw("viz", "--bogus", path).returncode == 2, "bad usage: exit 2")
    check(rw("viz", "--port", "99999", path).returncode == 2, "a bad --port: exit 2")


def test_html():
    path = real_dump()
    doc = json.load(open(path))
    # A rule source that tries to end the script element.
    doc["calls"][0]["matches"][0]["rule"]["source"] = "x </script><script>alert(1)</script> <!-- y"
    evil = os.path.join(TMP, "evil.json")
    json.dump(doc, open(evil, "w"))
    out = os.path.join(TMP, "page.html")
    r = rw("viz", "--html", out, evil)
    check(r.returncode == 0 and os.path.exists(out), f"rw viz --html writes {out}")
    page = open(out, encoding="utf-8").read()
    check(page.startswith("<!doctype html>") and len(page) > 50000, f"a whole page ({len(page) // 1024} KiB)")
    check("<script>alert(1)" not in page and "\\u003c/script>\\u003cscript>alert(1)" in page,
          "the dump is embedded, and cannot close the script element")
    check(not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "no network resources: self-contained")
    check("@@TINYRW_" not in page.split('id="tinyrw-dump"')[0], "the markers are filled")
    m = re.search(r'<script type="application/json" id="tinyrw-dump">(.*?)</script>', page, re.S)
    check(m is not None and json.loads(m.group(1)) == doc, "the embedded dump parses back to the dump")


def start_server(*args):
    p = subprocess.Popen([RW, "viz", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    return p, (m.group(0) if m else None), line


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None


def get(url, method="GET", headers=None):
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def test_server():
    path = real_dump()
    p, url, line = start_server("--port", "0", path)
    try:
        check(url is not None, f"rw viz --port 0 prints its URL: {line.strip()}")
        if url is None:
            return
        port = int(url.rsplit(":", 1)[1].strip("/"))
        st, h, body = get(url)
        check(st == 200 and "text/html" in h["Content-Type"] and b"tinyrw VIZ" in body, "GET / serves the page")
        check(b'"dumpUrl":"/dump.json"' in body, "which loads /dump.json")
        st, h, body = get(url + "dump.json")
        check(st == 200 and "application/json" in h["Content-Type"] and body == open(path, "rb").read(),
              "GET /dump.json serves the dump byte for byte")
        st, _, _ = get(url + "nothing-here")
        check(st == 404, f"an unknown path: 404 ({st})")
        st, h, _ = get(url, method="POST")
        check(st == 405 and "GET" in h.get("Allow", ""), f"POST: 405 ({st})")
        st, _, _ = get(url, headers={"Host": "attacker.example:80"})
        check(st == 403, f"a foreign Host header (DNS rebinding): 403 ({st})")
        st, h, body = get(url + "dump.json", method="HEAD")
        check(st == 200 and body == b"" and int(h["Content-Length"]) == os.path.getsize(path), "HEAD works")
        # Only 127.0.0.1: the port is not open on other addresses of this machine.
        out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True) \
            if subprocess.run(["sh", "-c", "command -v ss"], capture_output=True).returncode == 0 else None
        if out is not None:
            local = [line.split()[3] for line in out.stdout.splitlines() if len(line.split()) > 3]
            check(local == [f"127.0.0.1:{port}"], f"listens on 127.0.0.1 only: {local}")
        # A second server on the same port fails clearly.
        r = rw("viz", "--port", str(port), path, timeout=10)
        check(r.returncode == 1 and "cannot listen" in r.stderr, f"a busy port is an error: {r.stderr.strip()}")
        # The dump is read per request: a new trace shows on reload.
        open(path, "a").write(" ")
        st, _, body = get(url + "dump.json")
        check(body.endswith(b"} "), "the dump is read afresh on each request")
        os.remove(path)
        st, _, body = get(url + "dump.json")
        check(st == 500 and b"cannot open" in body, f"a dump removed meanwhile: 500 ({st})")
    finally:
        t = time.time()
        code = stop(p)
        check(code == 0 and time.time() - t < 5, f"the server stops on SIGTERM (exit {code})")


def test_large():
    big = os.path.join(TMP, "big.json")
    subprocess.run([sys.executable, os.path.join(HERE, "make_large_dump.py"), big], check=True, capture_output=True)
    t = time.time()
    r = rw("viz", "--text", big)
    dt = time.time() - t
    check(r.returncode == 0 and r.stdout.count("    match ") == 100000, "--text prints all 100,000 matches")
    check(dt < 30, f"in {dt:.1f} s (< 30 s)")
    t = time.time()
    r = rw("viz", "--html", os.path.join(TMP, "big.html"), big)
    dt = time.time() - t
    check(r.returncode == 0 and dt < 30, f"--html in {dt:.1f} s (< 30 s)")


try:
    {"text": test_text, "errors": test_errors, "html": test_html, "server": test_server, "large": test_large}[WHAT]()
except Exception as e:  # a crash is a failure with its message
    import traceback
    traceback.print_exc()
    failures += 1
finally:
    subprocess.run(["rm", "-rf", TMP])
print(f"{failures} check(s) failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)
