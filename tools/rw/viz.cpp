// rw viz: the VIZ viewer. Serves the bundled page (viewer/) on 127.0.0.1, writes it as one
// self-contained file, or prints the trace as text. The page and the text show the same things:
// groups and calls, each call's graph before the first match and after each match, the rules with
// their .rw locations and source, and a diff of the rendered graph (docs/viz-viewer.md).
#include "tools/rw/viz.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dsl/diagnostics.h"
#include "ir/axis.h"

namespace tinyrw {

namespace {

using nlohmann::json;

int usage(std::FILE* out, int status) {
  fmt::print(out,
             "usage: rw viz [--port N] DUMP.json          serve the viewer on http://127.0.0.1:N/ "
             "(default 8000; 0 picks a free port)\n"
             "       rw viz --html OUT.html DUMP.json     write a self-contained page\n"
             "       rw viz --text [--call N] DUMP.json   print the trace (with --call N: call N's "
             "graph at every step)\n"
             "DUMP.json is a VIZ trace: VIZ=1 (written to $VIZ_PATH, default viz.json) or rw "
             "simplify --viz FILE.\n");
  return status;
}

struct DumpError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Limits on what a dump may make `rw viz` do (docs/viz-format.md): the bytes it reads, how deep
// groups nest (each call prints its group path), how many nodes replaying one call's matches may
// add (--call), and how far the text indents.
constexpr size_t kMaxDumpBytes = size_t{256} << 20;
constexpr size_t kMaxGroupDepth = 256;
constexpr size_t kMaxReplayNodes = 1000000;
constexpr size_t kMaxIndentLevels = 64;

// ---- the dump

struct Node {
  std::string op, dtype, arg;
  std::optional<std::string> tag;
  std::vector<int> src;
  bool rebuilt = false;
};

struct Match {
  int before, after;
  std::string rule_name, rule_file, rule_source;
  int64_t rule_line;
  double ns;
};

struct Call {
  std::optional<int> group;
  std::string name, location, mode;
  int64_t depth;
  int root;
  std::optional<int> result;
  std::vector<Match> matches;
};

struct Group {
  std::string name;
  std::optional<int> parent;
  size_t depth = 0;  // 0 at top level
};

struct Dump {
  std::vector<Node> nodes;  // grows: nodes rebuilt while applying matches are appended
  size_t table_size = 0;
  std::vector<Group> groups;
  std::vector<Call> calls;
  size_t match_count = 0;
  std::unordered_map<std::string, int> intern;

  static std::string key(const Node& n, const std::vector<int>& src) {
    std::string k = n.op + '\0' + n.dtype + '\0' + n.arg + '\0' + (n.tag ? *n.tag : "\x01") + '\0';
    for (int s : src) k += std::to_string(s) + ',';
    return k;
  }

  // The node like `id` with sources `src`: the table's node of that structure, or a new one.
  int rebuild(int id, const std::vector<int>& src) {
    if (intern.empty()) {
      for (size_t i = 0; i < nodes.size(); ++i)
        intern.emplace(key(nodes[i], nodes[i].src), static_cast<int>(i));
    }
    std::string k = key(nodes[static_cast<size_t>(id)], src);
    if (auto it = intern.find(k); it != intern.end()) return it->second;
    if (nodes.size() - table_size >= kMaxReplayNodes) {
      throw DumpError(
          fmt::format("replaying the matches rebuilds more than {} nodes (the replay "
                      "limit of rw viz --call)",
                      kMaxReplayNodes));
    }
    Node n = nodes[static_cast<size_t>(id)];
    n.src = src;
    n.rebuilt = true;
    nodes.push_back(std::move(n));
    const int nid = static_cast<int>(nodes.size()) - 1;
    intern.emplace(std::move(k), nid);
    return nid;
  }

  std::vector<int> group_path(std::optional<int> g) const {
    std::vector<int> path;
    for (; g; g = groups[static_cast<size_t>(*g)].parent) path.push_back(*g);
    std::reverse(path.begin(), path.end());
    return path;
  }
};

std::string strip_json_prefix(std::string msg) {
  // "[json.exception.parse_error.101] parse error at ..." -> "parse error at ..."
  if (!msg.empty() && msg[0] == '[') {
    if (size_t p = msg.find("] "); p != std::string::npos) msg = msg.substr(p + 2);
  }
  return msg;
}

// A JSON value in an error message: scalars as written (cut to a few dozen characters), arrays and
// objects by kind only (dumping a deeply nested value would recurse once per level).
std::string short_json(const json& v) {
  if (v.is_array()) return fmt::format("an array of {} item(s)", v.size());
  if (v.is_object()) return "an object";
  std::string t = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (t.size() > 40) t = t.substr(0, 40) + "...";
  return t;
}

// Parses and checks a dump with the same rules and messages as the page (viewer/src/model.js),
// and checks everything the text output trusts before anything is allocated by it.
Dump load_dump(const std::string& text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    const size_t end = text.find_last_not_of(" \t\r\n");
    if (end == std::string::npos)
      throw DumpError("This VIZ dump cannot be read: the file is empty");
    const std::string msg = strip_json_prefix(e.what());
    // the error at the end of the text (a cut inside a string that ends in blanks and `]`) too
    const bool truncated = msg.find("end of input") != std::string::npos || e.byte > end + 1 ||
                           (text[end] != '}' && text[end] != ']');
    throw DumpError(
        "This VIZ dump cannot be read: it is not valid JSON (" + msg + ")" +
        (truncated ? ". The file looks truncated: was the traced program killed before VIZ wrote "
                     "the whole dump, or is the file still being written?"
                   : ""));
  }
  auto fail = [](const std::string& where, const std::string& what) -> void {
    throw DumpError("This VIZ dump is malformed: " + where + ": " + what);
  };
  auto is_int = [](const json& v) { return v.is_number_integer(); };
  auto str_field = [&](const json& o, const char* k, const std::string& w) -> std::string {
    if (!o.contains(k) || !o[k].is_string()) fail(w + "." + k, "is missing or not a string");
    return o[k].get<std::string>();
  };
  if (!doc.is_object()) fail("the document", "is not a JSON object");
  if (!doc.contains("format") || doc["format"] != "tinyrw-viz")
    fail("format", fmt::format("is {}, expected \"tinyrw-viz\" (is this a VIZ dump?)",
                               doc.contains("format") ? short_json(doc["format"]) : "undefined"));
  if (!doc.contains("version") || doc["version"] != 1)
    fail("version",
         fmt::format("is {}, this viewer reads version 1",
                     doc.contains("version") ? short_json(doc["version"]) : "undefined"));
  for (const char* k : {"nodes", "groups", "calls"})
    if (!doc.contains(k) || !doc[k].is_array()) fail(k, "is missing or not an array");

