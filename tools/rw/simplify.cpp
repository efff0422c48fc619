// rw simplify: simplifies integer index expressions written in Python syntax.
#include "tools/rw/simplify.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "dsl/diagnostics.h"
#include "ir/render.h"
#include "ir/rewrite.h"
#include "ir/stats.h"
#include "ir/viz.h"
#include "symbolic/pyexpr.h"
#include "symbolic/simplify.h"

namespace tinyrw {

namespace {

// Bounds of --var: |LO|, |HI| <= 2**100, so that sums and products of a few variables stay
// exact in the 128-bit range arithmetic.
constexpr int kVarBoundBits = 100;

int usage(std::FILE* out = stderr, int status = 2) {
  fmt::print(
      out,
      "usage: rw simplify [--var NAME=LO..HI]... [--interp | --differential] [--stats] [--viz "
      "FILE]\n"
      "                   [--] (EXPR | --batch FILE|-)\n"
      "  EXPR uses Python syntax: + - * // % (floor), < <= > >= == !=, & | ^, max(a, b),\n"
      "  min(a, b), (a if c else b), True, False. Each result is printed on its own line.\n"
      "  --var NAME=LO..HI  bounds a variable, LO <= HI, each at most 2**{} in magnitude; a\n"
      "                     variable is given once. Expressions nest at most {} levels deep\n"
      "                     and have at most {} tokens.\n"
      "  --                 ends the options: an EXPR starting with '-' follows it.\n"
      "  --differential runs the compiled and the interpreted rules side by side and reports the\n"
      "  first node where they differ.\n",
      kVarBoundBits, kPyMaxNesting, kPyMaxTokens);
  return status;
}

bool parse_int(std::string_view s, i128& out) {
  if (s.empty()) return false;
  bool neg = false;
  size_t i = 0;
  if (s[0] == '-' || s[0] == '+') {
    neg = s[0] == '-';
    i = 1;
  }
  if (i == s.size()) return false;
  i128 v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
    if (v > (static_cast<i128>(1) << kVarBoundBits)) return false;
  }
  out = neg ? -v : v;
  return true;
}

// NAME=LO..HI; an empty string, or the reason it is refused.
std::string parse_var(const std::string& spec, PyVars& vars) {
  const std::string expected = fmt::format("bad --var '{}' (expected NAME=LO..HI)", spec);
  const size_t eq = spec.find('='), dots = spec.find("..");
  if (eq == std::string::npos || dots == std::string::npos || dots < eq) return expected;
  const std::string name = spec.substr(0, eq);
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return expected;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return expected;
  i128 lo = 0, hi = 0;
  for (auto [text, out] : {std::pair{std::string_view(spec).substr(eq + 1, dots - eq - 1), &lo},
                           std::pair{std::string_view(spec).substr(dots + 2), &hi}}) {
    if (!parse_int(text, *out)) {
      const bool digits = !text.empty() && text.find_first_not_of("+-0123456789") == text.npos;
      if (!digits) return expected;
      return fmt::format("bad --var '{}': bound {} is beyond the limit of 2**{} in magnitude", spec,
                         text, kVarBoundBits);
    }
  }
  if (lo > hi) return fmt::format("bad --var '{}': LO is greater than HI", spec);
  if (vars.count(name))
    return fmt::format("variable '{}' is given twice (--var '{}'); give each variable once", name,
                       spec);
  vars[name] = UOp::variable(name, lo, hi);
  return "";
}

// Prints an error for `line` of `source` at `col`, with the line and a caret (as .rw diagnostics).
void report(const std::string& source, int line_no, int col, const std::string& line,
            const std::string& msg) {
  rw::SourceFile file{source, line};
  rw::Diagnostics d;
  d.error(rw::Loc{&file, 1, col}, msg);
  std::string text = d.render();
  // The one-line source reports line 1; put the real line number in.
  const std::string from = source + ":1:", to = source + ":" + std::to_string(line_no) + ":";
  if (text.rfind(from, 0) == 0) text.replace(0, from.size(), to);
  std::fputs(text.c_str(), stderr);
}

}  // namespace

