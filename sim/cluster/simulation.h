// The serving model's event loop.
//
// One event per batch iteration (plus one per pipeline stage hand-off with pp > 1; decode runs
// carry several decode steps in one) and one per arrival: nothing per token. Disaggregated
// deployments add encode batches, flow completions on the cluster's network (image embeddings,
// KV caches) and the fault timeline. The loop takes the next event from the Agenda and hands it
// to the collaborators that own the state it concerns; they schedule their follow-up events
// rather than call each other, and where one's result is another's input (a batch's chunks that
// finished a prefill, a flow that completed a transfer) the handler passes it on:
//   Lifecycle      arrivals, first tokens, completions, rejections (the workload's source);
//   Admission      routing to an instance over the pool's LoadLedger;
//   Dispatcher     batch formation, pricing, pipeline booking, batch completion, encode batches;
//   DecodeRuns     several decode steps in one event;
//   Transfers      embeddings and KV caches between pools, decode placement;
//   Failures       faults and repairs;
//   RunObserver    every metric, time-series and trace hook.
// Set-up (pools, instances, lanes, cost models, routers) is Deployment's; the network, Network's.
// See sim/cluster/README.md.
//
// Invariants, CHECKed as the run goes: time never goes back; every request is in exactly one of
// waiting / prefilling / decoding / done; KV blocks in use never exceed a lane's capacity. With
// set_paranoid(true) every lane's aggregates are recomputed from scratch, and every load ledger
// recounted from the requests, after every event.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/check.h"
#include "sim/cluster/admission.h"
#include "sim/cluster/agenda.h"
#include "sim/cluster/config.h"
#include "sim/cluster/decode_runs.h"
#include "sim/cluster/deployment.h"
#include "sim/cluster/dispatch.h"
#include "sim/cluster/failures.h"
#include "sim/cluster/lifecycle.h"
#include "sim/cluster/network.h"
#include "sim/cluster/request_table.h"
#include "sim/cluster/run_budget.h"
#include "sim/cluster/run_observer.h"
#include "sim/cluster/transfers.h"
#include "sim/metrics/recorder.h"
#include "sim/metrics/settle_watch.h"
#include "workloads/source.h"

namespace servesim::cluster {

struct RunResult {
  SimTime end;               // the end of the measured window
  std::uint64_t events = 0;  // that happened: a batch end found stale is dropped uncounted
  bool reached_horizon = false;
  bool settled = false;       // stopped early: a rule of set_settle() settled (RunResult as at a horizon)
  std::uint64_t refiled = 0;  // decode runs' provisional ends filed again (not events; decode_runs.h)
  // A hash of the event stream: every event's time, type and ids, in order (an OMNeT++-style
  // fingerprint). Equal fingerprints mean the same simulation step by step; golden tests pin it.
  std::uint64_t fingerprint = 0;
};

class Simulation {
 public:
  // The config must have passed the scenario loader's validation (fits in memory, plans valid).
  Simulation(const SimulationConfig& config, metrics::Recorder& recorder);
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  RunResult run();
  void set_paranoid(bool on) { paranoid_ = on; }
  void set_progress(RunProgress* progress) { observer_.set_progress(progress); }
  // Stops the run early (RunResult as at a horizon) once the budget is exceeded (run_budget.h).
  void set_budget(RunBudget* budget) { budget_ = budget; }
  // Stops the run early once `watch` (the recorder given to the constructor, or one it passes
  // calls to) has a settled rule, checked every 256 events (sim/metrics/settle_watch.h).
  void set_settle(const metrics::SettleWatch* watch) { settle_ = watch; }

  // Read access for tests: every request's state, journey while in flight, and, when the
  // workload has identity beyond lengths and class (keeps_inputs()), the request as the source
  // made it (its hash ids and images are readable through source() until it finishes).
  const RequestTable& requests() const { return requests_; }
  const workloads::RequestSource& source() const { return *source_; }
  // Instance i's load as its pool's router sees it (load_ledger.h).
  std::int64_t instance_load(std::uint32_t i) const {
    const Pool& pool = deployment_.pool_of(i);
    return pool.load.load(pool.local(i));
  }
  const topologies::ClusterPlacement* placement() const { return deployment_.placement(); }
  bool instance_up(std::uint32_t i) const { return deployment_.instances()[i].up; }
  // Requests a failure hit, in the order it hit them.
  const std::vector<RequestId>& failed_requests() const { return failures_.hit(); }
  // True when no lane holds a request or a KV block other than its prefix cache's (every request
  // has left the cluster).
  bool drained() const;
  // How many TP rank pairs each transfer's single flow stands for (0: one flow per rank pair).
  int flow_ranks() const { return network_ ? network_->flow_ranks() : 0; }

 private:
  void handle(const RequestArrived& e);
  // Whether a BatchFinished still ends its batch (run() drops the others before they count).
  bool live(const BatchFinished& e) const;
  void handle(const BatchFinished& e);
  void handle(const StageFreed& e) { dispatch(e.instance); }
  void handle(const DispatchRequested& e);
  void handle(const EncodeFinished& e);
  void handle(const NetworkDue& e);
  void handle(const FaultOccurred& e);
  void handle(const InstanceRepaired& e);
  void handle(const KvSetupDone& e);
  // Instance i may start a batch now.
  void dispatch(std::uint32_t i);
  // Random faults are drawn up to the horizon, or this far when the run has none.
  static constexpr Duration kMaxFaultTime = Duration::milliseconds(86'400'000);
  // One event: the check context, the count and fingerprint, its handler, the progress display.
  void fire(const EventQueue<Event>::Entry& entry, RunResult& result);
  // The end of the window: decode runs settle, the observer closes, pool totals are recorded.
  void finish(RunResult& result);
  // Every lane's invariants, and every ledger against a recount of the requests (paranoid mode).
  void check_all() const;

  SimulationConfig config_;
  RunObserver observer_;
  Agenda agenda_;
  std::unique_ptr<workloads::RequestSource> source_;
  RequestTable requests_;
  std::unique_ptr<Network> network_;  // when the run moves data between instances or has faults
  Deployment deployment_;
  Lifecycle lifecycle_;
  Admission admission_;
  Transfers transfers_;
  DecodeRuns runs_;
  Dispatcher dispatcher_;
  Failures failures_;
  SimTime horizon_;
  CheckContext check_context_;
  bool paranoid_ = false;
  RunBudget* budget_ = nullptr;                   // set_budget
  const metrics::SettleWatch* settle_ = nullptr;  // set_settle
};

}  // namespace servesim::cluster