  Dump d;
  const json& nodes = doc["nodes"];
  const size_t nn = nodes.size();
  auto node_ref = [&](const std::string& where, const json& v) -> int {
    if (!is_int(v) || v.get<int64_t>() < 0 || v.get<int64_t>() >= static_cast<int64_t>(nn))
      fail(where, fmt::format("{} is not a node id (the dump has {} nodes)", short_json(v), nn));
    return v.get<int>();
  };
  d.nodes.reserve(nn);
  for (size_t i = 0; i < nn; ++i) {
    const json& n = nodes[i];
    const std::string w = fmt::format("nodes[{}]", i);
    if (!n.is_object()) fail(w, "is not an object");
    if (!n.contains("id") || n["id"] != i)
      fail(w + ".id", fmt::format("is {}, expected {}",
                                  n.contains("id") ? short_json(n["id"]) : "undefined", i));
    Node node;
    node.op = str_field(n, "op", w);
    node.dtype = str_field(n, "dtype", w);
    node.arg = str_field(n, "arg", w);
    if (n.contains("tag") && !n["tag"].is_null()) {
      if (!n["tag"].is_string()) fail(w + ".tag", "is not a string or null");
      node.tag = n["tag"].get<std::string>();
    }
    if (!n.contains("src") || !n["src"].is_array()) fail(w + ".src", "is missing or not an array");
    for (size_t j = 0; j < n["src"].size(); ++j) {
      const json& s = n["src"][j];
      if (!is_int(s) || s.get<int64_t>() < 0 || s.get<int64_t>() >= static_cast<int64_t>(i))
        fail(fmt::format("{}.src[{}]", w, j), short_json(s) + " is not the id of an earlier node");
      node.src.push_back(s.get<int>());
    }
    d.nodes.push_back(std::move(node));
  }
  d.table_size = nn;
  const json& groups = doc["groups"];
  for (size_t i = 0; i < groups.size(); ++i) {
    const json& g = groups[i];
    const std::string w = fmt::format("groups[{}]", i);
    if (!g.is_object()) fail(w, "is not an object");
    if (!g.contains("id") || g["id"] != i)
      fail(w + ".id", fmt::format("is {}, expected {}",
                                  g.contains("id") ? short_json(g["id"]) : "undefined", i));
    Group grp;
    grp.name = str_field(g, "name", w);
    const json p = g.contains("parent") ? g["parent"] : json();
    if (!p.is_null()) {
      if (!is_int(p) || p.get<int64_t>() < 0 || p.get<int64_t>() >= static_cast<int64_t>(i))
        fail(w + ".parent", short_json(p) + " is not null or the id of an earlier group");
      grp.parent = p.get<int>();
      grp.depth = d.groups[static_cast<size_t>(*grp.parent)].depth + 1;
      if (grp.depth >= kMaxGroupDepth)
        fail(w + ".parent", fmt::format("nests groups deeper than {} levels (the group nesting "
                                        "limit of rw viz)",
                                        kMaxGroupDepth));
    }
    d.groups.push_back(std::move(grp));
  }
  const json& calls = doc["calls"];
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const std::string w = fmt::format("calls[{}]", i);
    if (!c.is_object()) fail(w, "is not an object");
    if (!c.contains("id") || c["id"] != i)
      fail(w + ".id", fmt::format("is {}, expected {}",
                                  c.contains("id") ? short_json(c["id"]) : "undefined", i));
    Call call;
    const json g = c.contains("group") ? c["group"] : json();
    if (!g.is_null()) {
      if (!is_int(g) || g.get<int64_t>() < 0 ||
          g.get<int64_t>() >= static_cast<int64_t>(d.groups.size()))
        fail(w + ".group", fmt::format("{} is not null or a group id (the dump has {} groups)",
                                       short_json(g), d.groups.size()));
      call.group = g.get<int>();
    }
    call.name = str_field(c, "name", w);
    call.location = str_field(c, "location", w);
    call.mode = str_field(c, "mode", w);
    if (!c.contains("depth") || !is_int(c["depth"]) || c["depth"].get<int64_t>() < 0)
      fail(w + ".depth", "is not a non-negative integer");
    call.depth = c["depth"].get<int64_t>();
    // Calls are listed as they started, so a call is at most one deeper than the one before.
    const int64_t max_depth = d.calls.empty() ? 0 : d.calls.back().depth + 1;
    if (call.depth > max_depth)
      fail(w + ".depth", fmt::format("is {}, deeper than the calls before it allow (at most {})",
                                     call.depth, max_depth));
    call.root = node_ref(w + ".root", c.contains("root") ? c["root"] : json());
    if (c.contains("result") && !c["result"].is_null())
      call.result = node_ref(w + ".result", c["result"]);
    if (!c.contains("matches") || !c["matches"].is_array())
      fail(w + ".matches", "is missing or not an array");
    for (size_t j = 0; j < c["matches"].size(); ++j) {
      const json& m = c["matches"][j];
      const std::string mw = fmt::format("{}.matches[{}]", w, j);
      if (!m.is_object()) fail(mw, "is not an object");
      Match match;
      match.before = node_ref(mw + ".before", m.contains("before") ? m["before"] : json());
      match.after = node_ref(mw + ".after", m.contains("after") ? m["after"] : json());
      if (!m.contains("rule") || !m["rule"].is_object())
        fail(mw + ".rule", "is missing or not an object");
      const json& r = m["rule"];
      if (!r.contains("name") || !r["name"].is_string() || !r.contains("file") ||
          !r["file"].is_string() || !r.contains("source") || !r["source"].is_string() ||
          !r.contains("line") || !is_int(r["line"]))
        fail(mw + ".rule", "needs name, file, source (strings) and line (an integer)");
      match.rule_name = r["name"].get<std::string>();
      match.rule_file = r["file"].get<std::string>();
      match.rule_source = r["source"].get<std::string>();
      match.rule_line = r["line"].get<int64_t>();
      if (!m.contains("ns") || !m["ns"].is_number() || !(m["ns"].get<double>() >= 0) ||
          !std::isfinite(m["ns"].get<double>()))
        fail(mw + ".ns", "is missing or not a non-negative number");
      match.ns = m["ns"].get<double>();
      call.matches.push_back(std::move(match));
    }
    d.match_count += call.matches.size();
    d.calls.push_back(std::move(call));
  }
  return d;
}

