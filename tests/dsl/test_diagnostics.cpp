// Malformed .rw input of every kind is rejected with `path:line:col: error: message`, the source
// line and a caret; never a crash, hang or stack overflow.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "dsl/resolve.h"

using namespace tinyrw::rw;

namespace {

struct Result {
  bool ok;
  std::string text;  // rendered diagnostics
  int errors;
  int warnings;
};

Result check(const std::string& source, const std::string& path = "bad.rw") {
  Diagnostics d;
  auto prog = load_rules_text(path, source, d);
  return {prog != nullptr, d.render(), d.error_count(), d.warning_count()};
}

// The first diagnostic has the contract's shape: location line, source line, caret line.
void expect_error(const std::string& source, const std::string& message, int line, int col) {
  const Result r = check(source);
  EXPECT_FALSE(r.ok) << source.substr(0, 200);
  const std::string head =
      "bad.rw:" + std::to_string(line) + ":" + std::to_string(col) + ": error: ";
  EXPECT_EQ(r.text.rfind(head, 0), 0u) << r.text.substr(0, 400);
  EXPECT_NE(r.text.find(message), std::string::npos) << "want '" << message << "' in\n"
                                                     << r.text.substr(0, 400);
  // location, source line, caret
  const size_t l1 = r.text.find('\n'), l2 = r.text.find('\n', l1 + 1),
               l3 = r.text.find('\n', l2 + 1);
  ASSERT_NE(l3, std::string::npos) << r.text;
  const std::string caret = r.text.substr(l2 + 1, l3 - l2 - 1);
  EXPECT_TRUE(std::regex_match(caret, std::regex(" *\\^"))) << "caret line: '" << caret << "'";
}

std::string temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("rw_diag_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST(RwDiagnostics, Garbage) {
  expect_error("ruleset r { @@@ }\n", "unexpected character '@'", 1, 13);
}

TEST(RwDiagnostics, TruncatedFile) {
  expect_error("ruleset r {\n  Add(x, 0) =>", "syntax error", 2, 15);
  expect_error("ruleset r {\n  Add(x, 0) => x\n", "syntax error", 3, 1);
}

TEST(RwDiagnostics, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string deep =
      "ruleset r {\n  x => " + std::string(50000, '(') + "x" + std::string(50000, ')') + "\n}\n";
  const Result r = check(deep);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.text.find("nesting deeper than"), std::string::npos) << r.text.substr(0, 300);
  std::string deep_pattern = "ruleset r {\n  ";
  for (int i = 0; i < 30000; ++i) deep_pattern += "Neg(";
  deep_pattern += "x" + std::string(30000, ')') + " => x\n}\n";
  EXPECT_FALSE(check(deep_pattern).ok);
  // Long flat chains need no brackets: they are bounded by the tree depth limit.
  std::string chain = "ruleset r {\n  Add(x, y) => x";
  for (int i = 0; i < 100000; ++i) chain += " + x";
  chain += "\n}\n";
  const Result c = check(chain);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.text.find("nested deeper than"), std::string::npos) << c.text.substr(0, 300);
  // Prefix and postfix operators too; the syntax tree stops growing at the limit (a 300k-deep
  // tree used to be built, and freeing it recursively overflowed the stack).
  for (const std::string op : {"!", "-", "~"}) {
    std::string text = "ruleset r {\n  Add(x, y) if ";
    for (int i = 0; i < 300000; ++i) text += op;
    text += op == "!" ? "True => x\n}\n" : "1 > 0 => x\n}\n";
    const Result u = check(text);
    EXPECT_FALSE(u.ok);
    EXPECT_NE(u.text.find("nested deeper than 256 levels"), std::string::npos)
        << u.text.substr(0, 300);
  }
  std::string post = "ruleset r {\n  Add(x, y) => x";
  for (int i = 0; i < 100000; ++i) post += ".src[0]";
  EXPECT_NE(check(post + "\n}\n").text.find("nested deeper than 256 levels"), std::string::npos);
}

TEST(RwDiagnostics, SourceSizeLimit) {
  const std::string big = "ruleset r {\n  Add(x, 0) => x\n}\n" + std::string(kMaxSourceBytes, '#');
  expect_error(big, "file larger than 1048576 bytes (the source size limit)", 1, 1);
  EXPECT_TRUE(check("ruleset r {\n  Add(x, 0) => x\n}\n#" + std::string(100000, ' ')).ok);
}

TEST(RwDiagnostics, NulAndInvalidUtf8) {
  expect_error(std::string("ruleset r {\n  Add(x, 0)\0 => x\n}\n", 30), "NUL byte in source", 2,
               12);
  expect_error("ruleset r {\n  Add(x, \xff) => x\n}\n", "invalid UTF-8 byte 0xff", 2, 10);
  EXPECT_TRUE(check("# caf\xc3\xa9 is fine in comments\nruleset r {\n  Add(x, 0) => x\n}\n").ok);
  // Found by the fuzzer: invalid UTF-8 inside a comment reached the ANTLR runtime, which threw.
  expect_error("ruleset r {\n  Add(x, 0) => x # se\x8c\xe9per\n}\n", "invalid UTF-8 byte 0x8c", 2,
               22);
  expect_error("# overlong \xc0\xaf\n", "invalid UTF-8 byte 0xc0", 1, 12);
  expect_error("# surrogate \xed\xa0\x80\n", "invalid UTF-8 byte 0xed", 1, 13);
}

TEST(RwDiagnostics, MegabyteLine) {
  std::string line =
      "ruleset r { Add(x, 0) => x } " + std::string(kMaxSourceBytes - 100, ' ') + "$";
  const Result r = check(line);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.text.find("unexpected character '$'"), std::string::npos);
  EXPECT_LT(r.text.size(), 2000u);  // the excerpt is cut to a window around the column
}

