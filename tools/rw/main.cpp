// rw: the tinyrw command-line tool.
//   rw simplify  simplifies index expressions in Python syntax (tools/rw/simplify.cpp)
//   rw viz    shows a VIZ dump: server, --html page or --text (tools/rw/viz.cpp)
//   rw demo   builds index expressions, derives their ranges, substitutes a variable (through
//             graph_rewrite) and prints each step; VIZ=1 records the rewrites
//   rw ops    prints the op table
//   rw devices  lists the devices: available, or why not; a GPU's name, arch and memory
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "dsl/diagnostics.h"
#include "ir/graph.h"
#include "ir/render.h"
#include "ir/rewrite.h"
#include "ir/uop.h"
#include "ir/viz.h"
#include "runtime/gpu_runtime.h"
#include "tensor/tensor.h"
#include "tools/rw/simplify.h"
#include "tools/rw/viz.h"

using namespace tinyrw;

namespace {

// std::fputs, not fmt::print, which throws (and aborts) when the stream cannot be written.
int usage(std::FILE* out, int status) {
  std::fputs(
      "usage: rw <command>\n"
      "  simplify [--var NAME=LO..HI]... [--interp] [--stats] [--viz FILE] (EXPR | --batch "
      "FILE|-)\n"
      "         simplify integer index expressions written in Python syntax\n"
      "  viz [--port N | --html OUT.html | --text [--call N]] DUMP.json\n"
      "         show a VIZ trace in the browser (127.0.0.1) or in the terminal\n"
      "  demo   build index expressions, derive ranges, substitute a variable\n"
      "  ops    print the op table (name, category, sources, groups)\n"
      "  devices  list the devices: available or why not (a GPU: name, arch, memory, driver)\n",
      out);
  return status;
}

void show(std::string_view label, const UOp& e) {
  fmt::print("{:<28} {:<34} range [{}, {}]  nodes {}\n", label, render(e), e.vmin().repr(),
             e.vmax().repr(), toposort(e).size());
}

int demo() {
  viz::Group group("rw demo");
  const UOp x = UOp::variable("x", 0, 100);
  const UOp y = UOp::variable("y", -8, 8);
  const UOp e1 = (x * 6 + 4).floordiv(3).floormod(5);
  const UOp e2 = x.floordiv(4) * 4 + x.floormod(4);
  const UOp e3 = (x * 4 + y * 8).floordiv(y.maximum(UOp::cint(1)) * 2);
  const UOp e4 = x.lt(UOp::cint(10)).where(x, y);
  show("((x*6+4)//3)%5", e1);
  show("(x//4)*4+x%4", e2);
  show("(x*4+y*8)//(max(y,1)*2)", e3);
  show("x if x<10 else y", e4);

  const UOp again = (x * 6 + 4).floordiv(3).floormod(5);
  fmt::print("hash-consing: rebuilding ((x*6+4)//3)%5 gives the same node: {}\n",
             again == e1 ? "yes" : "no");

  const UOp sub = substitute(e1, {{x, y + 10}});
  show("x := y+10 in ((x*6+4)//3)%5", sub);
  fmt::print("live UOps: {}\n", uop_table_stats().live_nodes);
  return 0;
}

int ops() {
  fmt::print("{:<20} {:<24} {:>7}  {}\n", "op", "category", "sources", "groups");
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(static_cast<Op>(i));
    const std::string srcs = info.max_src < 0 ? fmt::format("{}+", info.min_src)
                             : info.min_src == info.max_src
                                 ? fmt::format("{}", info.min_src)
                                 : fmt::format("{}-{}", info.min_src, info.max_src);
    std::string g;
    auto flag = [&](uint32_t bit, const char* name) {
      if (info.groups & bit) g += (g.empty() ? "" : ",") + std::string(name);
    };
    flag(G_COMM, "commutative");
    flag(G_ASSOC, "associative");
    flag(G_IDEMP, "idempotent");
    flag(G_CMP, "comparison");
    flag(G_REDUCE_OP, "reduce-op");
    flag(G_MOVEMENT, "movement");
    flag(G_IRREDUCIBLE, "irreducible");
    fmt::print("{:<20} {:<24} {:>7}  {}\n", info.name, category_name(info.category), srcs, g);
  }
  return 0;
}

// Each device base, available or not with the reason; the default device last. Exit status 0.
int devices() {
  for (const char* base : {"INTERP", "CPU", "CUDA", "HIP"}) {
    if (is_gpu_device(base)) {
      if (const std::optional<std::string> why = gpu_unavailable(base))
        fmt::print("{:<7} unavailable: {}\n", base, *why);
      else
        fmt::print("{:<7} {}\n", base, gpu_runtime(base).describe());
    } else {
      fmt::print("{:<7} {}\n", base,
                 device_available(base) ? "available (this host)" : "unavailable in this build");
    }
  }
  fmt::print("default: {}\n", default_device());
  return 0;
}

int run(std::string_view cmd, int argc, char** argv) {
  try {
    if (cmd == "simplify") return simplify_main(std::vector<std::string>(argv + 2, argv + argc));
    if (cmd == "viz") return viz_main(std::vector<std::string>(argv + 2, argv + argc));
    if (cmd == "demo") return demo();
    if (cmd == "ops") return ops();
    if (cmd == "devices") return devices();
    if (cmd == "help" || cmd == "--help" || cmd == "-h") return usage(stdout, 0);
  } catch (const std::exception& e) {
    rw::eprint("rw {}: error: {}\n", cmd, e.what());
    return 1;
  }
  rw::eprint("rw: unknown command '{}'\n", cmd);
  return usage(stderr, 2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr, 2);
  const std::string_view cmd = argv[1];
  const int status = run(cmd, argc, argv);
  // output lost to a full disk or a closed pipe is a failure, whatever the command said
  if ((std::fflush(stdout) != 0 || std::ferror(stdout)) && status == 0) {
    rw::eprint("rw {}: error: cannot write the output: {}\n", cmd, std::strerror(errno));
    return 1;
  }
  return status;
}