// ---- the graph at a step: matches 0..k-1 applied (the same algorithm as the page)

int substitute(Dump& d, int root, const std::unordered_map<int, int>& map) {
  if (map.empty()) return root;
  struct Frame {
    int n, phase, r;
  };
  std::unordered_map<int, int> memo;
  std::unordered_set<int> active;
  std::vector<Frame> stack{{root, 0, -1}};
  auto done = [&](int n, int v) {
    memo[n] = v;
    active.erase(n);
    stack.pop_back();
  };
  auto value = [&](int s) {
    auto it = memo.find(s);
    return it == memo.end() ? s : it->second;
  };
  while (!stack.empty()) {
    Frame& f = stack.back();
    const int n = f.n;
    if (f.phase == 0) {
      if (memo.count(n) || active.count(n)) {
        stack.pop_back();
        continue;
      }
      active.insert(n);
      auto t = map.find(n);
      if (t != map.end() && t->second != n && !active.count(t->second)) {
        f.phase = 1;
        f.r = t->second;
        if (!memo.count(t->second)) stack.push_back({t->second, 0, -1});
        continue;
      }
      f.phase = 2;
      const std::vector<int> src = d.nodes[static_cast<size_t>(n)].src;
      for (size_t i = src.size(); i-- > 0;)
        if (!memo.count(src[i]) && !active.count(src[i])) stack.push_back({src[i], 0, -1});
      continue;
    }
    if (f.phase == 1) {
      done(n, value(f.r));
      continue;
    }
    const std::vector<int> src = d.nodes[static_cast<size_t>(n)].src;
    std::vector<int> ns(src.size());
    bool changed = false;
    for (size_t i = 0; i < src.size(); ++i) {
      ns[i] = value(src[i]);
      changed |= ns[i] != src[i];
    }
    const int r = changed ? d.rebuild(n, ns) : n;
    if (r != n && map.count(r) && !active.count(r)) {
      f.phase = 1;
      f.r = r;
      if (!memo.count(r)) stack.push_back({r, 0, -1});
      continue;
    }
    done(n, r);
  }
  return memo.at(root);
}

std::vector<int> toposort(const Dump& d, int root) {
  std::vector<int> order;
  std::unordered_set<int> seen{root};
  std::vector<std::pair<int, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    const auto& src = d.nodes[static_cast<size_t>(n)].src;
    if (i < src.size()) {
      const int s = src[i++];
      if (seen.insert(s).second) stack.emplace_back(s, 0);
      continue;
    }
    order.push_back(n);
    stack.pop_back();
  }
  return order;
}

// ---- renders (the same text as the page)

// tinygrad's UOp repr, one node a line; shared nodes are named xID.
std::vector<std::string> pretty_lines(const Dump& d, int root, size_t max_lines = 4000) {
  std::unordered_map<int, int> refs;
  std::vector<int> order{root};
  std::unordered_set<int> seen{root};
  for (size_t i = 0; i < order.size(); ++i) {
    for (int s : d.nodes[static_cast<size_t>(order[i])].src) {
      ++refs[s];
      if (seen.insert(s).second) order.push_back(s);
    }
  }
  struct Frame {
    int n;
    size_t depth;
    long i;
  };
  std::vector<std::string> lines;
  std::unordered_set<int> printed;
  std::vector<Frame> stack{{root, 0, -1}};
  auto finish = [&] {
    stack.pop_back();
    if (!stack.empty()) lines.back() += ',';
  };
  while (!stack.empty()) {
    if (lines.size() >= max_lines) {
      lines.push_back(fmt::format("... (render cut at {} lines)", max_lines));
      break;
    }
    Frame& f = stack.back();
    const Node& u = d.nodes[static_cast<size_t>(f.n)];
    if (f.i == -1) {
      const std::string ind(f.depth, ' ');
      if (printed.count(f.n)) {
        lines.push_back(fmt::format("{}x{}", ind, f.n));
        finish();
        continue;
      }
      printed.insert(f.n);
      const std::string name = refs[f.n] > 1 ? fmt::format("x{}:=", f.n) : "";
      const std::string tag = u.tag ? ", tag=" + *u.tag : "";
      lines.push_back(
          fmt::format("{}{}UOp(Ops.{}, {}, arg={}{}, src=(", ind, name, u.op, u.dtype, u.arg, tag));
      f.i = 0;
    }
    if (static_cast<size_t>(f.i) < u.src.size()) {
      const int s = u.src[static_cast<size_t>(f.i++)];
      const size_t depth = f.depth + 2;
      stack.push_back({s, depth, -1});
      continue;
    }
    lines.back() += "))";
    finish();
  }
  return lines;
}