TEST(RwDiagnostics, UnterminatedCommentAndString) {
  expect_error("ruleset r {\n  /* never closed\n  Add(x, 0) => x\n}\n", "unterminated comment", 2,
               3);
  expect_error("ruleset r {\n  Add(x, 0) => fail(\"oops)\n}\n", "unterminated string", 2, 21);
}

TEST(RwDiagnostics, UnknownOp) {
  expect_error("ruleset r {\n  Frob(x) => x\n}\n", "unknown op or op group 'Frob'", 2, 3);
  expect_error("ruleset r {\n  ADDD(x, 0) => x\n}\n", "unknown op or op group 'ADDD'", 2, 3);
  expect_error("ruleset r {\n  add(x, 0) => x\n}\n", "did you mean 'Add'", 2, 3);
}

TEST(RwDiagnostics, WrongArity) {
  expect_error("ruleset r {\n  Add(x, y, z) => x\n}\n",
               "wrong arity: Add takes 2 sources, the pattern has 3", 2, 3);
  expect_error("ruleset r {\n  Add(x, y) => Where(x, y)\n}\n",
               "wrong arity: Where takes 3 sources, got 2", 2, 16);
}

TEST(RwDiagnostics, UnboundCapture) {
  expect_error("ruleset r {\n  Add(x, 0) => y\n}\n", "'y' is not bound", 2, 16);
  expect_error("ruleset r {\n  Add(x, 0) if z.vmin > 0 => x\n}\n", "'z' is not bound", 2, 16);
  expect_error("ruleset r {\n  Add(x, 0) || Mul(y, 1) => x\n}\n",
               "capture 'x' is used but not bound in every alternative", 2, 7);
}

TEST(RwDiagnostics, TypeErrors) {
  expect_error("ruleset r {\n  Add(x, y) if x => x\n}\n", "a guard must be a bool, got UOp", 2, 16);
  // x < y on UOps builds a bool UOp (CmpLt), which is not a guard
  expect_error("ruleset r {\n  Add(x, y) if x < y => x\n}\n", "a guard must be a bool, got UOp", 2,
               18);
  expect_error("ruleset r {\n  Add(x, y) => 3\n}\n", "a rule must produce a UOp, got int", 2, 16);
  expect_error("ruleset r {\n  Add(x, y) => x.frob\n}\n", "UOp has no property 'frob'", 2, 18);
  expect_error("verifier v {\n  Add(x, y) => x\n}\n", "a verifier rule must produce ok", 2, 16);
  expect_error("ruleset r {\n  Add(x, y) if x == 0 => y\n}\n", "compares a UOp with a number", 2,
               18);
  expect_error("gradient d {\n  Neg(g) => (g,)\n}\n", "'g' is the incoming gradient", 2, 7);
}

// Right-hand sides and guards are checked for the dtype classes of the UOps they build, as far
// as the pattern tells them (x:int, x:float, a comparison is bool): these were accepted, and the
// rewrite then built a float constant inside an index expression, or a Where on an int.
TEST(RwDiagnostics, DtypeClassErrors) {
  expect_error("ruleset r {\n  Add(x:index, 0) => x + 1.5\n}\n",
               "'+' makes a float number a constant of a UOp of int dtype", 2, 24);
  expect_error("ruleset r {\n  Mul(x:index, 1) => x.where(x, x)\n}\n",
               "'where' needs a bool condition, got int", 2, 24);
  expect_error("ruleset r {\n  Add(x:int, y) => Where(x, y, y)\n}\n",
               "Where needs a bool condition, got int", 2, 20);
  expect_error("ruleset r {\n  Add(x:int, y:float) => x * y\n}\n",
               "'*' needs operands of one dtype class, got int and float", 2, 28);
  expect_error("ruleset r {\n  Add(x:float, _) => x // 2\n}\n",
               "'//' needs int operands, got float", 2, 24);
  expect_error("ruleset r {\n  Add(x:int, _) => x / 2\n}\n", "'/' needs float operands, got int", 2,
               22);
  expect_error("ruleset r {\n  Add(x:float, _) => x ^ x\n}\n",
               "'^' needs int or bool operands, got float", 2, 24);
  // A captured Range is an index (spec.rw), so a float constant added to it is caught too.
  expect_error("ruleset r {\n  End(r:Range) => r + 0.5\n}\n",
               "'+' makes a float number a constant of a UOp of int dtype", 2, 21);
  // A Where's condition is a bool (spec_alu), whatever its capture says.
  expect_error("ruleset r {\n  Where(c, a, b) => c + 0.5\n}\n",
               "'+' makes a float number a constant of a UOp of bool dtype", 2, 23);
  // A shift count may have another int dtype than the value, but it is an int (spec_alu).
  expect_error("ruleset r {\n  Shl(x:int, y:float) => x << y\n}\n",
               "'<<' needs int operands, got float", 2, 28);
  expect_error("ruleset r {\n  Shr(x:int, y:bool) => Shr(x, y)\n}\n",
               "Shr needs int operands, got bool", 2, 25);
  expect_error("ruleset r {\n  Add(x:int, _) => const_like(x, 0.5)\n}\n",
               "'const_like' makes a float number a constant of a UOp of int dtype", 2, 20);
  expect_error("ruleset r {\n  Add(x:int, _) if (x * 0.5).vmax > 0 => x\n}\n",
               "'*' makes a float number", 2, 23);  // guards too
  expect_error("ruleset r {\n  Add(x:int, y:int) let z = x.lt(y) => z + x\n}\n",
               "'+' needs operands of one dtype class, got bool and int", 2, 42);  // through lets
  expect_error("ruleset r {\n  Add(c:CmpLt, y:int) => select(y, c, c)\n}\n",
               "'select' needs a bool condition, got int", 2, 26);
  // Well-typed rules, and rules whose classes are not known, stay clean.
  for (const char* ok : {"ruleset r {\n  Add(x:float, _) => x * 0.5\n}\n",
                         "ruleset r {\n  Where(c:bool, a, b) => c.where(b, a)\n}\n",
                         "ruleset r {\n  Where(c, a, b) => c.where(b, a).where(a, b)\n}\n",
                         "ruleset r {\n  Where(c, a:float, b) => c.where(a * 0.5, b)\n}\n",
                         "ruleset r {\n  Add(x:int, y:int) => x.lt(y).where(x, y + 1)\n}\n",
                         "ruleset r {\n  Add(x, y) => x * 0.5 + y\n}\n",
                         "ruleset r {\n  Shl(x:int, y:uint) => x << y\n}\n",
                         "ruleset r {\n  Add(x:int, _) => x.cast(float32) * 0.5\n}\n",
                         "gradient g {\n  Mul(a, b) => (b * g * 0.5, a * g)\n}\n"}) {
    const Result r = check(ok);
    EXPECT_TRUE(r.ok) << ok << r.text;
  }
}

