#include "ir/viz.h"

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ir/uop_node.h"

namespace tinyrw::viz {

namespace {

struct Match {
  int before, after;
  RuleInfo rule;
  int64_t ns;
};

struct Call {
  int group;
  std::string name, location, mode;
  int depth;
  int root, result = -1;
  std::vector<Match> matches;
};

struct GroupRec {
  std::string name;
  int parent;
};

struct Trace {
  bool on = false;
  std::string path = "viz.json";
  std::vector<GroupRec> groups;
  std::vector<int> open_groups;
  std::vector<Call> calls;
  std::vector<UOp> nodes;  // keeps every recorded node alive; index = node id
  std::unordered_map<const UOpNode*, int> ids;

  // Records u and everything under it (iteratively); returns u's id.
  int node_id(const UOp& u) {
    if (auto it = ids.find(u.node()); it != ids.end()) return it->second;
    std::vector<std::pair<UOp, size_t>> stack{{u, 0}};
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n.nsrc()) {
        const UOp c = n.src(next++);
        if (!ids.count(c.node())) stack.emplace_back(c, 0);
        continue;
      }
      if (!ids.count(n.node())) {
        ids.emplace(n.node(), static_cast<int>(nodes.size()));
        nodes.push_back(n);
      }
      stack.pop_back();
    }
    return ids.at(u.node());
  }
};

Trace& trace() {
  static Trace* t = [] {
    auto* tr = new Trace();
    const char* env = std::getenv("VIZ");
    if (env && std::atoi(env) > 0) {
      tr->on = true;
      if (const char* p = std::getenv("VIZ_PATH")) tr->path = p;
      std::atexit([] {
        try {
          write();
          fmt::print(stderr, "VIZ: trace written to {}\n", trace().path);
        } catch (const std::exception& e) {
          fmt::print(stderr, "VIZ: {}\n", e.what());
        }
      });
    }
    return tr;
  }();
  return *t;
}

}  // namespace

bool enabled() { return trace().on; }
void enable(std::string path) {
  trace().on = true;
  if (!path.empty()) trace().path = std::move(path);
}
void disable() { trace().on = false; }
void clear() {
  Trace& t = trace();
  t.groups.clear();
  t.open_groups.clear();
  t.calls.clear();
  t.nodes.clear();
  t.ids.clear();
}

Group::Group(std::string_view name) : active_(enabled()) {
  if (!active_) return;
  Trace& t = trace();
  t.groups.push_back({std::string(name), t.open_groups.empty() ? -1 : t.open_groups.back()});
  index_ = static_cast<int>(t.groups.size()) - 1;
  t.open_groups.push_back(index_);
}
Group::~Group() {
  // clear() may have dropped the group meanwhile; only pop what this object pushed.
  auto& open = trace().open_groups;
  if (active_ && !open.empty() && open.back() == index_) open.pop_back();
}

int begin_rewrite(std::string_view name, const std::source_location& caller, const UOp& root,
                  int depth, std::string_view mode) {
  Trace& t = trace();
  Call c;
  c.group = t.open_groups.empty() ? -1 : t.open_groups.back();
  c.name = name;
  c.location = fmt::format("{}:{}", caller.file_name(), caller.line());
  c.mode = mode;
  c.depth = depth;
  c.root = t.node_id(root);
  t.calls.push_back(std::move(c));
  return static_cast<int>(t.calls.size()) - 1;
}

void record_match(int call, const UOp& before, const UOp& after, const RuleInfo* rule,
                  std::chrono::nanoseconds elapsed) {
  Trace& t = trace();
  const int b = t.node_id(before), a = t.node_id(after);
  t.calls.at(static_cast<size_t>(call))
      .matches.push_back({b, a, rule ? *rule : RuleInfo{"?", "", 0, ""}, elapsed.count()});
}

void end_rewrite(int call, const UOp& result) {
  Trace& t = trace();
  t.calls.at(static_cast<size_t>(call)).result = t.node_id(result);
}

std::string to_json() {
  using nlohmann::json;
  const Trace& t = trace();
  json nodes = json::array();
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const UOp& u = t.nodes[i];
    json src = json::array();
    for (const UOp& s : u.src()) src.push_back(t.ids.at(s.node()));
    nodes.push_back({{"id", i},
                     {"op", op_info(u.op()).py_name},
                     {"dtype", u.dtype().repr()},
                     {"src", src},
                     {"arg", u.arg().repr()},
                     {"tag", u.tag().is_none() ? json(nullptr) : json(u.tag().repr())}});
  }
  json groups = json::array();
  for (size_t i = 0; i < t.groups.size(); ++i) {
    groups.push_back(
        {{"id", i},
         {"name", t.groups[i].name},
         {"parent", t.groups[i].parent < 0 ? json(nullptr) : json(t.groups[i].parent)}});
  }
  json calls = json::array();
  for (size_t i = 0; i < t.calls.size(); ++i) {
    const Call& c = t.calls[i];
    json matches = json::array();
    for (const Match& m : c.matches) {
      matches.push_back({{"before", m.before},
                         {"after", m.after},
                         {"rule",
                          {{"name", m.rule.name},
                           {"file", m.rule.file},
                           {"line", m.rule.line},
                           {"source", m.rule.source}}},
                         {"ns", m.ns}});
    }
    calls.push_back({{"id", i},
                     {"group", c.group < 0 ? json(nullptr) : json(c.group)},
                     {"name", c.name},
                     {"location", c.location},
                     {"depth", c.depth},
                     {"mode", c.mode},
                     {"root", c.root},
                     {"result", c.result < 0 ? json(nullptr) : json(c.result)},
                     {"matches", matches}});
  }
  json doc = {{"format", "tinyrw-viz"},
              {"version", 1},
              {"nodes", nodes},
              {"groups", groups},
              {"calls", calls}};
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

void write(const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot open VIZ dump '" + path + "' for writing");
  out << to_json();
  if (!out.flush()) throw std::runtime_error("cannot write VIZ dump '" + path + "'");
}
void write() { write(trace().path); }

}  // namespace tinyrw::viz
