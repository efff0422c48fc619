#include "symbolic/simplify.h"

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "dsl/compiled.h"
#include "dsl/interp.h"

namespace tinyrw {

std::string rules_dir() {
  if (const char* env = std::getenv("TINYRW_RULES_DIR")) return env;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path installed = fs::path(TINYRW_INSTALL_DATADIR) / "tinyrw" / "rules";
  if (fs::exists(installed / "symbolic.rw", ec)) return installed.string();
  return TINYRW_SOURCE_RULES_DIR;
}

Simplifier::Simplifier(Mode mode, const std::string& set) {
  const rw::RuleSetMatcher* compiled = nullptr;
  if (mode != Mode::Interpreted) {
    compiled = rw::compiled_rules(set);
    if (!compiled) throw rw::RwError(fmt::format("no compiled rule set '{}'", set));
    matcher_ = compiled;
  }
  if (mode != Mode::Compiled) {
    rw::Diagnostics diags;
    const std::string path = rules_dir() + "/symbolic.rw";
    interpreted_ = rw::interpret(path, set, diags);
    if (!interpreted_) {
      throw rw::RwError(
          fmt::format("cannot load rule set '{}' from {}:\n{}", set, path, diags.render()));
    }
    matcher_ = interpreted_.get();
  }
  if (mode == Mode::Differential) {
    differential_ = std::make_unique<rw::DifferentialMatcher>(*compiled, *interpreted_);
    matcher_ = differential_.get();
  }
}

Simplifier::~Simplifier() = default;

UOp Simplifier::simplify(const UOp& expr) const {
  return graph_rewrite(expr, matcher_, {.name = "simplify"});
}

}  // namespace tinyrw