TEST(RwDiagnostics, DuplicateNames) {
  const Result r = check("ruleset a {\n  Add(x, 0) => x\n}\nruleset a {\n  Mul(x, 1) => x\n}\n");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.text.rfind("bad.rw:4:9: error: rule set 'a' is defined twice", 0), 0u) << r.text;
  EXPECT_NE(r.text.find("bad.rw:1:9: note: first defined here"), std::string::npos) << r.text;
  EXPECT_FALSE(check("opgroup G = Add\nopgroup G = Mul\n").ok);
}

TEST(RwDiagnostics, MissingAndCyclicIncludes) {
  expect_error("include \"no_such_file.rw\"\n", "cannot open", 1, 1);
  const std::string dir = temp_dir();
  write(dir + "/a.rw", "include \"b.rw\"\nruleset ra {\n  Add(x, 0) => x\n}\n");
  write(dir + "/b.rw", "include \"a.rw\"\n");
  Diagnostics d;
  EXPECT_EQ(load_rules(dir + "/a.rw", d), nullptr);
  EXPECT_NE(d.render().find("include cycle"), std::string::npos) << d.render();
  EXPECT_NE(d.render().find("b.rw:1:1: error"), std::string::npos) << d.render();
  std::filesystem::remove_all(dir);
}

TEST(RwDiagnostics, UnknownHelper) {
  expect_error("ruleset r {\n  Add(x, y) => frobnicate(x)\n}\n",
               "unknown function or helper 'frobnicate' (helpers are declared with `extern fn`", 2,
               16);
  // registered in C++ (this binary links the helpers) but not declared: still an error
  expect_error("ruleset r {\n  Add(x, Const{k}) if gcd(k, 2) > 1 => x\n}\n",
               "helper 'gcd' is not declared; include the prelude that declares it", 2, 23);
}

// Calls are checked against `extern fn` declarations; the helper itself need not be linked.
TEST(RwDiagnostics, DeclaredHelpers) {
  const std::string gcd = "extern fn gcd(a: int, b: int) -> int\n";
  expect_error(gcd + "ruleset r {\n  Add(x, Const{k}) if gcd(k) > 1 => x\n}\n",
               "helper 'gcd' takes 2 argument(s), got 1", 3, 23);
  const Result arity = check(gcd + "ruleset r {\n  Add(x, Const{k}) if gcd(k) > 1 => x\n}\n");
  EXPECT_NE(arity.text.find("bad.rw:1:11: note: declared here"), std::string::npos) << arity.text;
  const std::string widen = "extern fn widen(x: uop, n: int) -> uop\n";
  expect_error(widen + "ruleset r {\n  Add(x, y) => widen(x, x.dtype)\n}\n",
               "argument 2 ('n') of helper 'widen' is int, got dtype", 3, 27);
  expect_error(widen + "ruleset r {\n  Add(x, y) => widen(1, 2)\n}\n",
               "argument 1 ('x') of helper 'widen' is UOp, got int", 3, 22);
  expect_error(widen + "ruleset r {\n  Add(x, y) => widen(x, n: 2)\n}\n",
               "helper 'widen' takes positional arguments only", 3, 28);
  // numbers widen: an int argument for a float parameter, a bool for an int one
  const Result widened = check(
      "extern fn halve(v: float) -> float\nextern fn twice(v: int) -> int\n"
      "ruleset r {\n  Add(x, _) if halve(1) < twice(True) => x\n}\n");
  EXPECT_TRUE(widened.ok && widened.text.empty()) << widened.text;
  // the declared result type is the call's type
  expect_error("extern fn size(x: uop) -> int\nruleset r {\n  Add(x, _) => size(x).src\n}\n",
               "int has no property 'src'", 3, 24);
  expect_error("extern fn f(x: vector) -> uop\n", "unknown type 'vector' (any, none, bool", 1, 16);
  expect_error("extern fn f(x: uop) -> list\n", "unknown type 'list'", 1, 24);
  expect_error("extern fn f(x: uop) -> uop\nextern fn f(y: int) -> int\n",
               "helper 'f' is declared twice", 2, 11);
  expect_error("extern fn max(a: int, b: int) -> int\n",
               "'max' is a builtin, op or dtype name, not a helper", 1, 11);
  expect_error("extern fn half(v: float) -> float\n",
               "'half' is a builtin, op or dtype name, not a helper", 1, 11);
  // a declaration that disagrees with the C++ helper registered under its name
  expect_error("extern fn gcd(a: int) -> int\n",
               "declaration of helper 'gcd' does not match the C++ helper registered under that "
               "name: declared with 1 argument(s), registered with 2",
               1, 11);
  expect_error("extern fn gcd(a: int, b: int) -> bool\n", "declared -> bool, registered -> int", 1,
               11);
  // the parameter types too, not only the arity
  expect_error("extern fn gcd(a: int, b: uop) -> int\n",
               "declaration of helper 'gcd' does not match the C++ helper registered under that "
               "name: argument 2 is declared UOp, registered int",
               1, 11);
  expect_error("extern fn can_safe_cast(from: any, to: dtype) -> bool\n",
               "argument 1 is declared any, registered dtype", 1, 11);
}

