#include "sim/cluster/run_observer.h"

#include <array>
#include <string>

namespace servesim::cluster {

void RunObserver::note_gauges(std::uint32_t instance, const Lane& lane, SimTime t) {
  const Gauges after = gauges(lane);
  series_->gauges_changed(pool_of_[instance], t, after.waiting - before_.waiting, after.running - before_.running,
                          after.kv_blocks - before_.kv_blocks);
}

void RunObserver::record(const metrics::TraceSpan& span) {
  if (trace_->wants(SimTime::from_ps(span.start_ps))) trace_->record(span);
}

void RunObserver::run_step(PoolId pool, std::uint32_t local, const Batch& batch, SimTime end,
                           std::int64_t kv_blocks_taken, SimTime next_end) {
  if (series_) {
    series_->output_tokens(pool, end, batch.decodes);
    series_->gauges_changed(pool, end, 0, 0, kv_blocks_taken);
  }
  if (trace_) record(batch_span(pool, local, 0, end, next_end, batch, 0));
}

void RunObserver::publish(std::uint64_t events, SimTime now, std::int64_t issued) {
  progress_->now_ps.store(now.ps(), std::memory_order_relaxed);
  progress_->arrivals.store(issued, std::memory_order_relaxed);
  progress_->events.store(static_cast<std::int64_t>(events), std::memory_order_relaxed);
}

void RunObserver::finish(SimTime end, topologies::FlowNetwork* net, const topologies::Fabric* fabric,
                         double flow_copies) {
  if (series_ && net) [[unlikely]]
    record_link_usage(*net, *fabric, end, flow_copies);
  if (series_) series_->finish(end);
  if (trace_) trace_->finish();
  recorder_.run_ended();
}

void RunObserver::record_link_usage(topologies::FlowNetwork& net, const topologies::Fabric& fabric, SimTime end,
                                    double flow_copies) {
  // The flow network's bytes per link class over time (its own bins), as one time-series link
  // per class with the class's total capacity: what the report's busiest links show.
  net.account_until(end);
  std::array<double, static_cast<std::size_t>(topologies::LinkClass::kCount)> capacity{};
  for (std::size_t l = 0; l < fabric.link_count(); ++l) {
    const topologies::Link& link = fabric.link(topologies::LinkId(static_cast<std::uint32_t>(l)));
    capacity[static_cast<std::size_t>(link.link_class)] += link.bandwidth_bytes_per_s;
  }
  for (std::size_t c = 0; c < capacity.size(); ++c) {
    const auto cls = static_cast<topologies::LinkClass>(c);
    const topologies::LinkUsageSeries& u = net.class_usage(cls);
    if (capacity[c] <= 0 || u.bytes.empty()) continue;
    const std::uint32_t id =
        series_->add_link(std::string(topologies::link_class_name(cls)) + " links (all)", capacity[c]);
    for (std::size_t b = 0; b < u.bytes.size(); ++b) {
      const SimTime from = SimTime::zero() + Duration::picoseconds(u.bin.ps() * static_cast<std::int64_t>(b));
      if (from >= end) break;
      const SimTime to = std::min(end, from + u.bin);
      // One flow per transfer stood for flow_copies rank pairs on links of the same classes.
      if (u.bytes[b] > 0) series_->link_bytes(id, from, to, u.bytes[b] * flow_copies);
    }
  }
}

}  // namespace servesim::cluster
