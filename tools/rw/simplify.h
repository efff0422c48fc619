// `rw simplify`: see the contract in README.md.
#pragma once

#include <string>
#include <vector>

namespace tinyrw {
int simplify_main(const std::vector<std::string>& args);
}
