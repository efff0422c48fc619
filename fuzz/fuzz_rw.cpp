// libFuzzer target for the .rw front end: any bytes go through the byte checks, the ANTLR parse,
// the syntax tree and resolution/type checks. Diagnostics are fine; a crash, a hang, a sanitizer
// report or an escaping exception is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "dsl/resolve.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tinyrw::rw::Diagnostics diags;
  auto program = tinyrw::rw::load_rules_text(
      "fuzz.rw", std::string(reinterpret_cast<const char*>(data), size), diags);
  (void)program;
  (void)diags.render();
  return 0;
}
