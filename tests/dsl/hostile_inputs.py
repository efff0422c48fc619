#!/usr/bin/env python3
"""Hostile inputs for `rwc` and `rw viz`: each must end, in bounded time and memory, with the
expected exit status and a located error naming the input (never a crash, hang or lost output).

usage: hostile_inputs.py RWC RW [SEED]
Each case runs in a child with a time limit and (except under ASan) an address-space limit; a
signal, a timeout, a wrong status or a missing message fails it. Inputs made of random bytes use
SEED (printed; default: a fixed seed), so a failure can be replayed.
"""
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

RWC, RW = sys.argv[1], sys.argv[2]
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 20261130
TIME_LIMIT = 60  # seconds per case
MEMORY_LIMIT = 3 << 30  # bytes of address space per case
TMP = tempfile.mkdtemp(prefix="tinyrw-hostile-")
rng = random.Random(SEED)
failures = []


def sanitized(binary):
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


LIMIT_MEMORY = not (sanitized(RWC) or sanitized(RW))
if not LIMIT_MEMORY:
    TIME_LIMIT *= 5  # sanitized builds run several times slower


def limits():
    if LIMIT_MEMORY:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def path(name):
    return os.path.join(TMP, name)


def write(name, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path(name), mode) as f:
        f.write(data)
    return path(name)


def run(name, argv, rc, pattern, stdout=subprocess.DEVNULL, stream="stderr"):
    """Runs argv; the exit status must be rc and `stream` must match the regex `pattern`."""
    start = time.monotonic()
    try:
        r = subprocess.run(argv, stdout=stdout if stdout is not None else subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=TIME_LIMIT, preexec_fn=limits)
    except subprocess.TimeoutExpired:
        failures.append(name)
        print(f"FAIL  {name}: no answer within {TIME_LIMIT} s", flush=True)
        return
    text = (r.stderr if stream == "stderr" else r.stdout or b"").decode("utf-8", "replace")
    ok = r.returncode == rc and re.search(pattern, text, re.S) is not None
    how = f"signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
    print(f"{'ok  ' if ok else 'FAIL'}  {name}: {how} in {time.monotonic() - start:.1f} s; "
          f"{text.strip()[:160]!r}", flush=True)
    if not ok:
        failures.append(name)
        print(f"      wanted exit {rc} and /{pattern}/", flush=True)


def lost_stderr(name, argv, rc):
    """Runs argv with stderr on /dev/full: the exit status must still be rc (a message that cannot
    be written made fmt::print throw, and the tool abort)."""
    with open("/dev/full", "w") as full:
        r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=full, timeout=TIME_LIMIT,
                           preexec_fn=limits)
    ok = r.returncode == rc
    print(f"{'ok  ' if ok else 'FAIL'}  {name}: status {r.returncode} with stderr on /dev/full", flush=True)
    if not ok:
        failures.append(name)
        print(f"      wanted exit {rc}", flush=True)


def closed_pipe(name, argv, ignore_sigpipe, rc, pattern):
    """Runs argv with stdout a pipe whose reader is gone: SIGPIPE ends the tool (as it ends cat),
    and where SIGPIPE is ignored the failed write is an error with exit status rc."""
    def child():
        limits()
        if ignore_sigpipe:
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, timeout=TIME_LIMIT,
                           preexec_fn=child)
    finally:
        os.close(write_end)
    text = r.stderr.decode("utf-8", "replace")
    ok = r.returncode == rc and re.search(pattern, text) is not None
    print(f"{'ok  ' if ok else 'FAIL'}  {name}: status {r.returncode}; {text.strip()[:120]!r}", flush=True)
    if not ok:
        failures.append(name)
        print(f"      wanted status {rc} and /{pattern}/", flush=True)


def located(file, message):
    """`path:line:col: error: message` for an input file."""
    return re.escape(file) + r":\d+:\d+: error: [^\n]*" + message


