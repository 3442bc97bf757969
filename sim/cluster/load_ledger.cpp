#include "sim/cluster/load_ledger.h"

#include "sim/cluster/request_state.h"

namespace servesim::cluster {

LoadLedger::LoadLedger(std::uint32_t instances, LoadUnit unit, bool ordered)
    : unit_(unit),
      ordered_(ordered),
      tree_(ordered ? instances : 0),
      loads_(ordered ? 0 : instances, 0),
      down_(instances, 0) {}

void LoadLedger::set_up(std::uint32_t i, bool up) {
  if (down_[i] == !up) return;
  down_[i] = !up;
  if (up)
    --down_count_;
  else
    ++down_count_;
  if (ordered_) tree_.set(i, tree_.value(i) + (up ? -kDown : kDown));
}

std::uint32_t LoadLedger::least_from(std::size_t cursor) const {
  const std::size_t i = tree_.argmin_from(cursor);
  if (down_[i]) return kNoInstance;  // the least loaded is down: all are
  return static_cast<std::uint32_t>(i);
}

}  // namespace servesim::cluster
