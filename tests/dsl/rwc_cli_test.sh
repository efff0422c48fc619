#!/usr/bin/env bash
# rwc's command-line contract: exit codes, diagnostics format, deterministic and
# rewrite-only-on-change output, the decision-tree dump.
set -u
rwc=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Shipped rules are clean: exit 0 and not a single diagnostic.
out=$("$rwc" check "$src"/rules/*.rw 2>&1) || fail "rwc check of shipped rules exited $?: $out"
[ -z "$out" ] || fail "shipped rules produce diagnostics: $out"

# House style: no line of the shipped rules is longer than 110 characters (docs/rw-language.md).
long=$(awk 'length > 110 { print FILENAME ":" FNR ": " length " characters" }' "$src"/rules/*.rw)
[ -z "$long" ] || fail "over-long lines in rules/*.rw: $long"

# A file with an error: exit 1, and the diagnostic has path:line:col, source line and caret.
printf 'ruleset r {\n  Add(x, y, z) => x\n}\n' > "$work/bad.rw"
out=$("$rwc" check "$work/bad.rw" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "expected exit 1 for errors, got $rc"
echo "$out" | head -1 | grep -Eq "^$work/bad.rw:2:3: error: wrong arity" || fail "bad first line: $out"
echo "$out" | sed -n 2p | grep -q "Add(x, y, z) => x" || fail "no source line: $out"
echo "$out" | sed -n 3p | grep -Eq '^  \^$' || fail "no caret: $out"

# rwc links the rule language only: no LLVM, no Tensor front end, no C++ helper but the pure integer
# ones `rwc prove` runs (rules/helpers/arith.cpp, symbolic.cpp); calls are checked against `extern
# fn` declarations, so an undeclared helper is an error even where it is linked (is_pow2 is).
ldd "$rwc" | grep -qi llvm && fail "rwc links LLVM: $(ldd "$rwc" | grep -i llvm)"
nm -C "$rwc" | grep -q 'tinyrw::Tensor::\|fold_divmod\|movement_grad\|new_ranges\|llvm::' && fail "rwc links tensor/ or helper code"
printf 'ruleset r {\n  Mul(x, Const{k}) if is_pow2(k) => x\n}\n' > "$work/undeclared.rw"
out=$("$rwc" check "$work/undeclared.rw" 2>&1) && fail "an undeclared helper passed the check"
echo "$out" | head -1 | grep -q "undeclared.rw:2:23: error: helper 'is_pow2' is not declared; include the prelude" || fail "undeclared helper: $out"
printf 'include "%s/rules/prelude.rw"\nruleset r {\n  Mul(x, Const{k}) if is_pow2(k, 2) => x\n}\n' "$src" > "$work/arity.rw"
out=$("$rwc" check "$work/arity.rw" 2>&1) && fail "a helper call of the wrong arity passed the check"
echo "$out" | head -1 | grep -q "arity.rw:3:23: error: helper 'is_pow2' takes 1 argument(s), got 2" || fail "helper arity: $out"
printf 'extern fn only_declared(x: uop) -> uop\nruleset r {\n  Add(x, 0) => only_declared(x)\n}\n' > "$work/declared.rw"
"$rwc" compile "$work/declared.rw" -o "$work/declared.cpp" || fail "a declared, unlinked helper did not compile"
grep -q 'static const std::array<Type, 1> kParams{Type::UOp};' "$work/declared.cpp" || fail "the generated call does not carry the declared parameter types"
grep -q 'static const Helper& h = helper("only_declared", kParams, Type::UOp);' "$work/declared.cpp" || fail "the generated call does not check the declaration"
grep -q 'helper_only_declared().fn(ctx, ' "$work/declared.cpp" || fail "the generated call does not use the checked helper"

# Warnings alone still exit 0.
printf 'ruleset r {\n  Add(x, y) => x\n}\n' > "$work/warn.rw"
out=$("$rwc" check "$work/warn.rw" 2>&1) || fail "warnings must not fail: $out"
echo "$out" | grep -q "warning: capture 'y' is never used" || fail "missing warning: $out"

# compile: deterministic, and an unchanged result keeps the file's timestamp.
"$rwc" compile "$src/tests/fixtures/examples.rw" -o "$work/a.cpp" --depfile "$work/a.d" || fail "compile failed"
"$rwc" compile "$src/tests/fixtures/examples.rw" -o "$work/b.cpp" || fail "compile failed"
cmp -s "$work/a.cpp" "$work/b.cpp" || fail "output is not deterministic"
grep -q "// tests/fixtures/examples.rw:\|examples.rw:[0-9]" "$work/a.cpp" || fail "no .rw:line comments"
touch -d "2001-01-01" "$work/a.cpp"
"$rwc" compile "$src/tests/fixtures/examples.rw" -o "$work/a.cpp" || fail "compile failed"
[ "$(stat -c %Y "$work/a.cpp")" = "$(date -d 2001-01-01 +%s)" ] || fail "unchanged output was rewritten"
grep -q "examples.rw" "$work/a.d" || fail "depfile lacks the source"

# --header: one typed accessor per rule set of the file, so C++ naming a rule set that does not
# exist fails to compile (the accessors are defined in the generated source).
mkdir -p "$work/rules_gen"
"$rwc" compile "$src/tests/fixtures/examples.rw" -o "$work/ex.cpp" --header "$work/rules_gen/examples.h" || fail "compile --header failed"
grep -q 'const rw::RuleSetMatcher& fold_identities();' "$work/rules_gen/examples.h" || fail "no accessor in the header"
grep -q 'const rw::RuleSetMatcher& fold_identities() {' "$work/ex.cpp" || fail "no accessor definition"
if command -v c++ >/dev/null; then
  printf '#include "rules_gen/examples.h"\nconst void* p = &tinyrw::rules::fold_identities();\n' > "$work/good.cpp"
  c++ -std=c++20 -fsyntax-only -I"$src" -I"$work" "$work/good.cpp" 2>"$work/cc.err" || fail "the accessor does not compile: $(head -5 "$work/cc.err")"
  printf '#include "rules_gen/examples.h"\nconst void* p = &tinyrw::rules::fold_identites();\n' > "$work/typo.cpp"
  c++ -std=c++20 -fsyntax-only -I"$src" -I"$work" "$work/typo.cpp" 2>/dev/null && fail "a misspelt rule set compiled"
fi

# A def becomes one static function, marked with its .rw location, emitted only where a rule of
# the file calls it (directly or through another def); a comprehension, a loop in a lambda.
"$rwc" compile "$src/tests/dsl/features_expr.rw" -o "$work/expr.cpp" --name tests/dsl/features_expr.rw \
  || fail "compile of features_expr.rw failed"
grep -q "^// tests/dsl/features_expr.rw:10  def offsets$" "$work/expr.cpp" || fail "no def location comment"
grep -q "^Value def_offsets(RewriteContext& ctx, const Value& v_rngs, const Value& v_arg) {$" \
  "$work/expr.cpp" || fail "no def function"
grep -q "def_pad_arg(ctx" "$work/expr.cpp" || fail "a def called through a def is missing"
[ "$(grep -c '^Value def_offsets(' "$work/expr.cpp")" = 1 ] || fail "def emitted twice"
grep -q "for (const Value& it[0-9_]* : items_of(seq" "$work/expr.cpp" || fail "no comprehension loop"
# a typed def parameter is checked when the def runs; a conditional is a C++ conditional
grep -q 'check_def_arg(v_x, Type::UOp, "as_uop", 0, "x");' "$work/expr.cpp" || fail "no typed parameter check"
# a parameter every call passes a node, and a result that is always a node, are not boxed
grep -q '^Value def_shl_by(RewriteContext& ctx, const UOp& x_x, const Value& v_k) {$' "$work/expr.cpp" \
  || fail "shl_by's node parameter is boxed"
grep -q '^UOp def_as_uop(RewriteContext& ctx, const Value& v_x) {$' "$work/expr.cpp" \
  || fail "as_uop's node result is boxed (or its parameter, passed a Value once, is not)"
grep -q 'check_def_arg(v_x, Type::UOp, "shl_by"' "$work/expr.cpp" && fail "an unboxed node parameter is checked"
grep -q '? Value::uop(x_y) : Value()))' "$work/expr.cpp" || fail "no conditional"

# compile of a bad file: exit 1 and no output file.
"$rwc" compile "$work/bad.rw" -o "$work/bad.cpp" 2>/dev/null && fail "compile of a bad file succeeded"
[ ! -e "$work/bad.cpp" ] || fail "bad compile wrote output"

# dump prints the decision tree per root op.
"$rwc" dump "$src/tests/fixtures/examples.rw" | grep -q "root Add" || fail "dump has no root Add"

# Output lost to a full disk is an error, on every output path.
ex="$src/tests/fixtures/examples.rw"
out=$("$rwc" dump "$ex" 2>&1 >/dev/full); rc=$?
[ $rc -eq 1 ] || fail "dump to /dev/full exited $rc"
echo "$out" | grep -q "rwc: error: cannot write the output: No space left on device" || fail "dump to /dev/full: $out"
"$rwc" check "$work/warn.rw" 2>/dev/full; rc=$?
[ $rc -eq 1 ] || fail "check whose warnings were lost exited $rc (wanted 1)"
# The usage text lost to a full disk: still exit 2 (fmt::print threw there, and rwc aborted).
"$rwc" bogus 2>/dev/full; rc=$?
[ $rc -eq 2 ] || fail "usage to a full stderr exited $rc (wanted 2)"
echo old > "$work/old.cpp"; touch -d "2001-01-01" "$work/old.cpp"
(trap '' XFSZ; ulimit -f 8; "$rwc" compile "$ex" -o "$work/old.cpp" 2>"$work/err") && fail "compile past RLIMIT_FSIZE exited 0"
grep -q "cannot write '$work/old.cpp': File too large" "$work/err" || fail "write error: $(cat "$work/err")"
[ "$(cat "$work/old.cpp")" = old ] || fail "a failed write changed the old output"
ls -A "$work" | grep -q '^\.old\.cpp\.' && fail "a failed write left its temporary file"

# compile writes regular files only: a device, FIFO or directory is refused at once (reading
# /dev/full first ran out of memory, and a FIFO hung).
mkfifo "$work/fifo"; mkdir "$work/dir"
for target in /dev/full "$work/fifo" "$work/dir"; do
  out=$(timeout 20 "$rwc" compile "$ex" -o "$target" 2>&1); rc=$?
  [ $rc -eq 1 ] || fail "compile -o $target exited $rc: $out"
  echo "$out" | grep -Eq "^rwc: error: cannot write '$target': it is (a directory|a FIFO|not a regular file)" || fail "compile -o $target: $out"
done
# (temporary files are named .NAME.XXXXXX, and nothing else in $work starts with a dot)
[ -z "$(ls -A "$work/dir")" ] && ! ls -A "$work" | grep -q '^\.' || fail "a refused output left files behind: $(ls -A "$work")"

# An output name near the 255-byte limit of a directory entry can be written (the temporary file's
# name, ".NAME.XXXXXX", was 8 bytes longer and failed with ENAMETOOLONG).
long="$work/$(printf 'n%.0s' $(seq 250)).cpp"
"$rwc" compile "$ex" -o "$long" || fail "compile to a 254-byte file name failed"
cmp -s "$long" "$work/b.cpp" || fail "the 254-byte file name was not written"
rm -f "$long"

# A symlinked output stays a symlink; its target is written, keeping its mode, and an unchanged
# result leaves the target's timestamp alone.
echo stale > "$work/target.cpp"; chmod 640 "$work/target.cpp"; ln -s target.cpp "$work/link.cpp"
"$rwc" compile "$ex" -o "$work/link.cpp" || fail "compile through a symlink failed"
[ -L "$work/link.cpp" ] || fail "the symlink was replaced"
cmp -s "$work/target.cpp" "$work/b.cpp" || fail "the symlink's target was not written"
[ "$(stat -c %a "$work/target.cpp")" = 640 ] || fail "the target's mode changed"
touch -d "2001-01-01" "$work/target.cpp"
"$rwc" compile "$ex" -o "$work/link.cpp" || fail "compile through a symlink failed"
[ "$(stat -c %Y "$work/target.cpp")" = "$(date -d 2001-01-01 +%s)" ] || fail "unchanged target was rewritten"
# Relative links are followed from their own directory, through a chain; a dangling link gets its
# target created (with the umask's mode); a loop is refused by name.
mkdir -p "$work/l/a" "$work/l/b"; echo stale > "$work/l/b/t.cpp"
ln -s ../b/t.cpp "$work/l/a/one.cpp"; ln -s a/one.cpp "$work/l/two.cpp"
(cd "$work/l" && "$rwc" compile "$ex" -o two.cpp) || fail "compile through a chain of relative links failed"
[ -L "$work/l/two.cpp" ] && [ -L "$work/l/a/one.cpp" ] || fail "a link of the chain was replaced"
cmp -s "$work/l/b/t.cpp" "$work/b.cpp" || fail "the chain's target was not written"
ln -s new.cpp "$work/l/dangling.cpp"
(umask 027; "$rwc" compile "$ex" -o "$work/l/dangling.cpp") || fail "compile through a dangling link failed"
[ -L "$work/l/dangling.cpp" ] && cmp -s "$work/l/new.cpp" "$work/b.cpp" || fail "a dangling link's target was not created"
[ "$(stat -c %a "$work/l/new.cpp")" = 640 ] || fail "a new output ignores the umask: $(stat -c %a "$work/l/new.cpp")"
ln -s loop2 "$work/l/loop1"; ln -s loop1 "$work/l/loop2"
out=$("$rwc" compile "$ex" -o "$work/l/loop1" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "cannot write '$work/l/loop1': too many levels of symbolic links" || fail "a link loop: exit $rc: $out"
[ -z "$(ls -A "$work/l" | grep '^\.')" ] || fail "temporary files left in $work/l: $(ls -A "$work/l")"
echo "rwc CLI: all checks passed"
