// Processes beyond one (MPI). Started by mpirun, every process (rank) runs the same program and
// owns some of the devices: device index i (CPU:i, INTERP:i; CPU is CPU:0) belongs to rank
// i % ranks. A process runs the launches of its own devices only; a copy from one rank's device
// to another's is a send on one and a receive on the other (the same schedule on every rank pairs
// them by their place in it). Without MPI at build time, or outside mpirun, there is one process
// and it owns every device.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

namespace tinyrw::mpi {

// Whether this build has MPI (Debian's libopenmpi-dev, found at configure time).
bool built_with_mpi();

// This process's rank and the rank count: {0, 1} outside mpirun. Under mpirun MPI is started on
// first use (MPI_THREAD_MULTIPLE: the device queues send and receive from their own threads) and
// finished at exit. A build without MPI started by mpirun raises, saying so.
struct World {
  int rank = 0;
  int size = 1;
  int max_tag = 0;  // the largest message tag (MPI_TAG_UB): a transfer's tag is its schedule place
};
const World& world();

// The rank that owns canonical device `device` (runtime/device.h).
int owner(std::string_view device);
inline bool is_local(std::string_view device) { return owner(device) == world().rank; }

// Blocking point-to-point transfers of `bytes` bytes (any size; sent in pieces MPI's int counts
// hold). Errors raise a TensorError naming the peer and the tag.
void send(const void* data, size_t bytes, int to, int tag);
void receive(void* data, size_t bytes, int from, int tag);

// A receive posted now and completed by wait() (or abandoned, cancelled, by the destructor): the
// buffer fills whenever the sender gets there, so no send ever waits on a receive not yet posted.
class PostedReceive {
 public:
  PostedReceive(void* data, size_t bytes, int from, int tag);
  ~PostedReceive();
  PostedReceive(const PostedReceive&) = delete;
  PostedReceive& operator=(const PostedReceive&) = delete;
  void wait();

 private:
  struct Requests;
  std::unique_ptr<Requests> requests_;
  int from_, tag_;
};

}  // namespace tinyrw::mpi