TEST(RwDiagnostics, RequireErrors) {
  expect_error("ruleset r {\n  Add(x, y) => require(x.dtype == y.dtype, \"no\")\n}\n",
               "'=> require(...)' is a verifier result; a rewrite or gradient rule has it as a "
               "clause before its '=>'",
               2, 16);
  expect_error("ruleset r {\n  Add(x, y) require(x, \"no\") => x\n}\n",
               "require needs a bool condition, got UOp", 2, 21);
  // placeholders in a reason: a bound name, '{{' '}}' for braces
  expect_error("ruleset r {\n  Add(x, _) require(x.vmax < 3, \"big {z}\") => x\n}\n",
               "'z' is not bound (not a capture, let, dtype or op)", 2, 39);
  expect_error("ruleset r {\n  Add(x, _) require(x.vmax < 3, \"a } b\") => x\n}\n",
               "a '}' in a require reason closes nothing (write '}}' for a brace)", 2, 36);
  expect_error("verifier v {\n  Add(x, _) require(x.vmax < 3, \"a {x.op} b\") => ok\n}\n",
               "a '{' in a require reason starts a placeholder '{name}' of a capture or let (write "
               "'{{' for a brace)",
               2, 36);
  expect_error("verifier v {\n  Add(x, _) => require(x.dtype == int32, \"no\") && True\n}\n",
               "require(cond, \"why\") is a clause or the whole result of a rule", 2, 16);
  expect_error("verifier v {\n  Add(x, _) => require(x, \"no\")\n}\n",
               "require needs a bool condition, got UOp", 2, 24);
  expect_error("verifier v {\n  Add(x, _) => require(x.dtype == int32, 1)\n}\n",
               "syntax error: mismatched input '1' expecting STRING", 2, 42);
}

// A call's '(' stands on its callee's line: a rule may end in a name and the next start with '('.
TEST(RwDiagnostics, MultiLineRules) {
  const Result two = check("ruleset r {\n  Add(x, 0) => x\n  (Mul|Or)[y, 1] => y\n}\n");
  EXPECT_TRUE(two.ok && two.text.empty()) << two.text;
  const Result method =
      check("ruleset r {\n  Add(x, 0) => x.src[0].src[0]\n  (Mul|Or)(y, 1) => y\n}\n");
  EXPECT_TRUE(method.ok && method.text.empty()) << method.text;
  // a call split before its '(' is an error, not a silent change of meaning
  expect_error("ruleset r {\n  Add(x, 0) => const_like\n    (x, 1)\n}\n",
               "syntax error: no viable alternative at input '(' (a call's '(' stands on the line "
               "of its name: this '(' starts a new rule)",
               3, 5);
  expect_error("ruleset r {\n  Add(x, 0) if gcd\n    (2, 4) > 1 => x\n}\n",
               "(a call's '(' stands on the line of its name", 3, 5);
}

// `name: ` (a space after the colon) at the start of a rule names it; `x:Const` is a capture.
TEST(RwDiagnostics, RuleNames) {
  expect_error("ruleset r {\n  zero: Add(x, 0) => x\n  zero: Mul(x, 0) => x\n}\n",
               "rule name 'zero' is used twice in rule set 'r'", 3, 3);
  const Result dup = check("ruleset r {\n  zero: Add(x, 0) => x\n  zero: Mul(x, 0) => x\n}\n");
  EXPECT_NE(dup.text.find("bad.rw:2:3: note: first used here"), std::string::npos) << dup.text;
  // the same name in two sets, and a named rule repeated by a `for` loop, are fine
  const Result ok = check(
      "ruleset a {\n  zero: Add(x, 0) => x\n}\nruleset b {\n  zero: Add(x, 0) => x\n"
      "  for op in (Or, Xor) {\n    z: op[x, 0] => x\n  }\n}\n");
  EXPECT_TRUE(ok.ok && ok.text.empty()) << ok.text;
  // a capture written `x: Const` at the start of a rule would now be a name: its uses are unbound
  expect_error("ruleset r {\n  x: Add(y, 0) => x\n}\n",
               "'x' is not bound (not a capture, let, dtype or op)", 2, 19);
  // inside a pattern it is still a capture, with a warning
  const Result spaced = check("ruleset r {\n  Add(x: Const, y) => y.replace(arg: x.arg)\n}\n");
  EXPECT_TRUE(spaced.ok);
  EXPECT_NE(spaced.text.find("bad.rw:2:8: warning: write a capture chain without a space after "
                             "':' (x:Const); 'name: ' names a rule only at the start of a rule"),
            std::string::npos)
      << spaced.text;
}

TEST(RwDiagnostics, CompositionErrors) {
  expect_error("ruleset a = b + c\n", "unknown rule set 'b'", 1, 13);
  const Result r = check("ruleset a = b\nruleset b = a\n");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.text.find("includes itself"), std::string::npos) << r.text;
}