struct BinSyntax {
  const char* sym;
  int prec;
};

const BinSyntax* binary_syntax(const std::string& op) {
  static const std::unordered_map<std::string, BinSyntax> table = {
      {"ADD", {"+", 11}},      {"SUB", {"-", 11}},  {"MUL", {"*", 12}},   {"FLOORDIV", {"//", 12}},
      {"FLOORMOD", {"%", 12}}, {"CMPLT", {"<", 6}}, {"CMPNE", {"!=", 6}}, {"CMPEQ", {"==", 6}},
      {"AND", {"&", 9}},       {"OR", {"|", 7}},    {"XOR", {"^", 8}},    {"SHL", {"<<", 10}},
      {"SHR", {">>", 10}}};
  auto it = table.find(op);
  return it == table.end() ? nullptr : &it->second;
}

std::string leaf_name(const std::string& arg) {
  size_t i = arg.size() > 0 && arg[0] == '(' ? 1 : 0;
  if (i >= arg.size() || arg[i] != '\'') return arg;
  std::string out;
  for (++i; i < arg.size() && arg[i] != '\''; ++i) {
    if (arg[i] == '\\' && i + 1 < arg.size()) ++i;
    out += arg[i];
  }
  return out;
}

// A RANGE's label from its arg's text, as ir/axis.cpp's range_label writes it: "(1, 2, 'REDUCE')"
// -> "R1_2" (a negative id as m<id>); nullopt for another form.
std::optional<std::string> range_label(const std::string& arg) {
  const size_t q = arg.find(", '");
  if (arg.size() < 2 || arg.front() != '(' || arg.back() != ')' || q == std::string::npos ||
      arg[arg.size() - 2] != '\'')
    return std::nullopt;
  const std::string type = arg.substr(q + 3, arg.size() - q - 5);
  std::optional<AxisType> t = axis_type_from_name(type);
  if (!t) return std::nullopt;
  const char letter = axis_info(*t).letter;
  std::string out(1, letter ? letter : 'p');
  std::string ids = arg.substr(1, q - 1);
  for (size_t b = 0; b <= ids.size();) {
    size_t e = ids.find(", ", b);
    if (e == std::string::npos) e = ids.size();
    std::string id = ids.substr(b, e - b);
    if (id.empty() || id.find_first_not_of("-0123456789") != std::string::npos) return std::nullopt;
    if (b) out += '_';
    out += id[0] == '-' ? "m" + id.substr(1) : id;
    b = e + 2;
  }
  return out;
}

