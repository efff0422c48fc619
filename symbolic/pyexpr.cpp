#include "symbolic/pyexpr.h"

#include <cctype>

#include <fmt/format.h>

namespace tinyrw {

namespace {

struct Tok {
  enum Kind { Int, Name, Op, End } kind;
  std::string_view text;  // into the parsed text (which outlives the parser), or a literal
  int col;
  i128 value = 0;
};

struct Fail {
  PyParseError err;
};

class Parser {
 public:
  Parser(std::string_view s, const PyVars& vars) : s_(s), vars_(vars) { lex(); }

  UOp parse() {
    UOp e = conditional();
    if (peek().kind != Tok::End) fail(peek().col, fmt::format("unexpected '{}'", peek().text));
    return e;
  }

 private:
  [[noreturn]] void fail(int col, std::string msg) { throw Fail{{col, std::move(msg)}}; }

  void lex() {
    size_t i = 0;
    while (i < s_.size()) {
      const char c = s_[i];
      const int col = static_cast<int>(i) + 1;
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++i;
        continue;
      }
      if (toks_.size() >= kPyMaxTokens)
        fail(col, fmt::format("expression longer than {} tokens (the expression size limit)",
                              kPyMaxTokens));
      if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t j = i;
        i128 v = 0;
        while (j < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) {
          if (s_[j] != '_') v = v * 10 + (s_[j] - '0');
          if (v > (static_cast<i128>(1) << 63) - 1)
            fail(col, "integer literal too large (the limit is 2**63-1)");
          ++j;
        }
        if (j < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[j])) || s_[j] == '.')) {
          fail(static_cast<int>(j) + 1, "only integer literals are supported");
        }
        toks_.push_back({Tok::Int, s_.substr(i, j - i), col, v});
        i = j;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i;
        while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_'))
          ++j;
        toks_.push_back({Tok::Name, s_.substr(i, j - i), col});
        i = j;
      } else {
        const size_t len = operator_length(i);
        if (len == 0) {
          const unsigned char u = static_cast<unsigned char>(c);
          fail(col, u >= 0x20 && u < 0x7f ? fmt::format("unexpected character '{}'", c)
                                          : fmt::format("unexpected byte 0x{:02x}", u));
        }
        toks_.push_back({Tok::Op, s_.substr(i, len), col});
        i += len;
      }
    }
    toks_.push_back({Tok::End, "end of input", static_cast<int>(s_.size()) + 1});
  }

  // The length of the operator at i (// << >> <= >= == != + - * % < > & | ^ ( ) ,), or 0.
  size_t operator_length(size_t i) const {
    const char next = i + 1 < s_.size() ? s_[i + 1] : '\0';
    switch (s_[i]) {
      case '/':
        return next == '/' ? 2 : 0;
      case '=':
      case '!':
        return next == '=' ? 2 : 0;
      case '<':
      case '>':
        return next == '=' || next == s_[i] ? 2 : 1;
      case '+':
      case '-':
      case '*':
      case '%':
      case '&':
      case '|':
      case '^':
      case '(':
      case ')':
      case ',':
        return 1;
      default:
        return 0;
    }
  }

  const Tok& peek() const { return toks_[pos_]; }
  bool is_op(std::string_view o) const { return peek().kind == Tok::Op && peek().text == o; }
  bool is_name(std::string_view n) const { return peek().kind == Tok::Name && peek().text == n; }
  const Tok& next() { return toks_[pos_++]; }
  void expect(std::string_view o) {
    if (!is_op(o)) fail(peek().col, fmt::format("expected '{}', got '{}'", o, peek().text));
    ++pos_;
  }

  struct Depth {
    Parser& p;
    Depth(Parser& parser, int col) : p(parser) {
      if (++p.depth_ > kPyMaxNesting)
        p.fail(col, fmt::format("expression nested deeper than {} levels (the nesting depth limit)",
                                kPyMaxNesting));
    }
    ~Depth() { --p.depth_; }
  };

  static bool is_bool(const UOp& u) { return u.dtype().is_bool(); }
  // Python treats a bool as the integer 0 or 1 wherever an integer is needed.
  static void want_int(UOp& u, int, std::string_view) {
    if (is_bool(u)) u = u.where(UOp::cint(1), UOp::cint(0));
  }

  // a if c else b   (lowest precedence)
  UOp conditional() {
    const int col = peek().col;
    UOp a = comparison();
    if (!is_name("if")) return a;
    ++pos_;
    UOp c = comparison();
    if (!is_name("else")) fail(peek().col, fmt::format("expected 'else', got '{}'", peek().text));
    Depth d(*this, next().col);  // `a if c else b if ...` nests to the right
    UOp b = conditional();
    if (is_bool(a) != is_bool(b)) {  // mixed branches: both as integers
      want_int(a, col, "if");
      want_int(b, col, "else");
    }
    if (!is_bool(c)) c = c.ne(c.const_like(static_cast<i128>(0)));  // Python truthiness
    return c.where(a, b);
  }

  UOp comparison() {
    UOp left = bit_or();
    std::vector<UOp> chain;
    while (peek().kind == Tok::Op &&
           (peek().text == "<" || peek().text == "<=" || peek().text == ">" ||
            peek().text == ">=" || peek().text == "==" || peek().text == "!=")) {
      const Tok op = next();
      UOp right = bit_or();
      const bool eq = op.text == "==" || op.text == "!=";
      if (eq ? is_bool(left) != is_bool(right) : (is_bool(left) || is_bool(right))) {
        want_int(left, op.col, op.text);
        want_int(right, op.col, op.text);
      }
      UOp cmp;
      if (op.text == "<")
        cmp = left.lt(right);
      else if (op.text == "<=")
        cmp = left.le(right);
      else if (op.text == ">")
        cmp = left.gt(right);
      else if (op.text == ">=")
        cmp = left.ge(right);
      else if (op.text == "==")
        cmp = left.eq(right);
      else
        cmp = left.ne(right);
      // a < b < c is `(b < c) if (a < b) else False`: like Python, later comparisons are not
      // evaluated once one fails (they may divide by zero).
      chain.push_back(cmp);
      left = right;
    }
    if (chain.empty()) return left;
    UOp result = chain.back();
    for (size_t i = chain.size() - 1; i-- > 0;) result = chain[i].where(result, UOp::cbool(false));
    return result;
  }

  template <class Next>
  UOp bitwise(std::string_view sym, Op op, Next next_level) {
    UOp left = next_level();
    while (is_op(sym)) {
      const int col = next().col;
      UOp right = next_level();
      if (is_bool(left) != is_bool(right)) {
        want_int(left, col, sym);
        want_int(right, col, sym);
      }
      left = left.alu(op, {right});
    }
    return left;
  }
  UOp bit_or() {
    return bitwise("|", Op::Or, [&] { return bit_xor(); });
  }
  UOp bit_xor() {
    return bitwise("^", Op::Xor, [&] { return bit_and(); });
  }
  UOp bit_and() {
    return bitwise("&", Op::And, [&] { return shift(); });
  }

  // A left-associative level of two integer operators: `combine(first, left, right)` applies
  // operator a (first) or b.
  template <class Next, class Combine>
  UOp int_level(std::string_view a, std::string_view b, Next next_level, Combine combine) {
    UOp left = next_level();
    while (is_op(a) || is_op(b)) {
      const Tok op = next();
      UOp right = next_level();
      want_int(left, op.col, op.text);
      want_int(right, op.col, op.text);
      left = combine(op.text == a, left, right);
    }
    return left;
  }
  UOp shift() {
    return int_level(
        "<<", ">>", [&] { return arith(); },
        [](bool shl, const UOp& l, const UOp& r) { return shl ? (l << r) : (l >> r); });
  }
  UOp arith() {
    return int_level(
        "+", "-", [&] { return term(); },
        [](bool add, const UOp& l, const UOp& r) { return add ? l + r : l - r; });
  }

  UOp term() {
    UOp left = factor();
    while (is_op("*") || is_op("//") || is_op("%")) {
      const Tok op = next();
      UOp right = factor();
      if (op.text == "*" && is_bool(left) && is_bool(right)) {  // True*True == 1: the same as &
        left = left & right;
        continue;
      }
      want_int(left, op.col, op.text);
      want_int(right, op.col, op.text);
      if (op.text == "*")
        left = left * right;
      else if (op.text == "//")
        left = left.floordiv(right);
      else
        left = left.floormod(right);
    }
    return left;
  }

  UOp factor() {
    if (is_op("-") || is_op("+")) {
      const Tok op = next();
      Depth d(*this, op.col);
      UOp x = factor();
      want_int(x, op.col, op.text);
      if (op.text == "+") return x;
      if (x.is_const()) return x.const_like(-x.arg().as_int());  // a negative literal
      return -x;
    }
    return atom();
  }

  UOp atom() {
    const Tok t = next();
    switch (t.kind) {
      case Tok::Int:
        return UOp::cint(t.value);
      case Tok::Name: {
        if (t.text == "True" || t.text == "False") return UOp::cbool(t.text == "True");
        if (t.text == "max" || t.text == "min") {
          Depth d(*this, t.col);
          expect("(");
          UOp a = conditional();
          expect(",");
          UOp b = conditional();
          expect(")");
          want_int(a, t.col, t.text);
          want_int(b, t.col, t.text);
          return t.text == "max" ? a.maximum(b) : a.minimum(b);
        }
        if (is_op("(")) fail(t.col, fmt::format("unknown function '{}'", t.text));
        auto it = vars_.find(t.text);
        if (it == vars_.end())
          fail(t.col, fmt::format("unknown variable '{}' (declare it with --var {}=LO..HI)", t.text,
                                  t.text));
        return it->second;
      }
      case Tok::Op:
        if (t.text == "(") {
          Depth d(*this, t.col);
          UOp e = conditional();
          expect(")");
          return e;
        }
        fail(t.col, fmt::format("unexpected '{}'", t.text));
      case Tok::End:
        fail(t.col, "unexpected end of input");
    }
    fail(t.col, "unexpected input");
  }

  std::string_view s_;
  const PyVars& vars_;
  std::vector<Tok> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

std::optional<UOp> parse_python_expr(std::string_view text, const PyVars& vars,
                                     PyParseError& error) {
  try {
    return Parser(text, vars).parse();
  } catch (const Fail& f) {
    error = f.err;
    return std::nullopt;
  }
}

}  // namespace tinyrw
