#include "runtime/mpi.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/storage.h"

#if TINYRW_HAVE_MPI
#include <mpi.h>
#endif

namespace tinyrw::mpi {

namespace {

// Whether mpirun (Open MPI's, or a PMI launcher's) started this process.
bool started_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

// MPI counts are ints: a transfer goes in pieces of at most 1 GiB, in order (one, empty, for 0
// bytes: the receiver still learns the transfer happened). f(offset, bytes) per piece.
template <class F>
void for_each_piece(size_t bytes, F f) {
  constexpr size_t kPiece = size_t{1} << 30;
  size_t off = 0;
  do {
    const size_t n = std::min(kPiece, bytes - off);
    f(off, static_cast<int>(n));
    off += n;
  } while (off < bytes);
}

#if TINYRW_HAVE_MPI
void check(int code, std::string_view what, int peer, int tag) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, text, &n);
  throw TensorError(fmt::format("MPI: {} (peer rank {}, tag {}) failed: {}", what, peer, tag,
                                std::string(text, static_cast<size_t>(n))));
}
#endif

World start() {
  if (!started_by_mpirun()) return {};
#if TINYRW_HAVE_MPI
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    throw TensorError("MPI: MPI_Init_thread failed");
  if (provided < MPI_THREAD_MULTIPLE)
    throw TensorError(
        "MPI: this MPI library gives no MPI_THREAD_MULTIPLE (the device queues send and receive "
        "from their own threads)");
  // errors come back as codes, raised as TensorErrors, rather than aborting every rank
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
  World w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  int* tag_ub = nullptr;
  int has = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &has);
  w.max_tag = has ? *tag_ub : 32767;  // (the least the standard allows)
  return w;
#else
  throw TensorError(
      "this process was started by mpirun, but tinyrw was built without MPI (install "
      "libopenmpi-dev and configure again)");
#endif
}

}  // namespace

bool built_with_mpi() { return TINYRW_HAVE_MPI != 0; }

const World& world() {
  static const World w = start();
  return w;
}

int owner(std::string_view device) {
  const World& w = world();
  if (w.size == 1) return 0;
  const size_t colon = device.find(':');
  const long index = colon == std::string_view::npos
                         ? 0
                         : std::strtol(std::string(device.substr(colon + 1)).c_str(), nullptr, 10);
  return static_cast<int>(index % w.size);
}

#if TINYRW_HAVE_MPI

void send(const void* data, size_t bytes, int to, int tag) {
  const auto* p = static_cast<const char*>(data);
  for_each_piece(bytes, [&](size_t off, int n) {
    check(MPI_Send(p + off, n, MPI_BYTE, to, tag, MPI_COMM_WORLD), "send", to, tag);
  });
}

void receive(void* data, size_t bytes, int from, int tag) {
  auto* p = static_cast<char*>(data);
  for_each_piece(bytes, [&](size_t off, int n) {
    check(MPI_Recv(p + off, n, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "receive",
          from, tag);
  });
}

struct PostedReceive::Requests {
  std::vector<MPI_Request> all;
};

PostedReceive::PostedReceive(void* data, size_t bytes, int from, int tag)
    : requests_(std::make_unique<Requests>()), from_(from), tag_(tag) {
  auto* p = static_cast<char*>(data);
  for_each_piece(bytes, [&](size_t off, int n) {
    MPI_Request r;
    check(MPI_Irecv(p + off, n, MPI_BYTE, from, tag, MPI_COMM_WORLD, &r), "posting a receive", from,
          tag);
    requests_->all.push_back(r);
  });
}

void PostedReceive::wait() {
  check(MPI_Waitall(static_cast<int>(requests_->all.size()), requests_->all.data(),
                    MPI_STATUSES_IGNORE),
        "receive", from_, tag_);
  requests_->all.clear();
}

PostedReceive::~PostedReceive() {
  for (MPI_Request& r : requests_->all) {  // never waited for (a launch before it failed)
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
}

#else

[[noreturn]] static void no_mpi() {
  throw TensorError("tinyrw was built without MPI: no transfers between processes");
}
void send(const void*, size_t, int, int) { no_mpi(); }
void receive(void*, size_t, int, int) { no_mpi(); }
struct PostedReceive::Requests {};
PostedReceive::PostedReceive(void*, size_t, int from, int tag) : from_(from), tag_(tag) {
  no_mpi();
}
void PostedReceive::wait() { no_mpi(); }
PostedReceive::~PostedReceive() = default;

#endif

}  // namespace tinyrw::mpi
