// The processes of a sweep: one, or several under Open MPI (`mpirun -np N servesim sweep ...`).
//
// Built with MPI (CMake option SERVESIM_MPI, on when Open MPI is found) and started by mpirun,
// it loads the MPI plugin (studies/mpi_plugin.cpp, libservesim_mpi.so beside the binary) and
// initialises MPI (thread level "serialized": any thread may call, one at a time, under the
// sweep's lock); otherwise it is a single rank and never touches MPI, so servesim does not load
// Open MPI at all outside mpirun. Started by mpirun with several processes but built without MPI,
// it refuses (every process would run the whole sweep). Rank 0 owns the journal and the outputs;
// the others send it each finished record as one message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace servesim::studies {

class SweepRanks {
 public:
  SweepRanks();
  ~SweepRanks();
  SweepRanks(const SweepRanks&) = delete;
  SweepRanks& operator=(const SweepRanks&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  static bool built_with_mpi();

  // Rank 0's values to every rank (the others' `values` are replaced).
  void broadcast(std::vector<std::int64_t>& values);
  // From a rank > 0 to rank 0.
  void send_to_root(const std::string& record);
  // On rank 0: one record from another rank if one has arrived (non-blocking).
  bool try_receive(std::string& record);

 private:
  struct Mpi;  // the plugin's entry points
  int rank_ = 0, size_ = 1;
  std::unique_ptr<Mpi> mpi_;
};

}  // namespace servesim::studies
