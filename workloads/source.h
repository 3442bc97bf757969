// RequestSource: the one object through which requests enter a simulation.
//
// The source is driven by the serving model through arrival streams. Each open-loop class has
// one stream; each closed-loop client and each open-loop session in progress has its own. The
// serving model schedules an event per Arrival the source hands out, calls take() when it fires,
// and tells the source when a request got its first token and when it finished (completed or
// rejected); the source answers with the arrivals that follow (the stream's next open-loop
// arrival, a client's next request after its think time, a session's next turn, the next client
// of a staggered start). Without a serving model (workload stats, benchmarks), drive() plays the
// same protocol with zero service time.
//
// Stream ids: closed-loop clients and session slots count up from 0 (clients first, in class
// order); open-loop class k's stream is kOpenStream - k, counting down from 0xffffffff, so a
// single open-loop class keeps the id the serving model's fingerprint used before classes.
// Limits: the workload's and each class's request count, and the end time; an arrival past any of
// them is never handed out, and its stream ends. A request counts against the limits when its
// arrival is handed out (scheduled), not when it arrives: with several streams, the last requests
// under a limit are those scheduled first (an open-loop stream schedules one arrival ahead).
// Memory: O(classes + clients + sessions in progress + ids of unfinished requests); a trace is
// read as it is replayed, never held.
// Hash ids are namespaced per class (class id in the top 16 bits), and shifted by
// pass x (max id + 1) on later passes of a looped trace with fresh prefixes, so two classes or two
// passes never share blocks by accident.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/time.h"
#include "workloads/id_ring.h"
#include "workloads/request.h"
#include "workloads/workload.h"

namespace servesim::workloads {

inline constexpr std::uint32_t kOpenStream = 0xffffffffu;

struct Arrival {
  SimTime time;
  std::uint32_t stream;
};

// The draws of recent runs' deterministic streams (open-loop arrival times, independent
// lengths), kept so that the next source on the same streams replays them instead of drawing:
// the same values in the same order, so results never depend on it. A session that runs many
// hypotheses on one workload (serve, sweep, plan) owns one and hands it to each source; the last
// 8 streams of each kind within 64 MiB are kept. Thread-safe.
class DrawCache {
 public:
  DrawCache();
  ~DrawCache();
  DrawCache(const DrawCache&) = delete;
  DrawCache& operator=(const DrawCache&) = delete;

 private:
  friend class RequestSource;
  struct Kept;
  std::unique_ptr<Kept> kept_;
};

class RequestSource {
 public:
  // The config must have passed the scenario loader's validation (replays carry their scan).
  // `draws`, when given, replays the kept draws of earlier sources and keeps this one's.
  RequestSource(const WorkloadConfig& config, std::uint64_t seed, SimTime end = SimTime::never(),
                DrawCache* draws = nullptr);
  ~RequestSource();
  RequestSource(const RequestSource&) = delete;
  RequestSource& operator=(const RequestSource&) = delete;

  // The arrivals known before anything has run, in the order to schedule them.
  void start(std::vector<Arrival>& out);
  // The request arriving now on `stream` (an arrival handed out earlier); appends the stream's
  // next open-loop arrival, if any.
  Request take(std::uint32_t stream, SimTime now, std::vector<Arrival>& out);
  // r got its first token now (only needed when wants_first_token()).
  void first_token(const Request& r, SimTime now, std::vector<Arrival>& out);
  // The serving model is done with r (completed, or rejected when !completed): its ids are
  // released, and what follows it is appended. (Inline: most requests of most workloads are
  // open-loop requests without ids, which leave nothing to do.)
  void finished(const Request& r, SimTime now, bool completed, std::vector<Arrival>& out) {
    if (r.extra == IdRing::kNoHandle && r.stream >= slots_.size()) return;
    follow_up(r, now, completed, out);
  }

  const std::uint64_t* hash_ids(const Request& r) const;    // r.hash_ids words; valid until finished
  ImageSize image(const Request& r, std::size_t i) const;   // i < r.images; valid until finished
  std::int64_t block_tokens(std::uint16_t class_id) const;  // tokens per hash id
  bool wants_first_token() const { return wants_first_token_; }
  // True when every request is just its class, lengths and stream (no prefixes, images, sessions
  // or replayed traces): finished() then needs no more than r.stream and r.class_id.
  bool plain() const { return plain_; }
  std::int64_t issued() const { return issued_; }
  // Draws replayed from an earlier source's (arrival times and lengths of open-loop classes with
  // independent lengths: the streams are functions of config, seed and stream name, and the last
  // few are kept in the session's DrawCache; replays give the values drawing would).
  std::int64_t replayed_draws() const;
  const WorkloadConfig& config() const { return config_; }
  const IdRing& ids() const { return ring_; }

 private:
  struct Class;
  struct Slot {
    std::uint16_t cls = 0;
    bool closed = false;         // a closed-loop client (else an open-loop session slot)
    bool released_next = false;  // staggered start: the next client was let go
    bool continue_session = false;
    std::uint32_t turn = 0, turns = 0;  // 0 = no session in progress
    std::uint64_t session = kNoId64;
    std::uint32_t prefix_id = kNoId32, prefix_tokens = 0;
    std::uint64_t context = 0;  // prompt + output of the latest turn
  };

  void follow_up(const Request& r, SimTime now, bool completed, std::vector<Arrival>& out);
  bool promise(Class& c, SimTime t);
  Request fresh(Class& c, std::uint32_t stream, Slot* slot);
  Request next_turn(Class& c, Slot& s, std::uint32_t stream);
  void add_images(Class& c, Request& r, std::vector<std::uint64_t>& words);
  std::uint32_t session_slot(std::uint16_t cls);
  void after(Class& c, std::uint32_t stream, SimTime at, std::vector<Arrival>& out);

  WorkloadConfig config_;
  SimTime end_;
  std::vector<std::unique_ptr<Class>> classes_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;  // session slots to reuse, most recent last
  IdRing ring_;
  std::vector<std::uint64_t> words_;  // scratch for one request's ids
  std::int64_t issued_ = 0;
  bool wants_first_token_ = false;
  bool plain_ = true;
};

// Plays the source's protocol without a serving model: every request is finished (completed)
// the instant it arrives, so a closed-loop client's next request or a session's next turn
// follows its predecessor's arrival by the think time. Calls `visit` with each request in arrival
// order (ties in the order they were handed out) and the source, which resolves its ids during
// the call. Stops after `max_requests` (0 = no limit) or when the source runs dry.
std::int64_t drive(RequestSource& source, std::int64_t max_requests,
                   const std::function<void(const Request&, const RequestSource&)>& visit);

}  // namespace servesim::workloads