// One line of Python syntax (as rw simplify prints); other ops as OP(src..., arg=...).
std::string expr_text(const Dump& d, int root, size_t max_len = 400) {
  std::unordered_map<int, int> prec_memo;
  std::function<int(int)> prec = [&](int n) -> int {
    if (auto it = prec_memo.find(n); it != prec_memo.end()) return it->second;
    const Node& u = d.nodes[static_cast<size_t>(n)];
    int p = 20;
    if (const BinSyntax* b = binary_syntax(u.op))
      p = b->prec;
    else if (u.op == "CONST")
      p = !u.arg.empty() && u.arg[0] == '-' ? 13 : 20;
    else if (u.op == "NEG")
      p = 13;
    else if (u.op == "BIND" && !u.src.empty()) {
      int b = u.src[0];  // a chain of BINDs can be as long as the dump: follow it in a loop
      while (d.nodes[static_cast<size_t>(b)].op == "BIND" &&
             !d.nodes[static_cast<size_t>(b)].src.empty())
        b = d.nodes[static_cast<size_t>(b)].src[0];
      p = prec(b);
    }
    prec_memo[n] = p;
    return p;
  };
  using Item = std::variant<std::string, std::pair<int, bool>>;
  std::vector<Item> stack;
  stack.emplace_back(
      std::pair<int, bool>{root, binary_syntax(d.nodes[static_cast<size_t>(root)].op) != nullptr});
  std::string out;
  while (!stack.empty()) {
    if (out.size() > max_len) return out.substr(0, max_len) + "…";
    Item item = std::move(stack.back());
    stack.pop_back();
    if (auto* s = std::get_if<std::string>(&item)) {
      out += *s;
      continue;
    }
    const auto [n, paren] = std::get<std::pair<int, bool>>(item);
    const Node& u = d.nodes[static_cast<size_t>(n)];
    if (paren) {
      stack.emplace_back(std::string(")"));
      stack.emplace_back(std::pair<int, bool>{n, false});
      stack.emplace_back(std::string("("));
      continue;
    }
    std::vector<Item> parts;
    auto child = [&](size_t i, bool p) { parts.emplace_back(std::pair<int, bool>{u.src[i], p}); };
    const char* neg = nullptr;
    if (u.op == "CMPNE" && u.src.size() == 2) {
      const Node& c = d.nodes[static_cast<size_t>(u.src[1])];
      const Node& a = d.nodes[static_cast<size_t>(u.src[0])];
      if (c.op == "CONST" && c.arg == "True" &&
          !(!a.src.empty() && d.nodes[static_cast<size_t>(a.src[0])].dtype == "dtypes.bool")) {
        neg = a.op == "CMPLT" ? ">=" : a.op == "CMPNE" ? "==" : a.op == "CMPEQ" ? "!=" : nullptr;
      }
    }
    const BinSyntax* b = binary_syntax(u.op);
    if (neg) {
      const Node& cmp = d.nodes[static_cast<size_t>(u.src[0])];
      parts.emplace_back(std::pair<int, bool>{cmp.src[0], prec(cmp.src[0]) <= 6});
      parts.emplace_back(std::string(neg));
      parts.emplace_back(std::pair<int, bool>{cmp.src[1], prec(cmp.src[1]) <= 6});
    } else if (b && u.src.size() == 2) {
      const int l = prec(u.src[0]), r = prec(u.src[1]);
      child(0, l < b->prec || (b->prec == 6 && l == 6));
      parts.emplace_back(std::string(b->sym));
      child(1, r <= b->prec);
    } else if (u.op == "CONST" && u.src.empty()) {
      parts.emplace_back(
          u.arg == "inf" || u.arg == "-inf" || u.arg == "nan" ? "float('" + u.arg + "')" : u.arg);
    } else if (u.op == "DEFINE_VAR" || u.op == "SPECIAL") {
      parts.emplace_back(leaf_name(u.arg));
    } else if (u.op == "RANGE" && range_label(u.arg)) {
      parts.emplace_back(*range_label(u.arg));
    } else if (u.op == "BIND" && !u.src.empty()) {
      child(0, false);
    } else if (u.op == "NEG" && u.src.size() == 1) {
      parts.emplace_back(std::string("-"));
      child(0, prec(u.src[0]) < 13);
    } else if (u.op == "WHERE" && u.src.size() == 3) {
      parts.emplace_back(std::string("("));
      child(1, false);
      parts.emplace_back(std::string(" if "));
      child(0, false);
      parts.emplace_back(std::string(" else "));
      child(2, false);
      parts.emplace_back(std::string(")"));
    } else {
      std::string fn = u.op;
      bool generic = true;
      if (u.src.size() == 2 && (u.op == "MAX" || u.op == "CDIV" || u.op == "CMOD")) {
        fn = u.op == "MAX" ? "max" : u.op == "CDIV" ? "cdiv" : "cmod";
        generic = false;
      } else if (u.op == "CAST" && u.src.size() == 1) {
        const std::string& t = u.dtype;
        const bool is_float = t.rfind("dtypes.float", 0) == 0 || t.rfind("dtypes.half", 0) == 0 ||
                              t.rfind("dtypes.double", 0) == 0 ||
                              t.rfind("dtypes.bfloat16", 0) == 0 || t.rfind("dtypes.fp8", 0) == 0;
        fn = t == "dtypes.bool" ? "bool" : is_float ? "float" : "int";
        generic = false;
      }
      parts.emplace_back(fn + "(");
      for (size_t i = 0; i < u.src.size(); ++i) {
        if (i) parts.emplace_back(std::string(", "));
        child(i, false);
      }
      if (generic && u.arg != "None")
        parts.emplace_back((u.src.empty() ? "" : ", ") + std::string("arg=") + u.arg);
      parts.emplace_back(std::string(")"));
    }
    for (size_t i = parts.size(); i-- > 0;) stack.push_back(std::move(parts[i]));
  }
  return out;
}

// ---- diff (Myers), as the page

struct DiffLine {
  char t;  // ' ', '-', '+'
  std::string s;
};

std::vector<DiffLine> diff_lines(const std::vector<std::string>& a,
                                 const std::vector<std::string>& b, long max_d = 3000) {
  const long n = static_cast<long>(a.size()), m = static_cast<long>(b.size());
  long lo = 0;
  while (lo < n && lo < m && a[lo] == b[lo]) ++lo;
  long ea = n, eb = m;
  while (ea > lo && eb > lo && a[ea - 1] == b[eb - 1]) --ea, --eb;
  std::vector<DiffLine> out;
  for (long i = 0; i < lo; ++i) out.push_back({' ', a[i]});
  const long N = ea - lo, M = eb - lo, max = N + M;
  auto A = [&](long i) -> const std::string& { return a[lo + i]; };
  auto B = [&](long i) -> const std::string& { return b[lo + i]; };
  std::vector<DiffLine> mid;
  auto replace_all = [&] {
    for (long i = 0; i < N; ++i) mid.push_back({'-', A(i)});
    for (long i = 0; i < M; ++i) mid.push_back({'+', B(i)});
  };
  if (N == 0 || M == 0) {
    replace_all();
  } else {
    const long off = max + 1;
    std::vector<long> v(static_cast<size_t>(2 * max + 3), 0);
    std::vector<std::vector<long>> trace;
    long found = -1;
    for (long D = 0; D <= std::min(max, max_d) && found < 0; ++D) {
      trace.push_back(v);
      for (long k = -D; k <= D; k += 2) {
        long x = k == -D || (k != D && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1]
                                                                        : v[off + k - 1] + 1;
        long y = x - k;
        while (x < N && y < M && A(x) == B(y)) ++x, ++y;
        v[off + k] = x;
        if (x >= N && y >= M) {
          found = D;
          break;
        }
      }
    }
    if (found < 0) {
      replace_all();
    } else {
      long x = N, y = M;
      std::vector<DiffLine> rev;
      for (long D = found; D > 0; --D) {
        const std::vector<long>& vv = trace[static_cast<size_t>(D)];
        const long k = x - y;
        const long pk = k == -D || (k != D && vv[off + k - 1] < vv[off + k + 1]) ? k + 1 : k - 1;
        const long px = vv[off + pk], py = px - pk;
        while (x > px && y > py) rev.push_back({' ', A(--x)}), --y;
        if (x == px)
          rev.push_back({'+', B(--y)});
        else
          rev.push_back({'-', A(--x)});
      }
      while (x > 0 && y > 0) rev.push_back({' ', A(--x)}), --y;
      mid.assign(rev.rbegin(), rev.rend());
    }
  }
  out.insert(out.end(), mid.begin(), mid.end());
  for (long i = ea; i < n; ++i) out.push_back({' ', a[i]});
  return out;
}

