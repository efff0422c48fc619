#include "dsl/parse.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "RWLexer.h"
#include "RWParser.h"
#include "antlr4-runtime.h"

namespace tinyrw::rw {

namespace {

using P = RWParser;

// ---- byte-level validation
// --------------------------------------------------------------------------

// Checks what the ANTLR runtime cannot report well (or would crash on): invalid UTF-8, NUL
// bytes, unterminated strings and comments, and nesting beyond kMaxNesting.
// Length of the valid UTF-8 sequence at t[i] (strict: no overlong forms, surrogates or code
// points past U+10FFFF), or 0 when the bytes there are not valid UTF-8.
size_t utf8_length(const std::string& t, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(t[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  const size_t n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (n == 0 || i + n > t.size()) return 0;
  uint32_t cp = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

bool prescan(const SourceFile& src, Diagnostics& diags) {
  const std::string& t = src.text;
  if (t.size() > kMaxSourceBytes) {
    diags.error(Loc{&src, 1, 1},
                fmt::format("file larger than {} bytes (the source size limit)", kMaxSourceBytes));
    return false;
  }
  {  // the whole text must be UTF-8 (comments included: the ANTLR runtime decodes everything)
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < t.size();) {
      if (t[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
      const size_t n = utf8_length(t, i);
      if (n == 0) {
        diags.error(Loc{&src, line, static_cast<int>(i - line_start) + 1},
                    fmt::format("invalid UTF-8 byte 0x{:02x}", static_cast<unsigned char>(t[i])));
        return false;
      }
      i += n;
    }
  }
  int line = 1;
  size_t line_start = 0;
  auto loc_at = [&](size_t i) { return Loc{&src, line, static_cast<int>(i - line_start) + 1}; };
  std::vector<std::pair<char, Loc>> open;
  for (size_t i = 0; i < t.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(t[i]);
    if (c == '\n') {
      ++line;
      line_start = i + 1;
      continue;
    }
    if (c == 0) {
      diags.error(loc_at(i), "NUL byte in source");
      return false;
    }
    if (c >= 0x80) {  // a valid multi-byte sequence (checked above): skip it
      i += utf8_length(t, i) - 1;
      continue;
    }
    if (c == '#') {
      while (i + 1 < t.size() && t[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < t.size() && t[i + 1] == '*') {
      const size_t end = t.find("*/", i + 2);
      if (end == std::string::npos) {
        diags.error(loc_at(i), "unterminated comment: '/*' without '*/'");
        return false;
      }
      for (size_t k = i; k < end; ++k) {
        if (t[k] == '\n') {
          ++line;
          line_start = k + 1;
        }
      }
      i = end + 1;
      continue;
    }
    if (c == '"') {
      const Loc start = loc_at(i);
      size_t k = i + 1;
      while (k < t.size() && t[k] != '"' && t[k] != '\n') k += t[k] == '\\' ? 2 : 1;
      if (k >= t.size() || t[k] != '"') {
        diags.error(start, "unterminated string");
        return false;
      }
      i = k;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') {
      open.emplace_back(static_cast<char>(c), loc_at(i));
      if (static_cast<int>(open.size()) > kMaxNesting) {
        diags.error(
            loc_at(i),
            fmt::format("nesting deeper than {} levels (the bracket nesting limit)", kMaxNesting));
        return false;
      }
    } else if (c == ')' || c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();  // mismatches are reported by the parser
    }
  }
  return true;
}

// ---- ANTLR errors
// -----------------------------------------------------------------------------------

class ErrorCollector : public antlr4::BaseErrorListener {
 public:
  ErrorCollector(const SourceFile& src, Diagnostics& diags) : src_(src), diags_(diags) {}
  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token* offending, size_t line,
                   size_t col, const std::string& msg, std::exception_ptr) override {
    if (++count_ > 10) return;  // the first errors are the useful ones
    std::string m = msg;
    for (const char* from : {"<EOF>"}) {
      for (size_t p = m.find(from); p != std::string::npos; p = m.find(from))
        m.replace(p, 5, "end of file");
    }
    if (split_call(recognizer, offending))
      m += " (a call's '(' stands on the line of its name: this '(' starts a new rule)";
    else if (stray_if(recognizer, offending))
      m += " (an 'if' after a rule's result starts a conditional 'a if c else b', which needs "
           "its 'else')";
    diags_.error(Loc{&src_, static_cast<int>(line), static_cast<int>(col) + 1},
                 "syntax error: " + m);
  }
  int count() const { return count_; }

 private:
  // A '(' that opens a line right after a name or a member: most likely a call split before it.
  static bool split_call(antlr4::Recognizer* recognizer, antlr4::Token* offending) {
    auto* parser = dynamic_cast<antlr4::Parser*>(recognizer);
    if (!parser || !offending || offending->getText() != "(" || offending->getTokenIndex() == 0)
      return false;
    antlr4::Token* prev = parser->getTokenStream()->get(offending->getTokenIndex() - 1);
    return prev->getType() == RWParser::ID && prev->getLine() < offending->getLine();
  }
  // An `if` where no guard can stand, after an expression: most likely a conditional without its
  // `else` (a guard's `if` comes before the `=>`).
  static bool stray_if(antlr4::Recognizer* recognizer, antlr4::Token* offending) {
    auto* parser = dynamic_cast<antlr4::Parser*>(recognizer);
    if (!parser || !offending || offending->getText() != "if" || offending->getTokenIndex() == 0)
      return false;
    const std::string prev =
        parser->getTokenStream()->get(offending->getTokenIndex() - 1)->getText();
    return prev != "{" && prev != "}";
  }

  const SourceFile& src_;
  Diagnostics& diags_;
  int count_ = 0;
};

// ---- parse tree -> syntax tree
// ----------------------------------------------------------------------

class Builder {
 public:
  Builder(const SourceFile& src, Diagnostics& diags) : src_(src), diags_(diags) {}

  std::unique_ptr<FileAst> file(P::FileContext* ctx) {
    auto out = std::make_unique<FileAst>();
    out->source = &src_;
    for (auto* d : ctx->decl()) out->decls.push_back(decl(d));
    if (too_deep_) return nullptr;
    return out;
  }

 private:
  Loc loc(antlr4::ParserRuleContext* ctx) const { return loc(ctx->getStart()); }
  Loc loc(antlr4::Token* t) const {
    return Loc{&src_, static_cast<int>(t->getLine()),
               static_cast<int>(t->getCharPositionInLine()) + 1};
  }
  Loc loc(antlr4::tree::TerminalNode* n) const { return loc(n->getSymbol()); }

  int check_depth(int depth, const Loc& at) {
    if (depth > kMaxTreeDepth && !too_deep_) {
      too_deep_ = true;
      diags_.error(
          at,
          fmt::format("pattern or expression nested deeper than {} levels (the tree depth limit)",
                      kMaxTreeDepth));
    }
    return depth;
  }

  // A rule written over several lines, as one line (statistics, VIZ and dumps show one line):
  // each line break and the indentation after it become one space.
  static std::string one_line(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\n' && s[i] != '\r') {
        out += s[i];
        continue;
      }
      while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
      while (i + 1 < s.size() && std::isspace(static_cast<unsigned char>(s[i + 1]))) ++i;
      out += ' ';
    }
    return out;
  }

  static std::string unquote(const std::string& s) {
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      if (s[i] == '\\' && i + 2 < s.size()) {
        const char e = s[++i];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        out += s[i];
      }
    }
    return out;
  }

  Arg literal(P::LiteralContext* ctx) {
    const std::string text = ctx->getText();
    if (ctx->INT()) {
      try {
        const bool hex = text.size() > 2 && text[1] == 'x';
        i128 v = 0;
        for (size_t i = hex ? 2 : 0; i < text.size(); ++i) {
          const int d = std::isdigit(static_cast<unsigned char>(text[i]))
                            ? text[i] - '0'
                            : (std::tolower(text[i]) - 'a' + 10);
          v = v * (hex ? 16 : 10) + d;
          if (v > (static_cast<i128>(1) << 100)) throw std::out_of_range("int");
        }
        return Arg::integer(v);
      } catch (const std::out_of_range&) {
        diags_.error(loc(ctx), "integer literal too large: " + text.substr(0, 40));
        return Arg::integer(0);
      }
    }
    if (ctx->FLOAT()) return Arg::real(std::strtod(text.c_str(), nullptr));
    if (ctx->STRING()) return Arg::string(unquote(text));
    if (text == "True") return Arg::boolean(true);
    if (text == "False") return Arg::boolean(false);
    if (text == "inf") return Arg::real(INFINITY);
    if (text == "nan") return Arg::real(NAN);
    return Arg();  // none
  }

  Arg negate(const Arg& a, const Loc& at) {
    if (a.is_int()) return Arg::integer(-a.as_int());
    if (a.is_float()) return Arg::real(-a.as_float());
    diags_.error(at, "only numbers can be negated");
    return a;
  }

  // ---- declarations
  Decl decl(P::DeclContext* ctx) {
    Decl d;
    d.loc = loc(ctx);
    if (auto* c = dynamic_cast<P::IncludeDeclContext*>(ctx)) {
      d.kind = Decl::Kind::Include;
      d.name = unquote(c->STRING()->getText());
    } else if (auto* c = dynamic_cast<P::OpgroupDeclContext*>(ctx)) {
      d.kind = Decl::Kind::OpGroup;
      auto ids = c->ID();
      d.name = ids[0]->getText();
      d.loc = loc(ids[0]);
      for (size_t i = 1; i < ids.size(); ++i) d.names.emplace_back(ids[i]->getText(), loc(ids[i]));
    } else if (auto* c = dynamic_cast<P::ExternDeclContext*>(ctx)) {
      // a declared helper's signature
      auto* f = c->externFn();
      d.kind = Decl::Kind::Extern;
      auto ids = f->ID();
      d.name = ids[0]->getText();
      d.loc = loc(ids[0]);
      for (auto* p : f->externParam()) {
        d.fn.param_names.push_back(p->ID(0)->getText());
        d.fn.params.emplace_back(p->ID(1)->getText(), loc(p->ID(1)));
      }
      d.fn.result = ids[1]->getText();
      d.fn.result_loc = loc(ids[1]);
    } else if (auto* c = dynamic_cast<P::RulesetComposeContext*>(ctx)) {
      d.kind = Decl::Kind::Compose;
      auto ids = c->ID();
      d.name = ids[0]->getText();
      d.loc = loc(ids[0]);
      for (size_t i = 1; i < ids.size(); ++i) d.names.emplace_back(ids[i]->getText(), loc(ids[i]));
    } else if (auto* c = dynamic_cast<P::DefDeclarationContext*>(ctx)) {
      d.kind = Decl::Kind::Def;
      d.name = c->defDecl()->ID()->getText();
      d.loc = loc(c->defDecl()->ID());
      for (auto* p : c->defDecl()->defParam()) {
        d.names.emplace_back(p->ID(0)->getText(), loc(p->ID(0)));
        if (p->type)
          d.param_types.emplace_back(p->type->getText(), loc(p->type));
        else
          d.param_types.emplace_back("", loc(p->ID(0)));
      }
      d.body = expr(c->defDecl()->expr());
    } else {
      d.kind = Decl::Kind::RuleSet;
      std::vector<P::MemberContext*> members;
      antlr4::tree::TerminalNode* id = nullptr;
      if (auto* c = dynamic_cast<P::RulesetBlockContext*>(ctx)) {
        d.set_kind = SetKind::Rules, id = c->ID(), members = c->member();
      } else if (auto* c = dynamic_cast<P::GradientBlockContext*>(ctx)) {
        d.set_kind = SetKind::Gradient, id = c->ID(), members = c->member();
      } else if (auto* c = dynamic_cast<P::VerifierBlockContext*>(ctx)) {
        d.set_kind = SetKind::Verifier, id = c->ID(), members = c->member();
      }
      if (id) {
        d.name = id->getText();
        d.loc = loc(id);
      }
      for (auto* m : members) d.members.push_back(member(m));
    }
    return d;
  }

  Member member(P::MemberContext* ctx) {
    Member m;
    m.loc = loc(ctx);
    if (auto* c = dynamic_cast<P::RuleMemberContext*>(ctx)) {
      m.kind = Member::Kind::Rule;
      if (c->ruleName) {
        m.name = c->ruleName->getText();
        m.name_loc = loc(c->ruleName);
      }
      m.pattern = pattern(c->pattern());
      for (auto* cl : c->clause()) {
        Clause out;
        out.loc = loc(cl);
        if (auto* g = dynamic_cast<P::GuardClauseContext*>(cl)) {
          out.kind = Clause::Kind::Guard;
          out.expr = expr(g->expr());
        } else if (auto* l = dynamic_cast<P::LetClauseContext*>(cl)) {
          out.kind = Clause::Kind::Let;
          out.name = l->ID()->getText();
          out.expr = expr(l->expr());
        } else if (auto* r = dynamic_cast<P::RequireClauseContext*>(cl)) {
          out.kind = Clause::Kind::Require;
          out.expr = expr(r->requireCall()->expr());
          out.name = unquote(r->requireCall()->STRING()->getText());  // the reason
          out.why_loc = loc(r->requireCall()->STRING());
        }
        m.clauses.push_back(std::move(out));
      }
      m.result = expr(c->expr());
      // the text from the pattern on (a rule's name is shown apart)
      antlr4::Token* first = c->pattern()->getStart();
      m.text = first->getInputStream()->getText(
          antlr4::misc::Interval(first->getStartIndex(), c->getStop()->getStopIndex()));
      m.text = one_line(m.text);
    } else if (auto* c = dynamic_cast<P::UseMemberContext*>(ctx)) {
      m.kind = Member::Kind::Use;
      m.use = c->ID()->getText();
      m.loc = loc(c->ID());
    } else if (auto* c = dynamic_cast<P::ForMemberContext*>(ctx)) {
      m.kind = Member::Kind::For;
      auto ids = c->ID();
      m.for_var = ids[0]->getText();
      for (size_t i = 1; i < ids.size(); ++i)
        m.for_values.emplace_back(ids[i]->getText(), loc(ids[i]));
      for (auto* b : c->member()) m.body.push_back(member(b));
    }
    return m;
  }

  // ---- patterns
  PatternPtr pattern(P::PatternContext* ctx) {
    auto p = std::make_unique<Pattern>();
    p->loc = loc(ctx);
    int depth = 1;
    for (auto* alt : ctx->alternative()) {
      // `x: Const` reads like a rule name (which only starts a rule): capture chains are written
      // without a space after ':'
      for (size_t i = 0; i + 1 < alt->children.size(); ++i) {
        auto* colon = dynamic_cast<antlr4::tree::TerminalNode*>(alt->children[i]);
        if (!colon || colon->getText() != ":") continue;
        auto* next = dynamic_cast<antlr4::ParserRuleContext*>(alt->children[i + 1]);
        if (next && next->getStart()->getStartIndex() > colon->getSymbol()->getStopIndex() + 1) {
          diags_.warning(loc(colon),
                         "write a capture chain without a space after ':' (x:Const); "
                         "'name: ' names a rule only at the start of a rule");
        }
      }
      std::vector<Constraint> chain;
      for (auto* c : alt->constraint()) chain.push_back(constraint(c, depth));
      p->alternatives.push_back(std::move(chain));
    }
    p->depth = check_depth(depth, p->loc);
    return p;
  }

  Constraint constraint(P::ConstraintContext* ctx, int& depth) {
    Constraint c;
    c.loc = loc(ctx);
    if (auto* o = dynamic_cast<P::OpConstraintContext*>(ctx)) {
      c.kind = Constraint::Kind::Op;
      for (auto* id : o->opHead()->ID()) c.names.push_back(id->getText());
      c.optional = o->opHead()->optional != nullptr;
      std::vector<P::SourceContext*> srcs;
      if (o->sources()) {
        c.has_sources = true;
        srcs = o->sources()->source();
      } else if (o->commSources()) {
        c.has_sources = true;
        c.commutative = true;
        srcs = o->commSources()->source();
      }
      for (auto* s : srcs) {
        Constraint::Source src;
        src.loc = loc(s);
        if (auto* ps = dynamic_cast<P::PatternSourceContext*>(s)) {
          src.pattern = pattern(ps->pattern());
          src.repeat = ps->repeat != nullptr;
          depth = std::max(depth, src.pattern->depth + 1);
        }
        c.sources.push_back(std::move(src));
      }
      if (o->argMatch()) c.arg = std::make_unique<ArgPat>(arg_pattern(o->argMatch()->argPattern()));
    } else if (auto* g = dynamic_cast<P::GroupConstraintContext*>(ctx)) {
      c.kind = Constraint::Kind::Group;
      c.group = pattern(g->pattern());
      depth = std::max(depth, c.group->depth + 1);
    } else if (auto* l = dynamic_cast<P::LiteralConstraintContext*>(ctx)) {
      c.kind = Constraint::Kind::Literal;
      c.literal = l->neg ? negate(literal(l->literal()), c.loc) : literal(l->literal());
    } else {
      c.kind = Constraint::Kind::Wildcard;
    }
    return c;
  }

  ArgPat arg_pattern(P::ArgPatternContext* ctx) {
    ArgPat a;
    a.loc = loc(ctx);
    if (auto* l = dynamic_cast<P::LiteralArgContext*>(ctx)) {
      a.kind = ArgPat::Kind::Literal;
      a.literal = l->neg ? negate(literal(l->literal()), a.loc) : literal(l->literal());
    } else if (auto* n = dynamic_cast<P::NameArgContext*>(ctx)) {
      a.kind = ArgPat::Kind::Name;
      a.name = n->ID()->getText();
    } else if (auto* t = dynamic_cast<P::TupleArgContext*>(ctx)) {
      a.kind = ArgPat::Kind::Tuple;
      for (auto* item : t->argPattern()) a.items.push_back(arg_pattern(item));
    } else {
      a.kind = ArgPat::Kind::Any;
    }
    return a;
  }

  // ---- expressions
  ExprPtr make(ExprKind k, const Loc& at) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->loc = at;
    return e;
  }
  ExprPtr with_kids(ExprPtr e) {
    int d = 0;
    for (const auto& k : e->kids) d = std::max(d, k->depth);
    e->depth = check_depth(d + 1, e->loc);
    return e;
  }
  ExprPtr binary(ExprPtr l, const std::string& op, ExprPtr r, const Loc& at) {
    auto e = make(ExprKind::Binary, at);
    e->op = op;
    e->kids.push_back(std::move(l));
    e->kids.push_back(std::move(r));
    return with_kids(std::move(e));
  }

  // A left-associative chain: operand (op operand)*, where ops are tokens or op contexts.
  template <class Operand>
  ExprPtr chain(antlr4::ParserRuleContext* ctx, Operand operand) {
    ExprPtr acc;
    std::string pending;
    Loc pending_loc;
    for (auto* child : ctx->children) {
      auto* rule = dynamic_cast<antlr4::ParserRuleContext*>(child);
      const bool is_operand = rule && rule->getRuleIndex() != P::RuleCompareOp &&
                              rule->getRuleIndex() != P::RuleShiftOp &&
                              rule->getRuleIndex() != P::RuleAddOp &&
                              rule->getRuleIndex() != P::RuleMulOp;
      if (!is_operand) {
        pending = child->getText();
        if (pending == "notin") pending = "not in";  // the tokens of `not in`, joined
        pending_loc = rule ? loc(rule) : loc(static_cast<antlr4::tree::TerminalNode*>(child));
        continue;
      }
      ExprPtr next = operand(rule);
      acc = acc ? binary(std::move(acc), pending, std::move(next), pending_loc) : std::move(next);
      if (too_deep_) break;  // the file is rejected: build no deeper tree than the limit
    }
    return acc;
  }

  // x0 if c1 else x1 if c2 else x2 ... is x0 if c1 else (x1 if c2 else (...)): built from the
  // right, one Cond node (then, cond, else) per `if`, located at its `if`.
  ExprPtr expr(P::ExprContext* ctx) {
    const std::vector<P::OrExprContext*> parts = ctx->orExpr();
    std::vector<Loc> ifs;
    for (auto* child : ctx->children) {
      auto* t = dynamic_cast<antlr4::tree::TerminalNode*>(child);
      if (t && t->getText() == "if") ifs.push_back(loc(t));
    }
    ExprPtr acc = or_expr(parts.back());
    for (size_t i = ifs.size(); i-- > 0 && !too_deep_;) {
      auto e = make(ExprKind::Cond, ifs[i]);
      e->kids.push_back(or_expr(parts[2 * i]));
      e->kids.push_back(or_expr(parts[2 * i + 1]));
      e->kids.push_back(std::move(acc));
      acc = with_kids(std::move(e));
    }
    return acc;
  }
  ExprPtr or_expr(P::OrExprContext* ctx) {
    return chain(ctx, [&](auto* c) { return and_expr(static_cast<P::AndExprContext*>(c)); });
  }
  ExprPtr and_expr(P::AndExprContext* ctx) {
    return chain(ctx, [&](auto* c) { return not_expr(static_cast<P::NotExprContext*>(c)); });
  }
  ExprPtr not_expr(P::NotExprContext* ctx) {
    ExprPtr e = compare(ctx->compareExpr());
    for (size_t i = 0; i < ctx->bang.size(); ++i) {
      auto u = make(ExprKind::Unary, loc(ctx));
      u->op = "!";
      u->kids.push_back(std::move(e));
      e = with_kids(std::move(u));
      if (too_deep_) break;
    }
    return e;
  }
  ExprPtr compare(P::CompareExprContext* ctx) {
    return chain(ctx, [&](auto* c) { return bit_or(static_cast<P::BitOrExprContext*>(c)); });
  }
  ExprPtr bit_or(P::BitOrExprContext* ctx) {
    return chain(ctx, [&](auto* c) { return bit_xor(static_cast<P::BitXorExprContext*>(c)); });
  }
  ExprPtr bit_xor(P::BitXorExprContext* ctx) {
    return chain(ctx, [&](auto* c) { return bit_and(static_cast<P::BitAndExprContext*>(c)); });
  }
  ExprPtr bit_and(P::BitAndExprContext* ctx) {
    return chain(ctx, [&](auto* c) { return shift(static_cast<P::ShiftExprContext*>(c)); });
  }
  ExprPtr shift(P::ShiftExprContext* ctx) {
    return chain(ctx, [&](auto* c) { return add(static_cast<P::AddExprContext*>(c)); });
  }
  ExprPtr add(P::AddExprContext* ctx) {
    return chain(ctx, [&](auto* c) { return mul(static_cast<P::MulExprContext*>(c)); });
  }
  ExprPtr mul(P::MulExprContext* ctx) {
    return chain(ctx, [&](auto* c) { return unary(static_cast<P::UnaryExprContext*>(c)); });
  }
  ExprPtr unary(P::UnaryExprContext* ctx) {
    ExprPtr e = postfix(ctx->postfixExpr());
    auto ops = ctx->unaryOp();
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      auto u = make(ExprKind::Unary, loc(*it));
      u->op = (*it)->getText();
      u->kids.push_back(std::move(e));
      e = with_kids(std::move(u));
      if (too_deep_) break;
    }
    return e;
  }
  void call_args(Expr& e, P::CallArgsContext* args) {
    e.is_call = true;
    if (!args->compClause().empty()) {  // f(x for x in t): one generator argument
      e.arg_names.push_back("");
      e.kids.push_back(comprehension(args->expr(), args->compClause(), loc(args)));
      e.kids.back()->generator = true;
      return;
    }
    for (auto* a : args->callArg()) {
      e.arg_names.push_back(a->ID() ? a->ID()->getText() : "");
      e.kids.push_back(expr(a->expr()));
    }
  }
  ExprPtr postfix(P::PostfixExprContext* ctx) {
    ExprPtr e = primary(ctx->primaryExpr());
    for (auto* op : ctx->postfixOp()) {
      if (auto* m = dynamic_cast<P::MemberOpContext*>(op)) {
        auto out = make(ExprKind::Member, loc(m->ID()));
        out->name = m->ID()->getText();
        out->kids.push_back(std::move(e));
        out->arg_names.push_back("");
        if (m->callArgs()) call_args(*out, m->callArgs());
        e = with_kids(std::move(out));
      } else if (auto* sl = dynamic_cast<P::SliceOpContext*>(op)) {
        auto out = make(ExprKind::Slice, loc(sl));
        out->kids.push_back(std::move(e));
        for (P::ExprContext* bound : {sl->lo, sl->hi, sl->step}) {
          if (bound) {
            out->kids.push_back(expr(bound));
          } else {
            out->kids.push_back(make(ExprKind::Literal, loc(sl)));  // none: the default
          }
        }
        e = with_kids(std::move(out));
      } else if (auto* ix = dynamic_cast<P::IndexOpContext*>(op)) {
        auto out = make(ExprKind::Index, loc(ix));
        out->kids.push_back(std::move(e));
        out->kids.push_back(expr(ix->expr()));
        e = with_kids(std::move(out));
      }
      if (too_deep_) break;
    }
    return e;
  }
  ExprPtr primary(P::PrimaryExprContext* ctx) {
    if (auto* l = dynamic_cast<P::LiteralExprContext*>(ctx)) {
      auto e = make(ExprKind::Literal, loc(ctx));
      e->literal = literal(l->literal());
      return e;
    }
    if (auto* n = dynamic_cast<P::NameExprContext*>(ctx)) {
      auto e = make(n->callArgs() ? ExprKind::Call : ExprKind::Name, loc(ctx));
      e->name = n->ID()->getText();
      if (n->callArgs()) call_args(*e, n->callArgs());
      return with_kids(std::move(e));
    }
    if (auto* r = dynamic_cast<P::RequireExprContext*>(ctx)) {
      // require(cond, "why") as a result: a call the checker accepts only as a whole result
      auto e = make(ExprKind::Call, loc(ctx));
      e->name = "require";
      e->is_call = true;
      e->kids.push_back(expr(r->requireCall()->expr()));
      auto why = make(ExprKind::Literal, loc(r->requireCall()->STRING()));
      why->literal = Arg::string(unquote(r->requireCall()->STRING()->getText()));
      e->kids.push_back(std::move(why));
      e->arg_names = {"", ""};
      return with_kids(std::move(e));
    }
    if (auto* p = dynamic_cast<P::ParenExprContext*>(ctx)) return expr(p->expr());
    if (auto* c = dynamic_cast<P::ListCompExprContext*>(ctx))
      return comprehension(c->expr(), c->compClause(), loc(ctx));
    if (auto* c = dynamic_cast<P::GenExprContext*>(ctx))
      return comprehension(c->expr(), c->compClause(), loc(ctx));
    auto e = make(ExprKind::Tuple, loc(ctx));
    if (auto* t = dynamic_cast<P::TupleExprContext*>(ctx)) {
      for (auto* item : t->expr()) e->kids.push_back(expr(item));
    } else if (auto* l = dynamic_cast<P::ListExprContext*>(ctx)) {
      for (auto* item : l->expr()) e->kids.push_back(expr(item));
    }
    return with_kids(std::move(e));
  }

  // ---- comprehensions
  // Each clause adds a level to the tree depth: the executors nest one loop per clause.
  ExprPtr comprehension(P::ExprContext* element, const std::vector<P::CompClauseContext*>& clauses,
                        const Loc& at) {
    auto e = make(ExprKind::Comp, at);
    e->kids.push_back(expr(element));
    for (auto* c : clauses) {
      CompClause cc;
      cc.loc = loc(c);
      if (auto* f = dynamic_cast<P::CompForContext*>(c)) {
        cc.target = target(f->target());
        e->kids.push_back(or_expr(f->orExpr()));
      } else if (auto* i = dynamic_cast<P::CompIfContext*>(c)) {
        cc.is_if = true;
        e->kids.push_back(or_expr(i->orExpr()));
      }
      e->comp.push_back(std::move(cc));
    }
    e = with_kids(std::move(e));
    e->depth = check_depth(e->depth + static_cast<int>(clauses.size()), at);
    return e;
  }
  // `a`, `_`, `a, (b, _)`: nested as deep as the brackets allow.
  Target target(P::TargetContext* ctx) {
    auto items = ctx->targetItem();
    if (items.size() == 1) return target_item(items[0]);
    Target t;
    t.kind = Target::Kind::Tuple;
    t.loc = loc(ctx);
    for (auto* item : items) t.items.push_back(target_item(item));
    return t;
  }
  Target target_item(P::TargetItemContext* ctx) {
    Target t;
    t.loc = loc(ctx);
    if (auto* n = dynamic_cast<P::NameTargetContext*>(ctx)) {
      t.name = n->ID()->getText();
    } else if (auto* tt = dynamic_cast<P::TupleTargetContext*>(ctx)) {
      Target inner = target(tt->target());
      if (!tt->trailing || tt->target()->targetItem().size() > 1) return inner;
      t.kind = Target::Kind::Tuple;  // `(a,)`: a tuple of one
      t.items.push_back(std::move(inner));
    } else {
      t.kind = Target::Kind::Discard;
    }
    return t;
  }

  const SourceFile& src_;
  Diagnostics& diags_;
  bool too_deep_ = false;
};

}  // namespace

std::unique_ptr<FileAst> parse_file(const SourceFile& src, Diagnostics& diags) {
  if (!prescan(src, diags)) return nullptr;
  std::unique_ptr<antlr4::ANTLRInputStream> input_holder;
  try {
    input_holder = std::make_unique<antlr4::ANTLRInputStream>(src.text);
  } catch (const std::exception& e) {  // the runtime's own decoding: never let it escape
    diags.error(Loc{&src, 1, 1}, fmt::format("cannot decode the file: {}", e.what()));
    return nullptr;
  }
  antlr4::ANTLRInputStream& input = *input_holder;
  RWLexer lexer(&input);
  ErrorCollector errors(src, diags);
  lexer.removeErrorListeners();
  antlr4::CommonTokenStream tokens(&lexer);
  // Characters no token accepts arrive as UNKNOWN tokens; name the first one precisely rather
  // than letting the parser report a confusing mismatch.
  tokens.fill();
  for (antlr4::Token* t : tokens.getTokens()) {
    if (t->getType() == RWLexer::UNKNOWN) {
      diags.error(Loc{&src, static_cast<int>(t->getLine()),
                      static_cast<int>(t->getCharPositionInLine()) + 1},
                  fmt::format("unexpected character '{}'", t->getText()));
      return nullptr;
    }
  }
  RWParser parser(&tokens);
  parser.removeErrorListeners();
  parser.addErrorListener(&errors);
  P::FileContext* tree = parser.file();
  if (errors.count() > 0) return nullptr;
  const int before = diags.error_count();
  Builder builder(src, diags);
  auto out = builder.file(tree);
  if (diags.error_count() > before) return nullptr;
  return out;
}

namespace {

class Loader {
 public:
  Loader(Program& program, Diagnostics& diags) : program_(program), diags_(diags) {}

