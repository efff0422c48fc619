#include "dsl/diagnostics.h"

#include <fmt/format.h>

namespace tinyrw::rw {

std::string_view SourceFile::line(int line_no) const {
  size_t start = 0;
  for (int l = 1; l < line_no; ++l) {
    start = text.find('\n', start);
    if (start == std::string::npos) return {};
    ++start;
  }
  size_t end = text.find('\n', start);
  if (end == std::string::npos) end = text.size();
  std::string_view s(text.data() + start, end - start);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

std::string Loc::str() const {
  return fmt::format("{}:{}:{}", file ? file->path : "<input>", line, col);
}

namespace {

// Printable form of a source line: control and non-ASCII bytes are escaped so the terminal and
// the caret stay aligned; very long lines are cut to a window around the column.
std::pair<std::string, size_t> excerpt(std::string_view line, int col) {
  size_t begin = 0, end = line.size();
  const size_t at = col > 0 ? static_cast<size_t>(col - 1) : 0;
  constexpr size_t kWindow = 120;
  std::string out;
  if (line.size() > kWindow) {
    begin = at > kWindow / 2 ? at - kWindow / 2 : 0;
    end = std::min(line.size(), begin + kWindow);
    if (begin > 0) out += "...";
  }
  size_t caret = out.size();
  for (size_t i = begin; i < end; ++i) {
    const unsigned char c = static_cast<unsigned char>(line[i]);
    if (i == at) caret = out.size();
    if (c == '\t') {
      out += ' ';
    } else if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (at >= end) caret = out.size();
  if (end < line.size()) out += "...";
  return {out, caret};
}

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::Error:
      return "error";
    case Severity::Warning:
      return "warning";
    case Severity::Note:
      return "note";
  }
  return "?";
}

void append_located(std::string& out, const Loc& loc, Severity sev, const std::string& msg) {
  if (!loc.file && loc.line == 0) {  // not in a file: a command-line level problem
    out += fmt::format("{}: {}\n", severity_name(sev), msg);
    return;
  }
  out += fmt::format("{}: {}: {}\n", loc.str(), severity_name(sev), msg);
  if (!loc.file || loc.line <= 0) return;
  auto [text, caret] = excerpt(loc.file->line(loc.line), loc.col);
  out += text + "\n" + std::string(caret, ' ') + "^\n";
}

std::string render_text(Severity sev, const Loc& loc, const std::string& msg,
                        const std::vector<std::pair<Loc, std::string>>& notes) {
  std::string out;
  append_located(out, loc, sev, msg);
  for (const auto& [nloc, nmsg] : notes) append_located(out, nloc, Severity::Note, nmsg);
  return out;
}

}  // namespace

void Diagnostics::error(const Loc& loc, std::string msg) {
  error_with_notes(loc, std::move(msg), {});
}

void Diagnostics::error_with_notes(const Loc& loc, std::string msg,
                                   std::vector<std::pair<Loc, std::string>> notes) {
  std::string text = render_text(Severity::Error, loc, msg, notes);
  list_.push_back({Severity::Error, loc, std::move(msg), std::move(text)});
  ++errors_;
}

void Diagnostics::warning(const Loc& loc, std::string msg,
                          std::vector<std::pair<Loc, std::string>> notes) {
  std::string text = render_text(Severity::Warning, loc, msg, notes);
  list_.push_back({Severity::Warning, loc, std::move(msg), std::move(text)});
  ++warnings_;
}

std::string Diagnostics::render() const {
  std::string out;
  for (const Diagnostic& d : list_) out += d.text;
  return out;
}

}  // namespace tinyrw::rw
