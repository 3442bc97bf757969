#include "sim/cli/sweep_ranks.h"

#include <cstdlib>
#include <stdexcept>

#ifdef SERVESIM_HAVE_MPI
#include <mpi.h>
#endif

namespace servesim::app {
namespace {
#ifdef SERVESIM_HAVE_MPI
constexpr int kRecordTag = 17;

// mpirun (Open MPI's, or another PMI launcher) marks the processes it starts.
bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}
#endif
}  // namespace

bool SweepRanks::built_with_mpi() {
#ifdef SERVESIM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

SweepRanks::SweepRanks() {
#ifdef SERVESIM_HAVE_MPI
  if (!launched_by_mpirun()) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
      throw std::runtime_error("this MPI library does not allow calls from several threads");
    }
  }
  mpi_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
#endif
}

SweepRanks::~SweepRanks() {
#ifdef SERVESIM_HAVE_MPI
  if (mpi_) {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
  }
#endif
}

void SweepRanks::broadcast(std::vector<std::int64_t>& values) {
#ifdef SERVESIM_HAVE_MPI
  if (!mpi_) return;
  long long n = static_cast<long long>(values.size());
  MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  values.resize(static_cast<std::size_t>(n));
  if (n > 0) MPI_Bcast(values.data(), static_cast<int>(n), MPI_INT64_T, 0, MPI_COMM_WORLD);
#else
  (void)values;
#endif
}

void SweepRanks::send_to_root(const std::string& record) {
#ifdef SERVESIM_HAVE_MPI
  MPI_Send(record.data(), static_cast<int>(record.size()), MPI_CHAR, 0, kRecordTag, MPI_COMM_WORLD);
#else
  (void)record;
  throw std::logic_error("send_to_root without MPI");
#endif
}

bool SweepRanks::try_receive(std::string& record) {
#ifdef SERVESIM_HAVE_MPI
  if (!mpi_) return false;
  int flag = 0;
  MPI_Status status;
  MPI_Iprobe(MPI_ANY_SOURCE, kRecordTag, MPI_COMM_WORLD, &flag, &status);
  if (!flag) return false;
  int count = 0;
  MPI_Get_count(&status, MPI_CHAR, &count);
  record.assign(static_cast<std::size_t>(count), '\0');
  MPI_Recv(record.data(), count, MPI_CHAR, status.MPI_SOURCE, kRecordTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return true;
#else
  (void)record;
  return false;
#endif
}

}  // namespace servesim::app