std::string format_ns(double ns) {
  if (ns < 1e3) return fmt::format("{} ns", static_cast<int64_t>(ns));
  if (ns < 1e6) return fmt::format("{:.1f} µs", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:.1f} ms", ns / 1e6);
  return fmt::format("{:.2f} s", ns / 1e9);
}

// The whole file (a FIFO works); one past kMaxDumpBytes is an error (/dev/zero stops there).
std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error(fmt::format("cannot open '{}': it is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxDumpBytes)
      throw std::runtime_error(
          fmt::format("cannot read '{}': it is larger than {} bytes (the dump size limit)", path,
                      kMaxDumpBytes));
  }
  if (in.bad()) throw std::runtime_error(fmt::format("cannot read '{}'", path));
  return text;
}

// ---- rw viz --text

void print_block(std::FILE* out, const std::string& indent, const std::string& key,
                 const std::string& text) {
  std::string t = text;
  size_t start = 0;
  bool first = true;
  while (true) {
    const size_t nl = t.find('\n', start);
    const std::string line =
        t.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    fmt::print(out, "{}{:<8}{}\n", indent, first ? key : "", line);
    first = false;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
}

std::string node_text(const Dump& d, int n) { return fmt::format("n{:<4} {}", n, expr_text(d, n)); }

void print_call_steps(std::FILE* out, Dump& d, size_t ci, const std::string& ind) {
  const Call& c = d.calls[ci];
  std::unordered_map<int, int> map;
  int prev_root = c.root;
  std::vector<std::string> prev = pretty_lines(d, c.root);
  std::unordered_set<int> prev_set;
  for (int n : toposort(d, c.root)) prev_set.insert(n);
  fmt::print(out, "{}step 0: the graph before the first match ({} nodes)\n", ind, prev_set.size());
  for (const std::string& l : prev) fmt::print(out, "{}  {}\n", ind, l);
  for (size_t k = 1; k <= c.matches.size(); ++k) {
    const Match& m = c.matches[k - 1];
    map[m.before] = m.after;
    const int root = substitute(d, c.root, map);
    std::vector<std::string> cur = pretty_lines(d, root);
    std::unordered_set<int> cur_set;
    std::string changed;
    for (int n : toposort(d, root)) {
      cur_set.insert(n);
      if (!prev_set.count(n))
        changed += fmt::format("{}n{}{}", changed.empty() ? "" : ", ", n,
                               d.nodes[static_cast<size_t>(n)].rebuilt ? "*" : "");
    }
    fmt::print(out, "{}step {}: {} at {}:{}\n", ind, k, m.rule_name, m.rule_file, m.rule_line);
    fmt::print(out, "{}  changed nodes: {}\n", ind, changed.empty() ? "none" : changed);
    fmt::print(out, "{}  --- step {}\n{}  +++ step {}\n", ind, k - 1, ind, k);
    const std::vector<DiffLine> diff = diff_lines(prev, cur);
    std::vector<bool> keep(diff.size(), false);
    for (size_t i = 0; i < diff.size(); ++i)
      if (diff[i].t != ' ')
        for (size_t j = i >= 3 ? i - 3 : 0; j <= std::min(diff.size() - 1, i + 3); ++j)
          keep[j] = true;
    size_t skipped = 0;
    for (size_t i = 0; i <= diff.size(); ++i) {
      if (i < diff.size() && !keep[i]) {
        ++skipped;
        continue;
      }
      if (skipped)
        fmt::print(out, "{}  @@ {} unchanged line{} @@\n", ind, skipped, skipped == 1 ? "" : "s");
      skipped = 0;
      if (i < diff.size()) fmt::print(out, "{}  {} {}\n", ind, diff[i].t, diff[i].s);
    }
    prev = std::move(cur);
    prev_set = std::move(cur_set);
    prev_root = root;
  }
  if (c.result) {
    fmt::print(out, "{}final graph n{}: {}\n", ind, prev_root,
               prev_root == *c.result
                   ? "the call's result"
                   : fmt::format("differs from the recorded result n{}", *c.result));
  }
}

int print_text(Dump& d, const std::string& path, std::optional<long> only_call) {
  std::FILE* out = stdout;
  if (only_call && (*only_call < 0 || static_cast<size_t>(*only_call) >= d.calls.size())) {
    rw::eprint("rw viz: error: --call {}: the dump has {} calls\n", *only_call, d.calls.size());
    return 2;
  }
  fmt::print(out, "VIZ dump {}: {} calls, {} matches, {} nodes, {} groups\n", path, d.calls.size(),
             d.match_count, d.table_size, d.groups.size());
  std::vector<int> chain;
  for (size_t ci = 0; ci < d.calls.size(); ++ci) {
    if (only_call && static_cast<size_t>(*only_call) != ci) continue;
    const Call& c = d.calls[ci];
    const std::vector<int> path_ = d.group_path(c.group);
    size_t i = 0;
    while (i < chain.size() && i < path_.size() && chain[i] == path_[i]) ++i;
    for (size_t j = i; j < path_.size(); ++j)
      fmt::print(out, "\n{}group {}\n", std::string(2 * std::min(j, kMaxIndentLevels), ' '),
                 d.groups[static_cast<size_t>(path_[j])].name);
    if (i == path_.size() && i < chain.size()) fmt::print(out, "\n");
    chain = path_;
    // Indentation stops at kMaxIndentLevels (the depth is printed on the line itself), so deep
    // nesting cannot make the output quadratic.
    const std::string ind(
        2 * std::min(kMaxIndentLevels, path_.size() + static_cast<size_t>(c.depth)), ' ');
    const std::string ind2 = ind + "  ";
    fmt::print(out, "{}call #{} {}  {}  depth {}  {} match{}  at {}\n", ind, ci, c.name, c.mode,
               c.depth, c.matches.size(), c.matches.size() == 1 ? "" : "es", c.location);
    fmt::print(out, "{}{:<8}{}\n", ind2, "root", node_text(d, c.root));
    if (only_call) {
      print_call_steps(out, d, ci, ind2);
    } else {
      for (size_t k = 0; k < c.matches.size(); ++k) {
        const Match& m = c.matches[k];
        fmt::print(out, "{}match {}  {}  {}  {}\n", ind2, k + 1, m.rule_name,
                   m.rule_file.empty() ? std::string("(location unknown)")
                                       : fmt::format("{}:{}", m.rule_file, m.rule_line),
                   format_ns(m.ns));
        if (!m.rule_source.empty()) print_block(out, ind2 + "  ", "rule", m.rule_source);
        fmt::print(out, "{}  {:<8}{}\n", ind2, "before", node_text(d, m.before));
        fmt::print(out, "{}  {:<8}{}\n", ind2, "after", node_text(d, m.after));
      }
    }
    if (c.result)
      fmt::print(out, "{}{:<8}{}\n", ind2, "result", node_text(d, *c.result));
    else
      fmt::print(out, "{}{:<8}none: the call did not finish (it threw)\n", ind2, "result");
  }
  if (std::fflush(out) != 0 || std::ferror(out)) {
    rw::eprint("rw viz: error: cannot write the output: {}\n", std::strerror(errno));
    return 1;
  }
  return 0;
}

// ---- the page

std::string script_safe(std::string_view json_text) {
  // Inside <script type="application/json">: "<" only occurs in JSON strings, where \u003c is the
  // same character, so "</script>" can never end the element early.
  std::string out;
  out.reserve(json_text.size() + json_text.size() / 64);
  for (char ch : json_text) {
    if (ch == '<')
      out += "\\u003c";
    else
      out += ch;
  }
  return out;
}

std::string make_page(const std::string& source, const std::string* dump_text,
                      const std::string& dump_url) {
  std::string page(viz_assets::kViewerHtml, viz_assets::kViewerHtmlSize);
  json cfg = {{"source", source}};
  if (!dump_url.empty()) cfg["dumpUrl"] = dump_url;
  const std::string cfg_text =
      script_safe(cfg.dump(-1, ' ', false, json::error_handler_t::replace));
  const std::string cfg_marker = "@@TINYRW_CONFIG@@", dump_marker = "@@TINYRW_DUMP@@";
  const size_t c = page.find(cfg_marker);
  const size_t dm = page.find(dump_marker);
  if (c == std::string::npos || dm == std::string::npos || dm < c)
    throw std::runtime_error("the embedded viewer page is damaged (markers missing); rebuild rw");
  std::string out;
  out.reserve(page.size() + (dump_text ? dump_text->size() + dump_text->size() / 64 : 0) +
              cfg_text.size());
  out.append(page, 0, c);
  out += cfg_text;
  out.append(page, c + cfg_marker.size(), dm - c - cfg_marker.size());
  if (dump_text) out += script_safe(*dump_text);
  out.append(page, dm + dump_marker.size(), std::string::npos);
  return out;
}

void warn_if_bad(const std::string& path, const std::string& text) {
  try {
    load_dump(text);
  } catch (const DumpError& e) {
    rw::eprint("rw viz: warning: {}: {} (the page shows this error)\n", path, e.what());
  }
}

// ---- the server: HTTP/1.0-style, one request per connection, 127.0.0.1 only

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR && !g_stop) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void respond(int fd, int status, std::string_view reason, std::string_view type,
             std::string_view body, bool head_only, std::string_view extra = {}) {
  std::string h = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
      "X-Content-Type-Options: nosniff\r\nConnection: close\r\n{}\r\n",
      status, reason, type, body.size(), extra);
  if (send_all(fd, h) && !head_only) send_all(fd, body);
}