def rwc_cases():
    def chk(name, text, rc, msg, where=None):
        f = write(name + ".rw", text)
        run(name, [RWC, "check", f], rc, located(where or f, msg) if rc else msg)

    chk("empty file", "", 0, r"^$")
    chk("only a comment", "# nothing here\n", 0, r"^$")
    garbage = bytes(rng.randrange(256) for _ in range(4096))
    chk("binary garbage", garbage, 1, r"(invalid UTF-8 byte|NUL byte|unexpected character)")
    chk("NUL byte", b"ruleset r {\n  Add(x, 0)\0 => x\n}\n", 1, "NUL byte in source")
    chk("huge identifier", "ruleset r {\n  " + "F" * 300000 + "(x) => x\n}\n", 1,
        "unknown op or op group 'FFFF")
    chk("huge capture name", "ruleset r {\n  Add(" + "x" * 300000 + ", 0) => " + "x" * 300000 + "\n}\n", 0,
        r"^$")
    chk("unterminated string", 'ruleset r {\n  Add(x, 0) => fail("oops)\n}\n', 1, "unterminated string")
    chk("unterminated comment", "ruleset r {\n  /* never closed\n", 1, "unterminated comment")
    chk("unknown op", "ruleset r {\n  Frob(x) => x\n}\n", 1, "unknown op or op group 'Frob'")
    chk("unknown function", "ruleset r {\n  Add(x, 0) => frob(x)\n}\n", 1,
        "unknown function or helper 'frob'")
    chk("integer literal too large", "ruleset r {\n  Add(x, 0) => x + " + "9" * 5000 + "\n}\n", 1,
        "integer literal too large")
    chk("use cycle", "ruleset a { use b }\nruleset b { use c }\nruleset c { use a }\n", 1,
        "rule set '.' includes itself")
    write("inc_b.rw", 'include "inc_a.rw"\n')
    chk("inc_a", 'include "inc_b.rw"\n', 1, "include cycle", where=path("inc_b.rw"))
    chk("unknown rule set", "ruleset a = b\n", 1, "unknown rule set 'b'")
    chain = "".join(f"ruleset s{i} {{ use s{i + 1} }}\n" for i in range(10000))
    chk("10,000-deep use chain", chain + "ruleset s10000 { Add(x, 0) => x }\n", 0, r"^$")
    chain = "".join(f"ruleset s{i} = s{i + 1}\n" for i in range(10000))
    chk("10,000-deep composition chain", chain + "ruleset s10000 { Add(x, 0) => x }\n", 0, r"^$")
    diamond = "".join(f"ruleset s{i} {{ use s{i + 1}\n use s{i + 1} }}\n" for i in range(64))
    chk("diamond of uses, 64 levels", diamond + "ruleset s64 { Add(x, 0) => x }\n", 0, r"^$")
    grow = "".join(f"ruleset s{i} {{ Add(x, {i}) => x\n use s{i + 1} }}\n" for i in range(1000))
    chk("quadratic expansion", grow + "ruleset s1000 { Add(x, 0) => x }\n", 1,
        r"expands to more than 100000 rules in total \(the rule-set expansion limit\)")
    loops = "ruleset r {\n" + "for o in (ALU, Add, Mul, Max, Sub, And, Or, Xor) {\n" * 7 + "Add(x, 0) => x\n" + "}\n" * 7 + "}\n"
    chk("nested for loops", loops, 1, r"the rule-set expansion limit")
    empty_loops = ("ruleset c { Add(x, 0) => x }\nruleset r {\n"
                   + "for o in (ALU, Add, Mul, Max, Sub, And, Or, Xor) {\n" * 12 + "use c\n" + "}\n" * 12 + "}\n")
    chk("12 nested for loops adding no rules", empty_loops, 1,
        r"repeat their bodies more than 100000 times in total \(the rule-set expansion limit\)")
    chk("expression nested 100k deep in parentheses",
        "ruleset r {\n  Add(x, 0) => " + "(" * 100000 + "x" + ")" * 100000 + "\n}\n", 1,
        "nesting deeper than 64 levels \\(the bracket nesting limit\\)")
    chk("pattern nested 100k deep", "ruleset r {\n  " + "Neg(" * 100000 + "x" + ")" * 100000 + " => x\n}\n",
        1, "nesting deeper than 64 levels \\(the bracket nesting limit\\)")
    chk("300k prefix operators", "ruleset r {\n  Add(x, 0) if " + "!" * 300000 + "True => x\n}\n", 1,
        "nested deeper than 256 levels \\(the tree depth limit\\)")
    chk("200k-term sum", "ruleset r {\n  Add(x, 0) => x" + " + x" * 200000 + "\n}\n", 1,
        "nested deeper than 256 levels \\(the tree depth limit\\)")
    defs = "".join(f"def f{i}(n) = f{i + 1}(n)\n" for i in range(20000))
    chk("20,000 defs in one cycle", defs + "def f20000(n) = f0(n)\n", 1,
        r"def 'f0' is recursive: f0 -> f1 -> f2 -> f3 -> \.\.\. \(19995 more\) -> f19999 -> f20000 -> f0")
    defs = "".join(f"def f{i}(n) = f{i + 1}(n) + 1\n" for i in range(20000))
    chk("20,000 defs in a chain", defs + "def f20000(n) = n\n", 1,
        r"def 'f19744' nests 513 levels deep through the defs it calls \(more than 512: the def depth limit\)")
    chk("comprehension of 300 clauses", "ruleset r {\n  Add(x, 0) if len([1" + " for a in (1,)" * 300
        + "]) > 0 => x\n}\n", 1, "nested deeper than 256 levels \\(the tree depth limit\\)")
    chk("file over 1 MiB", "ruleset r {\n  Add(x, 0) => x\n}\n" + "#" * (1 << 20), 1,
        r"file larger than 1048576 bytes \(the source size limit\)")
    chk("ill-typed right-hand side", "ruleset r {\n  Add(x:index, 0) => x + 1.5\n}\n", 1,
        "makes a float number a constant of a UOp of int dtype")
    chk("Where on an int condition", "ruleset r {\n  Mul(x:index, 1) => x.where(x, x)\n}\n", 1,
        "needs a bool condition, got int")
    run("/dev/zero as input", [RWC, "check", "/dev/zero"], 1, r"/dev/zero:1:1: error: file larger than")
    run("missing input", [RWC, "check", path("missing.rw")], 1, "cannot open '.*missing.rw'")
    os.makedirs(path("adir"), exist_ok=True)
    run("directory as input", [RWC, "check", path("adir")], 1, "cannot open '.*adir'")
    good = write("good.rw", "ruleset r {\n  Add(x, 0) => x\n}\n")
    run("compile -o /dev/full", [RWC, "compile", good, "-o", "/dev/full"], 1,
        "cannot write '/dev/full': it is not a regular file")
    os.mkfifo(path("fifo"))
    run("compile -o FIFO", [RWC, "compile", good, "-o", path("fifo")], 1, "it is a FIFO")
    run("compile -o directory", [RWC, "compile", good, "-o", path("adir")], 1, "it is a directory")
    run("compile --depfile /dev/full", [RWC, "compile", good, "-o", path("o.cpp"), "--depfile", "/dev/full"],
        1, "cannot write '/dev/full'")
    with open("/dev/full", "w") as full:
        run("dump > /dev/full", [RWC, "dump", good], 1, "cannot write the output: No space left", stdout=full)


