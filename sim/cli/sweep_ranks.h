// The processes of a sweep: one, or several under Open MPI (`mpirun -np N servesim sweep ...`).
//
// Built with MPI (CMake option SERVESIM_MPI, on when Open MPI is found) and started by mpirun,
// it initialises MPI (thread level "serialized": any thread may call, one at a time, under the
// sweep's lock); otherwise it is a single rank and never touches MPI, so a plain `servesim sweep`
// needs no MPI at run time. Rank 0 owns the journal and the outputs; the others send it each
// finished record as one message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace servesim::app {

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
  int rank_ = 0, size_ = 1;
  bool mpi_ = false;
};

}  // namespace servesim::app
