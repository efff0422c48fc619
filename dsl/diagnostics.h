// Diagnostics of the .rw front end: `path:line:col: error: message`, the source line and a caret.
#pragma once

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace tinyrw::rw {

// A .rw file's text, kept for diagnostics.
struct SourceFile {
  std::string path;
  std::string text;
  std::string_view line(int line_no) const;  // 1-based, without the newline
};

struct Loc {
  const SourceFile* file = nullptr;
  int line = 0;             // 1-based
  int col = 0;              // 1-based, in bytes
  std::string str() const;  // "path:line:col"
};

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity;
  Loc loc;  // valid while the source lives; `text` keeps everything needed after that
  std::string message;
  std::string text;  // rendered when reported: location, message, source line, caret, notes
};

class Diagnostics {
 public:
  void error(const Loc& loc, std::string msg);
  void warning(const Loc& loc, std::string msg,
               std::vector<std::pair<Loc, std::string>> notes = {});
  void error_with_notes(const Loc& loc, std::string msg,
                        std::vector<std::pair<Loc, std::string>> notes);
  bool has_errors() const { return errors_ > 0; }
  int error_count() const { return errors_; }
  int warning_count() const { return warnings_; }
  const std::vector<Diagnostic>& all() const { return list_; }
  // Every diagnostic, rendered with its source line and a caret.
  std::string render() const;

 private:
  std::vector<Diagnostic> list_;
  int errors_ = 0;
  int warnings_ = 0;
};

// Prints a message on stderr for the command-line tools. fmt::print(stderr, ...) throws when stderr
// cannot be written (closed, or a full disk), and an uncaught throw aborted rwc and rw viz; the
// tools check ferror(stderr) or report through their exit status instead.
template <class... Args>
void eprint(fmt::format_string<Args...> format, Args&&... args) {
  std::fputs(fmt::format(format, std::forward<Args>(args)...).c_str(), stderr);
}

// Thrown by loaders and the interpreter when a .rw program has errors.
class RwError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tinyrw::rw