def viz_dump(**change):
    doc = {"format": "tinyrw-viz", "version": 1,
           "nodes": [{"id": 0, "op": "DEFINE_VAR", "dtype": "dtypes.index", "src": [], "arg": "('x', 0, 9)", "tag": None},
                     {"id": 1, "op": "CONST", "dtype": "dtypes.index", "src": [], "arg": "0", "tag": None},
                     {"id": 2, "op": "ADD", "dtype": "dtypes.index", "src": [0, 1], "arg": "None", "tag": None}],
           "groups": [{"id": 0, "name": "g", "parent": None}],
           "calls": [{"id": 0, "group": 0, "name": "pm", "location": "a.cpp:1", "depth": 0, "mode": "pm",
                      "root": 2, "result": 0,
                      "matches": [{"before": 2, "after": 0, "ns": 10,
                                   "rule": {"name": "r#0", "file": "a.rw", "line": 1, "source": "Add(x, 0) => x"}}]}]}
    for key, fn in change.items():
        fn(doc)
    return doc


def viz_cases():
    def text(name, data, rc, msg, *extra):
        f = write(name.replace(" ", "_") + ".json", data if isinstance(data, (str, bytes)) else json.dumps(data))
        run(name, [RW, "viz", "--text", *extra, f], rc, (re.escape(f) + ": .*" + msg) if rc == 1 else msg)

    text("a valid dump", viz_dump(), 0, r"^$")
    text("empty dump", "", 1, "the file is empty")
    text("binary garbage", bytes(rng.randrange(256) for _ in range(4096)), 1, "not valid JSON")
    text("truncated dump", json.dumps(viz_dump())[:100], 1, "truncated")
    text("depth 1e9", viz_dump(d=lambda d: d["calls"][0].update(depth=10**9)), 1,
         r"calls\[0\]\.depth: is 1000000000, deeper than the calls before it allow")
    text("depth jump", viz_dump(d=lambda d: d["calls"].append(dict(d["calls"][0], id=1, depth=5))), 1,
         r"calls\[1\]\.depth: is 5")
    text("node id out of range", viz_dump(d=lambda d: d["calls"][0].update(root=2**70)), 1,
         r"calls\[0\]\.root: .* is not a node id")
    text("forward source", viz_dump(d=lambda d: d["nodes"][0].update(src=[2])), 1,
         r"nodes\[0\]\.src\[0\]: 2 is not the id of an earlier node")
    text("wrong field type", viz_dump(d=lambda d: d["nodes"][1].update(op=["CONST"])), 1, r"nodes\[1\]\.op")
    text("negative time", viz_dump(d=lambda d: d["calls"][0]["matches"][0].update(ns=-1e300)), 1,
         r"calls\[0\]\.matches\[0\]\.ns")
    text("format nested 500k deep", '{"format":' + "[" * 500000 + "]" * 500000 + "}", 1, "format: is an array")
    text("calls nested 1M deep", '{"format":"tinyrw-viz","version":1,"nodes":[],"groups":[],"calls":'
         + "[" * 1000000 + "]" * 1000000 + "}", 1, r"calls\[0\]: is not an object")

    def deep_groups(d):
        d["groups"] = [{"id": i, "name": f"g{i}", "parent": i - 1 if i else None} for i in range(10000)]
    text("groups nested 10,000 deep", viz_dump(d=deep_groups), 1,
         r"nests groups deeper than 256 levels \(the group nesting limit of rw viz\)")

    def bind_chain(d):
        n = d["nodes"]
        for i in range(3, 200003):
            n.append({"id": i, "op": "BIND", "dtype": "dtypes.index", "src": [i - 1, 1], "arg": "None", "tag": None})
        d["calls"][0]["root"] = d["calls"][0]["result"] = len(n) - 1
    text("200k-deep BIND chain", viz_dump(d=bind_chain), 0, r"^$")

    def replay(d):  # every match rebuilds a 20,000-node chain above a fresh leaf
        n = d["nodes"]
        leaves = []
        for i in range(80):
            leaves.append(len(n))
            n.append({"id": len(n), "op": "CONST", "dtype": "dtypes.index", "src": [], "arg": str(i + 10), "tag": None})
        top = leaves[0]
        for i in range(20000):
            n.append({"id": len(n), "op": "NEG", "dtype": "dtypes.index", "src": [top], "arg": "None", "tag": None})
            top = len(n) - 1
        rule = {"name": "r", "file": "a.rw", "line": 1, "source": ""}
        d["calls"][0].update(root=top, result=top, matches=[
            {"before": leaves[i], "after": leaves[i + 1], "ns": 1, "rule": rule} for i in range(len(leaves) - 1)])
    text("replay limit", viz_dump(d=replay), 1, r"the replay limit of rw viz --call", "--call", "0")
    run("missing dump", [RW, "viz", "--text", path("missing.json")], 2, "cannot open '.*missing.json'")
    os.makedirs(path("vdir"), exist_ok=True)
    run("directory as dump", [RW, "viz", "--text", path("vdir")], 2, "it is a directory")
    run("/dev/zero as dump", [RW, "viz", "--text", "/dev/zero"], 2, r"the dump size limit")
    good = write("good.json", json.dumps(viz_dump()))
    with open("/dev/full", "w") as full:
        run("--text > /dev/full", [RW, "viz", "--text", good], 1, "No space left on device", stdout=full)
    lost_stderr("rw viz, a missing dump, stderr full", [RW, "viz", "--text", path("missing.json")], 2)
    lost_stderr("rw viz, a malformed dump, stderr full", [RW, "viz", "--text", path("empty_dump.json")], 1)
    lost_stderr("rw, an unknown command, stderr full", [RW, "frob"], 2)
    lost_stderr("rwc, an unknown command, stderr full", [RWC, "frob", "x"], 2)
    lost_stderr("rwc check, an error, stderr full", [RWC, "check", path("unknown op.rw")], 1)
    big = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "rules", "symbolic.rw")
    closed_pipe("rwc dump into a closed pipe", [RWC, "dump", big], False, -signal.SIGPIPE, r"^$")
    closed_pipe("rwc dump into a closed pipe, SIGPIPE ignored", [RWC, "dump", big], True, 1,
                "rwc: error: cannot write the output: Broken pipe")
    closed_pipe("rw viz --text into a closed pipe, SIGPIPE ignored", [RW, "viz", "--text", good], True, 1,
                "Broken pipe")


print(f"hostile inputs, seed {SEED} (replay: {sys.argv[0]} RWC RW {SEED}); memory limit "
      f"{'on' if LIMIT_MEMORY else 'off (sanitized build)'}", flush=True)
try:
    rwc_cases()
    viz_cases()
finally:
    shutil.rmtree(TMP, ignore_errors=True)
if failures:
    print(f"{len(failures)} case(s) failed (seed {SEED}): {', '.join(failures)}")
    sys.exit(1)
print("all hostile inputs handled")
