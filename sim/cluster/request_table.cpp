#include "sim/cluster/request_table.h"

namespace servesim::cluster {

RequestId RequestTable::add(const RequestState& s, const Journey& j, const workloads::Request& in,
                            const PrefixKeys& keys) {
  const RequestId r = add(s);
  RequestState& state = states_[r.value];
  if (free_journeys_.empty()) {
    state.journey = journeys_.push_back(j);
  } else {
    state.journey = free_journeys_.back();
    free_journeys_.pop_back();
    journeys_[state.journey] = j;
  }
  if (keep_inputs_) inputs_.push_back(in);
  if (keep_prefix_keys_) [[unlikely]]
    prefix_keys_.push_back(keys);
  return r;
}

void RequestTable::release_journey(RequestId r) {
  RequestState& s = states_[r.value];
  SERVESIM_CHECK(s.journey != kNoJourney);
  free_journeys_.push_back(s.journey);
  s.journey = kNoJourney;
}

}  // namespace servesim::cluster