TEST(RwWarnings, UnusedCaptureShadowedAndDuplicateRules) {
  const Result unused = check("ruleset r {\n  Add(x, y) => x\n}\n");
  EXPECT_TRUE(unused.ok);
  EXPECT_NE(unused.text.find("bad.rw:2:10: warning: capture 'y' is never used"), std::string::npos)
      << unused.text;

  const Result shadow = check("ruleset r {\n  Add(x, _) => x * 2\n  Add(x, 0) => x\n}\n");
  EXPECT_TRUE(shadow.ok);
  EXPECT_NE(shadow.text.find("bad.rw:3:3: warning: rule can never fire"), std::string::npos)
      << shadow.text;
  EXPECT_NE(shadow.text.find("bad.rw:2:3: note: this rule matches first"), std::string::npos)
      << shadow.text;

  const Result guarded =
      check("ruleset r {\n  Add(x, _) if x.vmin > 0 => x * 2\n  Add(x, 0) => x\n}\n");
  EXPECT_EQ(guarded.warnings, 0) << guarded.text;  // a guard may fail: no false alarm

  const Result dup = check("ruleset r {\n  Add(x, 0) => x\n  Add(x, 0) => x\n}\n");
  EXPECT_NE(dup.text.find("bad.rw:3:3: warning: duplicate rule"), std::string::npos) << dup.text;
  EXPECT_NE(dup.text.find("bad.rw:2:3: note"), std::string::npos) << dup.text;

  const Result wild = check("ruleset r {\n  Add(_x, y) => y\n}\n");
  EXPECT_EQ(wild.warnings, 0) << wild.text;  // '_'-prefixed captures are intentionally unused
}

TEST(RwDiagnostics, ManyMalformedInputsNeverCrash) {
  // Truncations of a valid file at every byte must each give errors or succeed, never crash.
  const std::string good =
      "include \"x.rw\"\nopgroup G = Add | Mul\nruleset r {\n  for op in (Add, Mul) {\n"
      "    op(op(x, c1:Const), c2:Const) => op(x, op(c1, c2))\n  }\n"
      "  a:G[x, Const{k}] let q = k * 2 if q > 0 && x.vmin >= 0 => x.replace(src: (x, x))\n}\n";
  for (size_t n = 0; n < good.size(); ++n) {
    Diagnostics d;
    (void)load_rules_text("t.rw", good.substr(0, n), d);
  }
  SUCCEED();
}

// Resolution walks the `use`/composition graph with an explicit stack: a 10,000-deep chain used
// to overflow the C++ stack.
TEST(RwRuleSets, DeepUseAndCompositionChainsResolve) {
  constexpr int kDepth = 10000;
  for (const bool compose : {false, true}) {
    std::string src;
    for (int i = 0; i < kDepth; ++i) {
      src += compose ? fmt::format("ruleset s{} = s{}\n", i, i + 1)
                     : fmt::format("ruleset s{} {{ use s{} }}\n", i, i + 1);
    }
    src += fmt::format("ruleset s{} {{ Add(x, 0) => x }}\n", kDepth);
    Diagnostics d;
    auto prog = load_rules_text("chain.rw", src, d);
    ASSERT_TRUE(prog) << d.render().substr(0, 400);
    ASSERT_EQ(prog->find("s0")->rules.size(), 1u);
    EXPECT_EQ(prog->find("s0")->rules[0].info.name, fmt::format("s{}#0", kDepth));
  }
  const Result cycle = check("ruleset a { use b }\nruleset b { use c }\nruleset c = a\n");
  EXPECT_FALSE(cycle.ok);
  EXPECT_NE(cycle.text.find("rule set 'a' includes itself"), std::string::npos) << cycle.text;
}

// A set used twice is included once, at its first use (its later copies could never fire
// first), so a diamond of `use`s stays linear instead of doubling at every level.
TEST(RwRuleSets, RepeatedUsesAreIncludedOnceInFirstUseOrder) {
  Diagnostics d;
  auto prog = load_rules_text("order.rw",
                              "ruleset c { Add(x, 0) => x }\n"
                              "ruleset a { Mul(x, 1) => x\n use c }\n"
                              "ruleset b { use c\n Sub(x, 0) => x\n use c }\n"
                              "ruleset d = a + b + c\n",
                              d);
  ASSERT_TRUE(prog) << d.render();
  std::vector<std::string> names;
  std::vector<int> indices;
  for (const ResolvedRule& r : prog->find("d")->rules) {
    names.push_back(r.info.name);
    indices.push_back(r.rule_index);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"a#0", "c#0", "b#1"}));
  EXPECT_EQ(indices, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(prog->find("b")->rules.size(), 2u);

  std::string diamond;
  for (int i = 0; i < 60; ++i)
    diamond += fmt::format("ruleset s{} {{ use s{}\n use s{} }}\n", i, i + 1, i + 1);
  diamond += "ruleset s60 { Add(x, 0) => x }\n";
  Diagnostics dd;
  auto p2 = load_rules_text("diamond.rw", diamond, dd);
  ASSERT_TRUE(p2) << dd.render().substr(0, 400);
  EXPECT_EQ(p2->find("s0")->rules.size(), 1u);
}

// Expansion that would still grow past kMaxExpandedRules (here: every set of a chain holds the
// rules of all the sets after it) stops with an error naming the limit.
TEST(RwRuleSets, ExpansionLimitIsALocatedError) {
  std::string src;
  for (int i = 0; i < 1000; ++i)
    src += fmt::format("ruleset s{} {{ Add(x, {}) => x\n use s{} }}\n", i, i, i + 1);
  src += "ruleset s1000 { Add(x, 0) => x }\n";
  const Result r = check(src);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.text.find(fmt::format("rules in total (the rule-set expansion limit)")),
            std::string::npos)
      << r.text.substr(0, 400);
  EXPECT_NE(r.text.find(std::to_string(kMaxExpandedRules)), std::string::npos);
  EXPECT_EQ(r.text.rfind("bad.rw:", 0), 0u) << r.text.substr(0, 200);
  EXPECT_EQ(r.errors, 1);
  // Nested `for` loops are counted as they expand, so they stop at the limit too.
  std::string loops = "ruleset r {\n";
  for (int i = 0; i < 6; ++i)
    loops += fmt::format("for o{} in (ALU, Add, Mul, Max, Sub, And, Or, Xor) {{\n", i);
  loops += "Add(x, 0) => x\n" + std::string(6, '}') + "\n}\n";
  const Result l = check(loops);
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find("the rule-set expansion limit"), std::string::npos)
      << l.text.substr(0, 400);
}

