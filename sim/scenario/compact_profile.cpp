#include "sim/scenario/compact_profile.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace servesim::scenario {
namespace {

using Json = nlohmann::json;

template <class E>
int as_int(E e) {
  return static_cast<int>(e);
}
template <class E>
E as_enum(const Json& j) {
  return static_cast<E>(j.get<int>());
}

// The values as little-endian float64, whatever the byte order of the machine that writes them.
std::vector<std::uint8_t> little_endian(const std::vector<double>& values) {
  std::vector<std::uint8_t> out(values.size() * sizeof(double));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto bits = std::bit_cast<std::uint64_t>(values[i]);
    for (std::size_t b = 0; b < sizeof(double); ++b) {
      out[i * sizeof(double) + b] = static_cast<std::uint8_t>(bits >> (8 * b));
    }
  }
  return out;
}

std::vector<double> from_little_endian(const std::vector<std::uint8_t>& bytes) {
  if (bytes.size() % sizeof(double) != 0) throw std::runtime_error("a value list is cut short");
  std::vector<double> out(bytes.size() / sizeof(double));
  if constexpr (std::endian::native == std::endian::little) {
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  } else {
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::uint64_t bits = 0;
      for (std::size_t b = 0; b < sizeof(double); ++b) bits |= std::uint64_t{bytes[i * sizeof(double) + b]} << (8 * b);
      out[i] = std::bit_cast<double>(bits);
    }
  }
  return out;
}

}  // namespace

std::vector<double> log_table_values(const TableValues& values) {
  std::vector<double> out;
  out.reserve(values.numbers.size());
  for (const double v : values.numbers) out.push_back(std::log(v * values.unit));
  return out;
}

std::string write_compact_profile(const CompactProfile& p) {
  if (!p.from_yaml && p.values.size() != p.tables.log_grids.size()) {
    throw std::logic_error("write_compact_profile: one value list per grid");
  }
  if (p.from_yaml) {
    const std::vector<std::uint8_t> bytes = Json::to_cbor(Json{{"format", kCompactProfileFormat}, {"from_yaml", true}});
    return {bytes.begin(), bytes.end()};
  }
  Json grids = Json::array();
  for (std::size_t i = 0; i < p.tables.log_grids.size(); ++i) {
    const models::MeasuredLogGrid& g = p.tables.log_grids[i];
    Json axes = Json::array();
    for (const auto& a : g.axes)
      axes.push_back({{"field", as_int(a.field)}, {"knots", a.knots}, {"extrapolate", a.extrapolate}});
    Json match = Json::array();
    for (const auto& [field, value] : g.match) match.push_back({as_int(field), value});
    grids.push_back({{"kind", as_int(g.kind)},
                     {"rate", as_int(g.rate)},
                     {"format", as_int(g.format)},
                     {"latent", g.latent},
                     {"recurrent", as_int(g.recurrent)},
                     {"roofline_factor", g.roofline_factor},
                     {"kv_bytes", g.kv_bytes},
                     {"axes", std::move(axes)},
                     {"match", std::move(match)},
                     {"unit", p.values[i].unit},
                     {"numbers", Json::binary(little_endian(p.values[i].numbers))}});
  }
  const Json doc = {{"format", kCompactProfileFormat}, {"head", p.head}, {"grids", std::move(grids)}};
  const std::vector<std::uint8_t> bytes = Json::to_cbor(doc);
  return {bytes.begin(), bytes.end()};
}

CompactProfile read_compact_profile(std::string_view bytes) {
  CompactProfile p;
  try {
    const Json doc = Json::from_cbor(bytes.begin(), bytes.end());
    if (!doc.is_object() || doc.value("format", "") != kCompactProfileFormat) {
      throw std::runtime_error("not of format " + std::string(kCompactProfileFormat));
    }
    if (doc.value("from_yaml", false)) {
      p.from_yaml = true;
      return p;
    }
    p.head = doc.at("head").get<std::string>();
    const Json& grids = doc.at("grids");
    p.tables.log_grids.reserve(grids.size());
    p.values.reserve(grids.size());
    for (const Json& j : grids) {
      models::MeasuredLogGrid g;
      g.kind = as_enum<models::OpKind>(j.at("kind"));
      g.rate = as_enum<models::ComputeRate>(j.at("rate"));
      g.format = as_enum<models::Format>(j.at("format"));
      g.latent = j.at("latent").get<bool>();
      g.recurrent = as_enum<models::Recurrence>(j.at("recurrent"));
      g.roofline_factor = j.at("roofline_factor").get<bool>();
      g.kv_bytes = j.at("kv_bytes").get<double>();
      for (const Json& a : j.at("axes")) {
        models::MeasuredLogGrid::Axis axis;
        axis.field = as_enum<models::MeasuredLogGrid::Field>(a.at("field"));
        axis.knots = a.at("knots").get<std::vector<double>>();
        axis.extrapolate = a.at("extrapolate").get<bool>();
        g.axes.push_back(std::move(axis));
      }
      for (const Json& m : j.at("match")) {
        g.match.emplace_back(as_enum<models::MeasuredLogGrid::Field>(m.at(0)), m.at(1).get<double>());
      }
      TableValues values{j.at("unit").get<double>(), from_little_endian(j.at("numbers").get_binary())};
      g.log_seconds = log_table_values(values);
      p.tables.log_grids.push_back(std::move(g));
      p.values.push_back(std::move(values));
    }
  } catch (const Json::exception& e) {
    throw std::runtime_error(std::string("compact profile: ") + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("compact profile: ") + e.what());
  }
  return p;
}

}  // namespace servesim::scenario
