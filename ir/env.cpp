#include "ir/env.h"

#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace tinyrw {

namespace {
std::mutex g_names_mu;
std::set<std::string, std::less<>>& names_read() {
  static std::set<std::string, std::less<>> names;
  return names;
}
}  // namespace

int64_t env_int(const char* name, int64_t fallback) {
  {
    const std::lock_guard<std::mutex> lock(g_names_mu);
    // a name asked for before costs a lookup, not an allocation
    if (names_read().find(std::string_view(name)) == names_read().end()) names_read().emplace(name);
  }
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0') throw std::invalid_argument(fmt::format("${}='{}' is not an integer", name, v));
  return n;
}

std::string env_signature() {
  const std::lock_guard<std::mutex> lock(g_names_mu);
  std::string out;
  for (const std::string& name : names_read()) {
    const char* v = std::getenv(name.c_str());
    out += name + "=" + (v ? v : "") + ";";
  }
  return out;
}

}  // namespace tinyrw
