// rwc: the .rw rule compiler.
//   rwc check FILE.rw...                          errors and warnings; exit 0 clean, 1 on errors
//   rwc compile FILE.rw -o OUT.cpp [--depfile D] [--name SHOWN_PATH]
//                                                 writes the matcher (only when it changes)
//   rwc dump FILE.rw                              prints the decision trees
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/emit.h"
#include "dsl/resolve.h"

using namespace tinyrw::rw;

namespace {

int usage() {
  fmt::print(stderr,
             "usage: rwc check FILE.rw...\n"
             "       rwc compile FILE.rw -o OUT.cpp [--depfile FILE.d] [--name SHOWN_PATH]\n"
             "       rwc dump FILE.rw\n");
  return 2;
}

std::unique_ptr<ResolvedProgram> load(const std::string& path, Diagnostics& diags) {
  auto prog = load_rules(path, diags);
  std::fputs(diags.render().c_str(), stderr);
  return prog;
}

const SourceFile* root_file(const ResolvedProgram& prog, const std::string& path) {
  for (const auto& f : prog.program.files)
    if (f->path == path) return f.get();
  return nullptr;
}

// Writes `text` to `path` unless the file already holds exactly that (keeps timestamps, so the
// build recompiles nothing when a .rw edit does not change the generated code).
bool write_if_changed(const std::string& path, const std::string& text) {
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      if (ss.str() == text) return true;
    }
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !(out << text) || !out.flush()) {
      fmt::print(stderr, "rwc: error: cannot write '{}'\n", tmp);
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    fmt::print(stderr, "rwc: error: cannot write '{}': {}\n", path, ec.message());
    return false;
  }
  return true;
}

int check(const std::vector<std::string>& files) {
  int status = 0;
  int errors = 0, warnings = 0;
  for (const std::string& f : files) {
    Diagnostics diags;
    if (!load(f, diags)) status = 1;
    errors += diags.error_count();
    warnings += diags.warning_count();
  }
  if (errors || warnings) fmt::print(stderr, "{} error(s), {} warning(s)\n", errors, warnings);
  return status;
}

int compile(const std::string& in, const std::string& out, const std::string& depfile,
            std::string shown) {
  Diagnostics diags;
  auto prog = load(in, diags);
  if (!prog) return 1;
  const SourceFile* root = root_file(*prog, in);
  if (!root) return 1;
  if (shown.empty()) shown = in;
  if (!write_if_changed(out, emit_cpp(*prog, *root, shown))) return 1;
  if (!depfile.empty()) {
    std::string deps = out + ":";
    for (const auto& f : prog->program.files)
      deps += " " + std::filesystem::absolute(f->path).string();
    if (!write_if_changed(depfile, deps + "\n")) return 1;
  }
  return 0;
}

int dump(const std::string& in) {
  Diagnostics diags;
  auto prog = load(in, diags);
  if (!prog) return 1;
  std::fputs(dump_decision_trees(*prog, *root_file(*prog, in)).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "check") return check(args);
    if (cmd == "dump" && args.size() == 1) return dump(args[0]);
    if (cmd == "compile") {
      std::string in, out, depfile, shown;
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "-o" && i + 1 < args.size())
          out = args[++i];
        else if (args[i] == "--depfile" && i + 1 < args.size())
          depfile = args[++i];
        else if (args[i] == "--name" && i + 1 < args.size())
          shown = args[++i];
        else if (in.empty())
          in = args[i];
        else
          return usage();
      }
      if (in.empty() || out.empty()) return usage();
      return compile(in, out, depfile, shown);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "rwc: internal error: {}\n", e.what());
    return 1;
  }
  return usage();
}
