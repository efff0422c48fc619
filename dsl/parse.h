// Parsing .rw files: validation of the raw bytes, the ANTLR parse, the syntax tree, includes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dsl/ast.h"
#include "dsl/diagnostics.h"

namespace tinyrw::rw {

// Limits that keep every later stage's recursion shallow; input beyond them is an error.
inline constexpr int kMaxNesting = 64;     // brackets ( [ { inside one another
inline constexpr int kMaxTreeDepth = 256;  // depth of one pattern or expression tree
inline constexpr size_t kMaxSourceBytes = size_t{1} << 20;  // one .rw file (the parser's memory)

// Parses one file. Returns null (with errors in diags) when the file is malformed.
std::unique_ptr<FileAst> parse_file(const SourceFile& src, Diagnostics& diags);

// A root file and every file it includes, each parsed once, includes before their includers.
struct Program {
  std::vector<std::unique_ptr<SourceFile>> files;
  std::vector<std::unique_ptr<FileAst>> asts;
};

// Loads `path` and (recursively) its includes, which are resolved relative to the including
// file. Missing files and include cycles are errors at the include. Returns false on errors.
bool load_program(const std::string& path, Program& program, Diagnostics& diags);
// The same for source text given in memory (includes are still read from disk).
bool load_program_text(const std::string& path, std::string text, Program& program,
                       Diagnostics& diags);

}  // namespace tinyrw::rw
