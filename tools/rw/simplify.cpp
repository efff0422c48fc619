// rw simplify: simplifies integer index expressions written in Python syntax.
#include "tools/rw/simplify.h"

#include <cstdio>
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

int usage() {
  fmt::print(
      stderr,
      "usage: rw simplify [--var NAME=LO..HI]... [--interp | --differential] [--stats] [--viz "
      "FILE]\n"
      "                   (EXPR | --batch FILE|-)\n"
      "  EXPR uses Python syntax: + - * // % (floor), < <= > >= == !=, & | ^, max(a, b),\n"
      "  min(a, b), (a if c else b), True, False. Each result is printed on its own line.\n"
      "  --differential runs the compiled and the interpreted rules side by side and reports the\n"
      "  first node where they differ.\n");
  return 2;
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
    if (v > (static_cast<i128>(1) << 100)) return false;
  }
  out = neg ? -v : v;
  return true;
}

// NAME=LO..HI
bool parse_var(const std::string& spec, PyVars& vars) {
  const size_t eq = spec.find('='), dots = spec.find("..");
  if (eq == std::string::npos || dots == std::string::npos || dots < eq) return false;
  const std::string name = spec.substr(0, eq);
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  i128 lo = 0, hi = 0;
  if (!parse_int(std::string_view(spec).substr(eq + 1, dots - eq - 1), lo) ||
      !parse_int(std::string_view(spec).substr(dots + 2), hi) || lo > hi) {
    return false;
  }
  vars[name] = UOp::variable(name, lo, hi);
  return true;
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
  bool have_expr = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--var" && i + 1 < args.size()) {
      if (!parse_var(args[++i], vars)) {
        fmt::print(stderr,
                   "rw simplify: error: bad --var '{}' (expected NAME=LO..HI with LO <= HI)\n",
                   args[i]);
        return 2;
      }
    } else if (a.rfind("--var=", 0) == 0) {
      if (!parse_var(a.substr(6), vars)) {
        fmt::print(stderr,
                   "rw simplify: error: bad --var '{}' (expected NAME=LO..HI with LO <= HI)\n",
                   a.substr(6));
        return 2;
      }
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
      fmt::print(stderr, "rw simplify: error: unknown option '{}'\n", a);
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
      file.open(batch);
      if (!file) {
        fmt::print(stderr, "rw simplify: error: cannot open '{}'\n", batch);
        return 2;
      }
      in = &file;
    }
    const std::string source = batch == "-" ? "<stdin>" : batch;
    std::string line;
    int line_no = 0;
    while (std::getline(*in, line)) run_line(source, ++line_no, line);
  }
  std::fflush(stdout);
  if (stats) match_stats::print(stderr);
  if (!viz_path.empty()) {
    try {
      viz::write(viz_path);
    } catch (const std::exception& e) {
      fmt::print(stderr, "rw simplify: error: {}\n", e.what());
      return 2;
    }
  }
  return failures ? 1 : 0;
}

}  // namespace tinyrw