// `for` bodies that add no rules (empty, or a `use` of a set that is already included) cost time
// all the same, and nested loops multiply it: nine levels over eight ops ran for minutes without
// an error. Their repetitions count against the same limit. Six levels (262,144 repetitions of the
// innermost body) used to be accepted.
TEST(RwRuleSets, EmptyLoopRepetitionsCountAgainstTheExpansionLimit) {
  for (const char* body : {"", "use c\n"}) {
    std::string src = "ruleset c { Add(x, 0) => x }\nruleset r {\n";
    for (int i = 0; i < 6; ++i)
      src += fmt::format("for o{} in (ALU, Add, Mul, Max, Sub, And, Or, Xor) {{\n", i);
    src += body + std::string(6, '}') + "\n}\n";
    const Result r = check(src);
    EXPECT_FALSE(r.ok) << body;
    EXPECT_NE(r.text.find(fmt::format("the for loops of rule set 'r' repeat their bodies more than "
                                      "{} times in total (the rule-set expansion limit)",
                                      kMaxExpandedRules)),
              std::string::npos)
        << r.text.substr(0, 400);
    EXPECT_EQ(r.errors, 1) << r.text.substr(0, 400);
  }
  // A set spliced in again, however often, is skipped at once, and loops well under the limit
  // still resolve.
  std::string src = "ruleset c { Add(x, 0) => x }\nruleset r {\n";
  for (int i = 0; i < 5; ++i)
    src += fmt::format("for o{} in (ALU, Add, Mul, Max, Sub, And, Or, Xor) {{\n", i);
  src += "use c\n" + std::string(5, '}') + "\n}\n";
  Diagnostics d;
  auto prog = load_rules_text("loops.rw", src, d);
  ASSERT_TRUE(prog) << d.render().substr(0, 400);
  EXPECT_EQ(prog->find("r")->rules.size(), 1u);
}

// The expression features: comprehensions, tuple builtins, slices, tuple operators, comparison
// operators on UOps and `def` functions, each misuse at its own location.
TEST(RwDiagnostics, ExpressionFeatureErrors) {
  auto rule = [](const std::string& text) { return "ruleset r {\n  " + text + "\n}\n"; };
  // comprehensions
  expect_error(rule("s:Sink(...) => s.replace(src: [a for a in 5])"), "cannot iterate over a int",
               2, 45);
  expect_error(rule("s:Sink(...) => s.replace(src: [s for s in s.src])"), "'s' is already bound", 2,
               40);
  expect_error(rule("s:Sink(...) => s.replace(src: [a for a in s.src if (a,)])"),
               "a comprehension filter must be a bool, got tuple", 2, 54);
  expect_error(rule("s:Sink(...) => s.replace(src: [s if True])"),
               "a comprehension starts with 'for', not 'if'", 2, 36);
  expect_error(rule("s:Sink(...) => s.replace(src: [a for a in s.src] + [a])"), "'a' is not bound",
               2, 55);  // comprehension names stay inside
  // the checker knows what some tuples hold: x.src UOps, range() ints, through lets and slices
  expect_error(rule("s:Sink(...) => s.replace(src: [x.frob for x in s.src])"),
               "UOp has no property 'frob'", 2, 36);
  expect_error(rule("s:Sink(...) let t = s.src[1:] if t[0] == 0 => s"),
               "'==' compares a UOp with a number", 2, 41);
  expect_error(rule("s:Sink(...) if all(i.vmax > 0 for i in range(3)) => s"),
               "int has no property 'vmax'", 2, 24);
  // slices and tuple operators
  expect_error(rule("s:Sink(...) => s.replace(src: s[1:])"), "cannot slice a UOp", 2, 34);
  expect_error(rule("s:Sink(...) => s.replace(src: s.src[\"a\":])"),
               "slice bounds must be ints, got string", 2, 39);
  expect_error(rule("s:Sink(...) if s in 3 => s"), "'in' needs a tuple on the right, got int", 2,
               20);
  expect_error(rule("s:Sink(...) => s.replace(src: s.src + 1)"),
               "'+' joins two tuples, got tuple and int", 2, 39);
  expect_error(rule("s:Sink(...) => s.replace(src: s.src * 1.5)"),
               "'*' repeats a tuple by an int, got tuple and float", 2, 39);
  expect_error(rule("s:Sink(...) => s.replace(src: s.src - s.src)"),
               "'-' does not apply to tuples, got tuple and tuple", 2, 39);
  // tuple builtins
  expect_error(rule("s:Sink(...) => s.replace(src: range(1, 2, 3, 4))"),
               "'range' takes 1 to 3 argument(s), got 4", 2, 33);
  expect_error(rule("s:Sink(...) if sum(3) > 0 => s"), "'sum' needs a tuple, got int", 2, 22);
  expect_error(rule("s:Sink(...) => s.replace(src: range(1.5))"),
               "'range' needs int arguments, got float", 2, 39);
  expect_error(rule("s:Sink(...) if max(3) > 0 => s"),
               "'max' of one argument needs a tuple, got int", 2, 18);
  expect_error(rule("s:Sink(...) if zip() == () => s"), "'zip' takes at least 1 argument(s), got 0",
               2, 18);
  // comparison operators on UOps keep the dtype-class checks
  expect_error(rule("Add(x:int, y:float) => x < y"),
               "'<' needs operands of one dtype class, got int and float", 2, 28);
  expect_error(rule("Add(x:int, _) => x >= 1.5"),
               "'>=' makes a float number a constant of a UOp of int dtype", 2, 22);
  expect_error(rule("Add(x, _) => x < \"s\""), "'<' needs UOps or numbers, got UOp and string", 2,
               18);
  expect_error(rule("Add(x, _) => x < (1,)"), "'<' does not apply to tuples, got UOp and tuple", 2,
               18);
  expect_error(rule("Add(x:int, y:int) => (x < y) + x"),
               "'+' needs operands of one dtype class, got bool and int", 2, 32);
  // fold(Op, t): an op, then a tuple
  expect_error(rule("Add(x, y) => fold(1, (x, y))"), "'fold' needs an op first, got int", 2, 21);
  expect_error(rule("Add(x, y) => fold(And, x)"), "'fold' needs a tuple, got UOp", 2, 26);
  expect_error(rule("Add(x, y) => fold(And)"), "'fold' takes 2 argument(s), got 1", 2, 16);
}