void handle(int fd, const std::string& dump_path, int port) {
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string req;
  char buf[4096];
  while (req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos) {
    if (req.size() > 16384)
      return respond(fd, 431, "Request Header Fields Too Large", "text/plain", "too large\n",
                     false);
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR && !g_stop) continue;
    if (n <= 0) {
      if (req.empty()) return;
      break;
    }
    req.append(buf, static_cast<size_t>(n));
  }
  const size_t eol = req.find_first_of("\r\n");
  std::istringstream first(req.substr(0, eol));
  std::string method, target, version;
  first >> method >> target >> version;
  if (method.empty() || target.empty() || target[0] != '/' || version.rfind("HTTP/", 0) != 0)
    return respond(fd, 400, "Bad Request", "text/plain", "bad request\n", false);
  // Only this machine's names: a page on another site cannot reach the server by DNS rebinding.
  std::string host;
  {
    std::istringstream hs(req.substr(eol == std::string::npos ? req.size() : eol));
    std::string line;
    while (std::getline(hs, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.size() > 5 && strncasecmp(line.c_str(), "host:", 5) == 0) {
        host = line.substr(5);
        host.erase(0, host.find_first_not_of(" \t"));
      }
    }
  }
  const std::string p = std::to_string(port);
  if (!host.empty() && host != "127.0.0.1:" + p && host != "localhost:" + p &&
      host != "127.0.0.1" && host != "localhost")
    return respond(fd, 403, "Forbidden", "text/plain", "forbidden host\n", false);
  const bool head = method == "HEAD";
  if (method != "GET" && !head)
    return respond(fd, 405, "Method Not Allowed", "text/plain", "only GET and HEAD\n", false,
                   "Allow: GET, HEAD\r\n");
  const std::string path = target.substr(0, target.find_first_of("?#"));
  if (path == "/" || path == "/index.html") {
    return respond(fd, 200, "OK", "text/html; charset=utf-8",
                   make_page(dump_path, nullptr, "/dump.json"), head);
  }
  if (path == "/dump.json") {
    std::string text;
    try {
      text = read_file(dump_path);  // read afresh: reloading the page shows a new trace
    } catch (const std::exception& e) {
      return respond(fd, 500, "Internal Server Error", "text/plain; charset=utf-8",
                     std::string(e.what()) + "\n", head);
    }
    return respond(fd, 200, "OK", "application/json; charset=utf-8", text, head);
  }
  if (path == "/favicon.ico") return respond(fd, 204, "No Content", "text/plain", "", head);
  return respond(fd, 404, "Not Found", "text/plain", "not found\n", head);
}

