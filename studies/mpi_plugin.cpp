// The Open MPI calls of a sweep, in a plugin (libservesim_mpi.so beside build/servesim) that
// SweepRanks loads only when mpirun started the process: linking Open MPI into servesim itself
// doubled the start-up time of every command (12 -> 23 ms for `servesim --help`), which screening
// loops that start servesim per hypothesis would pay. A small C interface, so nothing C++ crosses
// the dlopen boundary.
#include <mpi.h>

#include <cstdint>

namespace {
constexpr int kRecordTag = 17;
MPI_Status g_probed;  // the message the last successful probe found (rank 0's receive path)
}  // namespace

extern "C" {

// 0 on success; 1 when the MPI library cannot serve several threads one at a time.
int servesim_mpi_init(int* rank, int* size) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED) return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return 0;
}

void servesim_mpi_finalize() {
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
}

void servesim_mpi_bcast_count(std::int64_t* n) { MPI_Bcast(n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD); }

void servesim_mpi_bcast(std::int64_t* values, std::int64_t n) {
  MPI_Bcast(values, static_cast<int>(n), MPI_INT64_T, 0, MPI_COMM_WORLD);
}

void servesim_mpi_send(const char* data, std::int64_t n) {
  MPI_Send(data, static_cast<int>(n), MPI_CHAR, 0, kRecordTag, MPI_COMM_WORLD);
}

// The size of a record waiting for rank 0, or -1 when none has arrived.
std::int64_t servesim_mpi_probe() {
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, kRecordTag, MPI_COMM_WORLD, &flag, &g_probed);
  if (!flag) return -1;
  int count = 0;
  MPI_Get_count(&g_probed, MPI_CHAR, &count);
  return count;
}

// Receives the record the last probe found.
void servesim_mpi_recv(char* data, std::int64_t n) {
  MPI_Recv(data, static_cast<int>(n), MPI_CHAR, g_probed.MPI_SOURCE, kRecordTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

}  // extern "C"
