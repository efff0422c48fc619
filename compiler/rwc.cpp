// rwc: the .rw rule compiler.
//   rwc check FILE.rw...                          errors and warnings; exit 0 clean, 1 on errors
//   rwc compile FILE.rw -o OUT.cpp [--depfile D] [--header OUT.h] [--name SHOWN_PATH]
//                                                 writes the matcher (only when it changes)
//   rwc dump FILE.rw                              prints the decision trees
//   rwc prove FILE.rw [--set NAME]... [--json] [--verbose] [--min-proven PERCENT] [--rlimit N]
//             [--every-width]                     proves each rule with Z3, or refutes it
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "compiler/emit.h"
#ifdef TINYRW_HAVE_Z3
#include "compiler/prove.h"
#endif
#include "dsl/resolve.h"

using namespace tinyrw::rw;

namespace {

int usage() {
  eprint(
      "usage: rwc check FILE.rw...\n"
      "       rwc compile FILE.rw -o OUT.cpp [--depfile FILE.d] [--header OUT.h] [--name "
      "SHOWN_PATH]\n"
      "       rwc dump FILE.rw\n"
      "       rwc prove FILE.rw [--set NAME]... [--json] [--verbose] [--min-proven PERCENT] "
      "[--rlimit N] [--every-width]\n");
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

std::string errno_text(int err) { return std::strerror(err); }

// The file a path names, following symlinks (up to 40, as the kernel does): rwc writes the
// target, so a symlinked output stays a symlink and its target is brought up to date.
std::optional<std::filesystem::path> follow_links(std::filesystem::path p, std::string& error) {
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!std::filesystem::is_symlink(std::filesystem::symlink_status(p, ec))) return p;
    const std::filesystem::path to = std::filesystem::read_symlink(p, ec);
    if (ec) {
      error = ec.message();
      return std::nullopt;
    }
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  error = "too many levels of symbolic links";
  return std::nullopt;
}

// Whether the regular file at `fd` (of `size` bytes) holds exactly `text`, read in chunks.
bool same_content(int fd, off_t size, const std::string& text) {
  if (size != static_cast<off_t>(text.size())) return false;
  char buf[1 << 16];
  size_t at = 0;
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 && at == text.size();
    if (at + static_cast<size_t>(n) > text.size() ||
        std::memcmp(buf, text.data() + at, static_cast<size_t>(n)) != 0)
      return false;
    at += static_cast<size_t>(n);
  }
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Writes `text` to `path` unless the file already holds exactly that (keeps timestamps, so the
// build recompiles nothing when a .rw edit does not change the generated code). Only a regular
// file (or a path that does not exist yet) is written: a FIFO, device or directory is refused. The
// text goes to a temporary file in the target's directory, renamed over the target once it is
// complete, so a failed write never leaves a truncated output.
bool write_if_changed(const std::string& path, const std::string& text) {
  auto fail = [&](const std::string& why) {
    eprint("rwc: error: cannot write '{}': {}\n", path, why);
    return false;
  };
  std::string error;
  const auto target = follow_links(path, error);
  if (!target) return fail(error);
  struct stat st {};
  const bool exists = ::stat(target->c_str(), &st) == 0;
  if (!exists && errno != ENOENT) return fail(errno_text(errno));
  mode_t mode = 0;
  if (exists) {
    if (!S_ISREG(st.st_mode)) {
      return fail(S_ISDIR(st.st_mode)    ? "it is a directory"
                  : S_ISFIFO(st.st_mode) ? "it is a FIFO, not a regular file"
                                         : "it is not a regular file (a device or socket)");
    }
    mode = st.st_mode & 07777;
    const int fd = ::open(target->c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      const bool same = same_content(fd, st.st_size, text);
      ::close(fd);
      if (same) return true;
    }
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  std::filesystem::path dir = target->parent_path();
  if (dir.empty()) dir = ".";
  // The temporary name starts with (at most 64 bytes of) the output's: a name near the 255-byte
  // limit of a directory entry must still leave room for the dot and the suffix.
  std::string tmp = (dir / ("." + target->filename().string().substr(0, 64) + ".XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    return fail(
        fmt::format("cannot create a temporary file in '{}': {}", dir.string(), errno_text(errno)));
  int err = 0;
  if (::fchmod(fd, mode) != 0 || !write_all(fd, text)) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), target->c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return fail(errno_text(err));
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
  if (errors || warnings) eprint("{} error(s), {} warning(s)\n", errors, warnings);
  return status;
}

int compile(const std::string& in, const std::string& out, const std::string& depfile,
            const std::string& header, std::string shown) {
  Diagnostics diags;
  auto prog = load(in, diags);
  if (!prog) return 1;
  const SourceFile* root = root_file(*prog, in);
  if (!root) return 1;
  if (shown.empty()) shown = in;
  if (!write_if_changed(out, emit_cpp(*prog, *root, shown))) return 1;
  if (!header.empty() && !write_if_changed(header, emit_header(*prog, *root, shown))) return 1;
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
  const SourceFile* root = root_file(*prog, in);
  if (!root) return 1;
  std::fputs(dump_decision_trees(*prog, *root).c_str(), stdout);
  return 0;
}

// rwc prove's arguments; the work is compiler/prove.cpp's
int prove(const std::vector<std::string>& args) {
#ifdef TINYRW_HAVE_Z3
  ProveOptions opts;
  std::string in;
  auto number = [&](size_t& i, double lo, double hi) -> std::optional<double> {
    if (i + 1 >= args.size()) return std::nullopt;
    try {
      size_t used = 0;
      const double v = std::stod(args[++i], &used);
      if (used != args[i].size() || v < lo || v > hi) return std::nullopt;
      return v;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--set" && i + 1 < args.size()) {
      opts.sets.push_back(args[++i]);
    } else if (args[i] == "--json") {
      opts.json = true;
    } else if (args[i] == "--verbose") {
      opts.verbose = true;
    } else if (args[i] == "--every-width") {
      opts.every_width = true;
    } else if (args[i] == "--min-proven") {
      const auto v = number(i, 0, 100);
      if (!v) return usage();
      opts.min_proven = *v;
    } else if (args[i] == "--rlimit") {
      const auto v = number(i, 1, 4e9);
      if (!v) return usage();
      opts.rlimit = static_cast<unsigned>(*v);
    } else if (in.empty() && !args[i].starts_with("--")) {
      in = args[i];
    } else {
      return usage();
    }
  }
  if (in.empty()) return usage();
  return prove_rules(in, opts);
#else
  (void)args;
  eprint(
      "rwc: error: this rwc was built without Z3, which `rwc prove` needs (apt-get install "
      "libz3-dev, then configure again)\n");
  return 2;
#endif
}

int run(const std::string& cmd, const std::vector<std::string>& args) {
  try {
    if (cmd == "check") return check(args);
    if (cmd == "dump" && args.size() == 1) return dump(args[0]);
    if (cmd == "prove") return prove(args);
    if (cmd == "compile") {
      std::string in, out, depfile, header, shown;
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "-o" && i + 1 < args.size())
          out = args[++i];
        else if (args[i] == "--depfile" && i + 1 < args.size())
          depfile = args[++i];
        else if (args[i] == "--header" && i + 1 < args.size())
          header = args[++i];
        else if (args[i] == "--name" && i + 1 < args.size())
          shown = args[++i];
        else if (in.empty())
          in = args[i];
        else
          return usage();
      }
      if (in.empty() || out.empty()) return usage();
      return compile(in, out, depfile, header, shown);
    }
  } catch (const std::exception& e) {
    eprint("rwc: internal error: {}\n", e.what());
    return 1;
  }
  return usage();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  int status = run(argv[1], std::vector<std::string>(argv + 2, argv + argc));
  // Output lost to a full disk or a closed pipe is a failure, not a success. errno is the flush's,
  // or that of the failed write that set the error flag (nothing since then sets it).
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    eprint("rwc: error: cannot write the output{}{}\n", errno ? ": " : "",
           errno ? std::strerror(errno) : "");
    status = 1;
  }
  // Diagnostics were lost: nothing left to report them on, but a success becomes a failure (a
  // failure keeps its status: 2 for usage, 1 for errors).
  if (std::ferror(stderr) && status == 0) status = 1;
  return status;
}