int simplify_main(const std::vector<std::string>& args) {
  PyVars vars;
  Simplifier::Mode mode = Simplifier::Mode::Compiled;
  bool stats = false;
  std::string viz_path, batch, expr;
  bool have_expr = false, options_done = false;
  auto add_var = [&](const std::string& spec) {
    const std::string err = parse_var(spec, vars);
    if (!err.empty()) rw::eprint("rw simplify: error: {}\n", err);
    return err.empty();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done) {
      if (have_expr) return usage();
      expr = a;
      have_expr = true;
    } else if (a == "--") {
      options_done = true;
    } else if (a == "--help" || a == "-h") {
      return usage(stdout, 0);
    } else if (a == "--var" && i + 1 < args.size()) {
      if (!add_var(args[++i])) return 2;
    } else if (a.rfind("--var=", 0) == 0) {
      if (!add_var(a.substr(6))) return 2;
    } else if (a == "--interp") {
      mode = Simplifier::Mode::Interpreted;
    } else if (a == "--differential") {
      mode = Simplifier::Mode::Differential;
    } else if (a == "--stats") {
      stats = true;
    } else if (a == "--viz" && i + 1 < args.size()) {
      viz_path = args[++i];
    } else if (a == "--batch" && i + 1 < args.size()) {
      batch = args[++i];
    } else if (!a.empty() && a[0] == '-' && a.size() > 1 &&
               !std::isdigit(static_cast<unsigned char>(a[1])) && a[1] != '(') {
      rw::eprint(
          "rw simplify: error: unknown option '{}' (an EXPR starting with '-' goes after "
          "'--')\n",
          a);
      return usage();
    } else if (!have_expr) {
      expr = a;
      have_expr = true;
    } else {
      return usage();
    }
  }
  if (have_expr == !batch.empty()) return usage();

  if (stats) {
    match_stats::reset();
    match_stats::set_enabled(true);
  }
  if (!viz_path.empty()) viz::enable(viz_path);
  const Simplifier simplifier(mode);

  int failures = 0;
  auto run_line = [&](const std::string& source, int line_no, const std::string& line) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      std::fputs("\n", stdout);
      return;
    }
    PyParseError err;
    std::optional<UOp> parsed = parse_python_expr(line, vars, err);
    if (!parsed) {
      report(source, line_no, err.col, line, err.message);
      std::fputs("\n", stdout);  // keep results aligned with their input lines
      ++failures;
      return;
    }
    try {
      viz::Group group(fmt::format("{}:{}", source, line_no));
      const UOp out = simplifier.simplify(*parsed);
      std::string text = render(out);
      text += '\n';
      std::fputs(text.c_str(), stdout);
    } catch (const std::exception& e) {
      report(source, line_no, 1, line, e.what());
      std::fputs("\n", stdout);
      ++failures;
    }
  };

  if (have_expr) {
    run_line("<expr>", 1, expr);
  } else {
    std::ifstream file;
    std::istream* in = &std::cin;
    if (batch != "-") {
      std::error_code ec;
      if (std::filesystem::is_directory(batch, ec)) {
        rw::eprint("rw simplify: error: cannot read '{}': it is a directory\n", batch);
        return 2;
      }
      file.open(batch);
      if (!file) {
        rw::eprint("rw simplify: error: cannot open '{}': {}\n", batch, std::strerror(errno));
        return 2;
      }
      in = &file;
    }
    const std::string source = batch == "-" ? "<stdin>" : batch;
    std::string line;
    int line_no = 0;
    while (std::getline(*in, line)) run_line(source, ++line_no, line);
    if (in->bad()) {
      rw::eprint("rw simplify: error: reading '{}' failed after line {}\n", source, line_no);
      return 2;
    }
  }
  // Results lost to a full disk or a closed pipe are an error, not a silent success.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    rw::eprint("rw simplify: error: cannot write the results: {}\n", std::strerror(errno));
    return 2;
  }
  if (stats) match_stats::print(stderr);
  if (!viz_path.empty()) {
    try {
      viz::write(viz_path);
    } catch (const std::exception& e) {
      rw::eprint("rw simplify: error: {}\n", e.what());
      return 2;
    }
  }
  return failures ? 1 : 0;
}

}  // namespace tinyrw