int serve(const std::string& dump_path, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    rw::eprint("rw viz: error: socket: {}\n", std::strerror(errno));
    return 1;
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0) {
    rw::eprint("rw viz: error: cannot listen on 127.0.0.1:{}: {} (--port 0 picks a free port)\n",
               port, std::strerror(errno));
    ::close(fd);
    return 1;
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int actual = ntohs(addr.sin_port);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: accept() returns EINTR and the loop ends
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  fmt::print("rw viz: serving {} at http://127.0.0.1:{}/ (Ctrl-C to stop)\n", dump_path, actual);
  std::fflush(stdout);
  while (!g_stop) {
    const int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      rw::eprint("rw viz: error: accept: {}\n", std::strerror(errno));
      ::close(fd);
      return 1;
    }
    try {
      handle(c, dump_path, actual);
    } catch (const std::exception& e) {
      rw::eprint("rw viz: error while answering a request: {}\n", e.what());
    }
    ::shutdown(c, SHUT_WR);
    ::close(c);
  }
  ::close(fd);
  rw::eprint("rw viz: stopped\n");
  return 0;
}

bool parse_long(const std::string& s, long& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtol(s.c_str(), &end, 10);
  return errno == 0 && end && *end == '\0';
}

}  // namespace

int viz_main(const std::vector<std::string>& args) {
  bool text = false;
  std::string html_out, dump_path;
  long port = 8000, call = -1;
  bool have_call = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--text") {
      text = true;
    } else if (a == "--html" && i + 1 < args.size()) {
      html_out = args[++i];
    } else if (a == "--port" && i + 1 < args.size()) {
      if (!parse_long(args[++i], port) || port < 0 || port > 65535) {
        rw::eprint("rw viz: error: bad --port '{}' (0..65535; 0 picks a free port)\n", args[i]);
        return 2;
      }
    } else if (a == "--call" && i + 1 < args.size()) {
      if (!parse_long(args[++i], call) || call < 0) {
        rw::eprint("rw viz: error: bad --call '{}' (a call id)\n", args[i]);
        return 2;
      }
      have_call = true;
    } else if (a == "-h" || a == "--help") {
      return usage(stdout, 0);
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      rw::eprint("rw viz: error: unknown or incomplete option '{}'\n", a);
      return usage(stderr, 2);
    } else if (dump_path.empty()) {
      dump_path = a;
    } else {
      return usage(stderr, 2);
    }
  }
  if (dump_path.empty() || (text && !html_out.empty()) || (have_call && !text))
    return usage(stderr, 2);

  std::string dump_text;
  try {
    dump_text = read_file(dump_path);
  } catch (const std::exception& e) {
    rw::eprint("rw viz: error: {}\n", e.what());
    return 2;
  }

  if (text) {
    Dump d;
    try {
      d = load_dump(dump_text);
    } catch (const DumpError& e) {
      rw::eprint("rw viz: error: {}: {}\n", dump_path, e.what());
      return 1;
    }
    try {
      return print_text(d, dump_path, have_call ? std::optional<long>(call) : std::nullopt);
    } catch (const DumpError& e) {  // a limit reached while replaying the matches
      std::fflush(stdout);
      rw::eprint("rw viz: error: {}: {}\n", dump_path, e.what());
      return 1;
    }
  }
  if (!html_out.empty()) {
    warn_if_bad(dump_path, dump_text);
    const std::string page = make_page(dump_path, &dump_text, "");
    std::ofstream out(html_out, std::ios::binary | std::ios::trunc);
    if (!out || !out.write(page.data(), static_cast<std::streamsize>(page.size())) ||
        !out.flush()) {
      rw::eprint("rw viz: error: cannot write '{}'\n", html_out);
      return 2;
    }
    fmt::print("rw viz: wrote {} ({} KiB): open it in a browser, no server needed\n", html_out,
               (page.size() + 1023) / 1024);
    return 0;
  }
  warn_if_bad(dump_path, dump_text);
  return serve(dump_path, static_cast<int>(port));
}

}  // namespace tinyrw