TEST(RwDiagnostics, DefErrors) {
  auto with_rule = [](const std::string& defs) {
    return defs + "ruleset r {\n  Add(x, y) => f(x)\n}\n";
  };
  expect_error(with_rule("def f(n) = f(n - 1)\n"),
               "def 'f' is recursive: f -> f (defs cannot recurse)", 1, 12);
  expect_error(with_rule("def f(n) = g(n) + 1\ndef g(n) = h(n)\ndef h(n) = f(n)\n"),
               "def 'f' is recursive: f -> g -> h -> f (defs cannot recurse)", 3, 12);
  expect_error(with_rule("def f(n) = n\ndef f(n) = n\n"), "def 'f' is defined twice", 2, 5);
  expect_error(with_rule("def f(n) = n\ndef len(n) = n\n"),
               "def 'len' has the name of a builtin function", 2, 5);
  expect_error(with_rule("def f(n) = n\ndef Add(n) = n\n"), "def 'Add' has the name of an op", 2,
               5);
  // a declared helper's name (declared only: no C++ helper of that name is linked), whether the
  // declaration comes before or after the def
  expect_error(
      with_rule("def f(n) = n\nextern fn frob(a: int, b: int) -> int\ndef frob(a, b) = a\n"),
      "def 'frob' has the name of a helper", 3, 5);
  expect_error(
      with_rule("def f(n) = n\ndef frob(a, b) = a\nextern fn frob(a: int, b: int) -> int\n"),
      "def 'frob' has the name of a helper", 2, 5);
  expect_error(with_rule("def f(n, n) = n\n"), "parameter 'n' is given twice", 1, 10);
  expect_error(with_rule("def f(a, b) = a + b\n"), "def 'f' takes 2 argument(s), got 1", 3, 16);
  expect_error("def f(a) = a\nruleset r {\n  Add(x, y) => f(a: x)\n}\n",
               "def 'f' takes positional arguments only", 3, 21);
  expect_error(with_rule("def f(n) = n.frob\n"), "any has no property 'frob'", 1, 14);
  // a call has the type of the def's body, as far as the checker can tell
  expect_error("def pair(a) = (a, a)\nruleset r {\n  Add(x, y) if pair(1) > y.vmax => x\n}\n",
               "'>' does not apply to tuples, got tuple and any", 3, 24);
  expect_error("def three(a) = 3\nruleset r {\n  Add(x, y) => three(x)\n}\n",
               "a rule must produce a UOp, got int", 3, 16);
  // 'ok' and 'fail' may be what a def gives; the rule that calls it decides
  const Result verifier = check(
      "def ok_if(c, why) = select(c, ok, fail(why))\nverifier v {\n  Add(x, y) => "
      "ok_if(x.dtype == y.dtype, \"dtypes differ\")\n}\n");
  EXPECT_TRUE(verifier.ok) << verifier.text;
  // The levels a def's evaluation nests through its calls are bounded (kMaxDefDepth): in this
  // chain def fi nests 2i + 1 levels, and the first def past the limit is reported.
  std::string chain = "def f0(n) = n\n";
  for (int i = 1; i <= kMaxDefDepth / 2 + 5; ++i)
    chain += fmt::format("def f{}(n) = f{}(n) + 1\n", i, i - 1);
  chain += "ruleset r {\n  Add(x, y) => f1(x)\n}\n";
  const int first = kMaxDefDepth / 2;
  expect_error(
      chain,
      fmt::format("def 'f{}' nests {} levels deep through the defs it calls (more than {}: "
                  "the def depth limit)",
                  first, 2 * first + 1, kMaxDefDepth),
      first + 1, 5);
}