  bool load(const std::string& path, std::optional<std::string> text, const Loc& from) {
    std::error_code ec;
    std::filesystem::path canon = std::filesystem::weakly_canonical(path, ec);
    const std::string key = ec ? path : canon.string();
    for (size_t i = 0; i < in_progress_.size(); ++i) {
      if (in_progress_[i] != key) continue;
      std::string cycle;
      for (size_t k = i; k < in_progress_.size(); ++k) cycle += in_progress_[k] + " -> ";
      diags_.error(from, "include cycle: " + cycle + key);
      return false;
    }
    if (loaded_.count(key)) return true;
    if (!text) {
      std::ifstream in(path, std::ios::binary);
      if (!in || std::filesystem::is_directory(path, ec)) {
        diags_.error(from, fmt::format("cannot open '{}'", path));
        return false;
      }
      // Read one byte past the limit at most (a device such as /dev/zero never ends).
      text.emplace(kMaxSourceBytes + 1, '\0');
      in.read(text->data(), static_cast<std::streamsize>(text->size()));
      if (in.bad()) {
        diags_.error(from, fmt::format("cannot read '{}'", path));
        return false;
      }
      text->resize(static_cast<size_t>(in.gcount()));
    }
    auto file = std::make_unique<SourceFile>(SourceFile{path, std::move(*text)});
    const SourceFile* src = file.get();
    program_.files.push_back(std::move(file));
    loaded_.insert(key);
    auto ast = parse_file(*src, diags_);
    if (!ast) return false;
    in_progress_.push_back(key);
    bool ok = true;
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    for (const Decl& d : ast->decls) {
      if (d.kind != Decl::Kind::Include) continue;
      ok &= load((dir / d.name).string(), std::nullopt, d.loc);
    }
    in_progress_.pop_back();
    program_.asts.push_back(std::move(ast));
    return ok;
  }

 private:
  Program& program_;
  Diagnostics& diags_;
  std::vector<std::string> in_progress_;
  std::set<std::string> loaded_;
};

}  // namespace

bool load_program(const std::string& path, Program& program, Diagnostics& diags) {
  return Loader(program, diags).load(path, std::nullopt, Loc{nullptr, 0, 0});
}

bool load_program_text(const std::string& path, std::string text, Program& program,
                       Diagnostics& diags) {
  return Loader(program, diags).load(path, std::move(text), Loc{nullptr, 0, 0});
}

}  // namespace tinyrw::rw