// `not in`, `a if c else b` and typed def parameters: misuse is a located error.
TEST(RwDiagnostics, ConditionalNotInAndTypedDefErrors) {
  auto rule = [](const std::string& text) { return "ruleset r {\n  " + text + "\n}\n"; };
  expect_error(rule("s:Sink(...) if s not in 3 => s"),
               "'not in' needs a tuple on the right, got int", 2, 20);
  expect_error(rule("Add(x, y) => x if \"c\" else y"),
               "the condition of 'a if c else b' must be a bool, got string", 2, 21);
  expect_error(rule("Add(x, y) => 1 if x.vmin > 0 else 2"), "a rule must produce a UOp, got int", 2,
               18);
  expect_error(rule("Add(x, y) => x if x.vmin > 0 els y"),
               "syntax error: extraneous input 'if' expecting {'}', '(', 'use', 'for', '-', '_', "
               "'True', 'False', 'none', 'inf', 'nan', INT, FLOAT, STRING, ID} (an 'if' after a "
               "rule's result starts a conditional 'a if c else b', which needs its 'else')",
               2, 18);
  // an `if` after a let is the next guard unless its `else` follows
  const Result guard = check(rule("Add(x, y) let z = x if y.vmin > 0 => z"));
  EXPECT_TRUE(guard.ok) << guard.text;
  const Result cond = check(rule("Add(x, y) let z = x if y.vmin > 0 else y if z.vmax > 0 => z"));
  EXPECT_TRUE(cond.ok) << cond.text;
  // typed def parameters: a known argument type is checked at the call
  expect_error("def f(x: uop) = x\nruleset r {\n  Add(x, y) => f(3)\n}\n",
               "argument 1 ('x') of def 'f' is UOp, got int", 3, 18);
  expect_error("def f(t: tuple, n: int) = t[n]\nruleset r {\n  Add(x, y) => f(x.src, \"a\")\n}\n",
               "argument 2 ('n') of def 'f' is int, got string", 3, 25);
  expect_error("def f(x: frob) = x\nruleset r {\n  Add(x, y) => f(x)\n}\n",
               "unknown type 'frob' (any, none, bool, int, float, string, uop, dtype, op, tuple, "
               "status, record)",
               1, 10);
  // the body is checked with the declared types
  expect_error("def f(n: int) = n.vmax\nruleset r {\n  Add(x, y) => f(1)\n}\n",
               "int has no property 'vmax'", 1, 19);
  // sum/prod/max of a tuple of ints is an int and fold needs UOps: no rule result
  expect_error(rule("Add(x, y) => sum((1, 2))"), "a rule must produce a UOp, got int", 2, 16);
  expect_error(rule("Add(x, y) => max((1, 2))"), "a rule must produce a UOp, got int", 2, 16);
  expect_error(rule("Add(x, y) => fold(Add, (1, 2))"),
               "'fold' builds ops from a tuple of UOps, got a tuple of int", 2, 26);
  const Result sum_uops = check(rule("Add(x, y) => sum(x.src) + fold(Add, (x, y))"));
  EXPECT_TRUE(sum_uops.ok) << sum_uops.text;
  // a chain of conditionals is read in a loop and nests to the right: a long one is the tree
  // depth limit's error, not a deep recursion
  std::string chain = "x";
  for (int i = 0; i < 20000; ++i) chain += " if x.vmin > 0 else x";
  const Result deep = check(rule("Add(x, y) => " + chain));
  EXPECT_FALSE(deep.ok);
  EXPECT_EQ(deep.errors, 1) << deep.text.substr(0, 300);
  EXPECT_NE(
      deep.text.find(
          "error: pattern or expression nested deeper than 256 levels (the tree depth limit)"),
      std::string::npos)
      << deep.text.substr(0, 300);
}

// Record fields: a CALL's arg is a CallInfo, so a misspelt field or a field used as the wrong type
// is a check-time error; a field name read from what is no record is one too.
TEST(RwDiagnostics, RecordFieldErrors) {
  auto rule = [](const std::string& r) { return "ruleset r {\n  " + r + "\n}\n"; };
  expect_error(rule("c:Call(...) if c.arg.kernle => c.src[0]"),
               "CallInfo has no field 'kernle' (its fields: name, kernel, precompile, "
               "precompile_backward, grad_fn, id)",
               2, 24);
  expect_error(rule("c:Call(...) if c.arg.name => c.src[0]"), "a guard must be a bool, got string",
               2, 24);
  expect_error(rule("c:Call(...) let i = c.arg if i.grad => c.src[0]"),
               "CallInfo has no field 'grad'", 2, 34);
  expect_error(rule("c:Call(...) if c.kernel => c.src[0]"),
               "UOp has no property 'kernel' (a record's fields are read through the arg: "
               "x.arg.kernel)",
               2, 20);
  expect_error(rule("c:Call(...) if c.nsrc.kernel => c.src[0]"),
               "int has no field 'kernel' (only a record arg has fields)", 2, 25);
  // where the op is not known to carry a CallInfo, a known field name is read at run time
  const Result any = check(rule("c:(Call|Param) if c.arg.kernel || c.arg.slot == 0 => c.src[0]"));
  EXPECT_TRUE(any.ok) << any.text;
  expect_error(rule("c:(Call|Param) if c.arg.frob => c.src[0]"), "any has no property 'frob'", 2,
               27);
}

// rewritten(u) and rewritten_fully(u) take one UOp, and only a ruleset's rules run in a rule set.
TEST(RwDiagnostics, RewrittenErrors) {
  expect_error("ruleset r {\n  Add(x, y) => rewritten(x, y)\n}\n",
               "'rewritten' takes 1 argument(s), got 2", 2, 16);
  expect_error("ruleset r {\n  Add(x, y) => rewritten_fully(x.nsrc)\n}\n",
               "'rewritten_fully' needs a UOp, got int", 2, 34);
  expect_error("ruleset r {\n  Add(x, y) => rewritten(3)\n}\n", "'rewritten' needs a UOp, got int",
               2, 26);
  expect_error("verifier v {\n  Add(x, y) => rewritten(x) != none\n}\n",
               "'rewritten' rewrites with the running rule set: only the rules of a ruleset run "
               "in one (not a verifier's)",
               2, 16);
  expect_error("gradient g {\n  Add(x, y) => (rewritten_fully(g), g)\n}\n",
               "'rewritten_fully' rewrites with the running rule set: only the rules of a "
               "ruleset run in one (not a gradient's)",
               2, 17);
  // rewritten_fully(u, "set") names a loaded set by a string literal; rewritten takes no set
  expect_error("ruleset r {\n  Add(x, y) => rewritten_fully(x, \"nope\")\n}\n",
               "'rewritten_fully': no rule set named 'nope' in the loaded files", 2, 35);
  expect_error("ruleset r {\n  Add(x, y) => rewritten_fully(x, x)\n}\n",
               "'rewritten_fully' names its rule set by a string literal, got UOp", 2, 35);
  expect_error("ruleset r {\n  Add(x, y) => rewritten(x, \"r\")\n}\n",
               "'rewritten' takes 1 argument(s), got 2", 2, 16);
  const Result named = check(
      "ruleset r {\n  Neg(x) => rewritten_fully(x, \"s\")\n}\nruleset s {\n  Neg(x) => x\n}\n");
  EXPECT_TRUE(named.ok) << named.text;
  const Result ok = check("def once(u) = rewritten(u)\nruleset r {\n  Neg(x) => once(x * 1)\n}\n");
  EXPECT_TRUE(ok.ok) << ok.text;
}
