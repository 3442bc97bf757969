#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "calibrate/profile.h"
#include "test_files.h"
#include "tests/approx.h"

using namespace servesim;
using namespace servesim::calibrate;
using calibrate_test::input_errors;
using calibrate_test::TempFile;

namespace {

Profile sample() {
  Profile p;
  p.chip = "h200-sxm";
  p.engine = "trtllm";
  p.created = "2026-11-30";
  p.generator = "servesim calibrate 0.1.0";
  p.notes = {"first look", "true"};  // a note that looks like a boolean stays a string
  p.sources.push_back({"calibrate/data/aiconfigurator/h200_sxm/gemm_perf.csv.gz", "aiconfigurator", 100668,
                       "ai-dynamo/aiconfigurator@095f58a", "2026-08", "fnv1a64:0123456789abcdef"});
  ProfileEntry e;
  e.op = MeasuredOp::gemm;
  e.format = Format::bf16;
  e.cost_model = "roofline";
  e.scalars = {{"overhead_s", 3.19e-6}, {"e_memory", 0.1 + 0.2}};  // 0.30000000000000004 survives
  e.curves.push_back({"e_compute", Dim::m, {1, 16, 4096}, {0.05, 0.31, 0.75}});
  e.tables.push_back({"latency",
                      {GridAxis{Dim::m, {1, 16}}, GridAxis{Dim::n, {1024, 4096, 8192}}},
                      {1e-6, 2e-6, 3e-6, 4e-6, 5e-6, 1.23456e-5},
                      Extrapolation::clamp});
  p.entries.push_back(e);
  ProfileEntry a;  // an attention table with its match conditions and KV format
  a.op = MeasuredOp::attention_decode;
  a.format = Format::bf16;
  a.cost_model = "table";
  ProfileTable at{"latency", {GridAxis{Dim::batch, {1, 16}}, GridAxis{Dim::kv_len, {1023}}}, {1e-5, 2e-5}};
  at.match = {{Dim::head_dim, 128}, {Dim::window, 0}};
  at.kv_format = Format::fp8;
  a.tables.push_back(at);
  p.entries.push_back(a);
  p.errors.chip = p.chip;
  p.errors.cost_model = "roofline";
  p.errors.held_out = "5 folds of whole shapes";
  p.errors.cells.push_back({"gemm", "bf16", "all", {35700, 0.087, 0.274, -0.024}, true});
  p.errors.cells.push_back({"attention_decode", "fp16", "all", {10240, 0.09, 0.2, 0.01}, false});
  return p;
}

std::string to_text(const Profile& p) {
  std::ostringstream out;
  write_profile(out, p);
  return out.str();
}

}  // namespace

TEST_CASE("Profile: write, read back, write again gives the same bytes") {
  const Profile p = sample();
  const std::string first = to_text(p);
  // The error table leads the file as comments.
  CHECK(first.rfind("# servesim hardware profile: h200-sxm\n# Cross-validated error (5 folds of whole shapes):\n", 0) ==
        0);
  CHECK(first.find("#   gemm                 bf16             all") != std::string::npos);
  CHECK(first.find("(in-sample)") != std::string::npos);
  // Table times are written in microseconds to 4 significant digits (12.3456 us -> 12.35).
  CHECK(first.find("microseconds: [1, 2, 3, 4, 5, 12.35]") != std::string::npos);
  CHECK(first.find("\nengine: \"trtllm\"\n") != std::string::npos);
  CHECK(first.find("transferred_from") == std::string::npos);  // only where there is one
  const TempFile f("profile.yaml", first);
  const Profile q = read_profile(f.path());
  CHECK(q.chip == "h200-sxm");
  CHECK(q.engine == "trtllm");
  CHECK(q.notes == p.notes);
  REQUIRE(q.sources.size() == 1);
  CHECK(q.sources[0].rows == 100668);
  CHECK(q.sources[0].content_hash == "fnv1a64:0123456789abcdef");
  REQUIRE(q.entries.size() == 2);
  REQUIRE(q.entries[1].tables.size() == 1);
  CHECK(q.entries[1].tables[0].match ==
        std::vector<std::pair<Dim, std::int64_t>>{{Dim::head_dim, 128}, {Dim::window, 0}});
  CHECK(q.entries[1].tables[0].kv_format == Format::fp8);
  const ProfileEntry& e = q.entries[0];
  CHECK(e.op == MeasuredOp::gemm);
  CHECK(e.format == Format::bf16);
  REQUIRE(e.scalars.size() == 2);
  CHECK(e.scalars[1].second == 0.1 + 0.2);  // exactly: shortest round-trip numbers
  REQUIRE(e.curves.size() == 1);
  CHECK(e.curves[0].axis == Dim::m);
  CHECK(e.curves[0].values == std::vector<double>{0.05, 0.31, 0.75});
  REQUIRE(e.tables.size() == 1);
  CHECK(e.tables[0].axes[1].knots == std::vector<double>{1024, 4096, 8192});
  REQUIRE(e.tables[0].seconds.size() == 6);
  CHECK(e.tables[0].seconds[5] == approx(12.35e-6));
  CHECK(e.tables[0].extrapolation == Extrapolation::clamp);
  REQUIRE(q.errors.cells.size() == 2);
  CHECK(q.errors.cells[0].error.rows == 35700);
  CHECK(q.errors.cells[0].held_out);
  CHECK(!q.errors.cells[1].held_out);
  CHECK(q.errors.cells[0].error.signed_mean == -0.024);
  CHECK(to_text(q) == first);
}

TEST_CASE("Profile: a malformed file lists every problem with line, column and key path") {
  // Line 2: schema from the future. Line 6: "entris" instead of "entries" (and so entries is
  // missing, reported at the document's start). Line 12: a curve with more knots than values.
  const std::string text =
      "# comment\n"
      "schema: servesim.profile/2\n"
      "chip: h200-sxm\n"
      "sources:\n"
      "  - {path: a.csv, reader: aiconfigurator, rows: 10}\n"
      "entris: []\n"
      "errors: {cells: []}\n";
  const TempFile f("bad_profile.yaml", text);
  auto ds = input_errors([&] { read_profile(f.path()); });
  REQUIRE(ds.size() == 3);
  CHECK(ds[0].to_string() == f.path() + ":6:1: entris: unknown key 'entris' (did you mean 'entries'?)");
  CHECK(ds[1].to_string() == f.path() + ":2:1: missing key 'entries'");
  CHECK(ds[2].to_string() == f.path() + ":2:9: schema: expected 'servesim.profile/1', found 'servesim.profile/2'");

  const std::string entries =
      "schema: servesim.profile/1\n"
      "chip: h200-sxm\n"
      "sources: []\n"
      "entries:\n"
      "  - op: gemn\n"
      "    format: bf16\n"
      "    cost_model: roofline\n"
      "    scalars: {overhead_s: fast}\n"
      "    curves:\n"
      "      - {name: e, axis: m, knots: [1, 16], values: [0.5]}\n"
      "    tables:\n"
      "      - {name: t, axes: [{field: m, knots: [1, 2]}], seconds: [1e-6, 2e-6, 3e-6]}\n"
      "errors: {cells: []}\n";
  const TempFile g("bad_entries.yaml", entries);
  ds = input_errors([&] { read_profile(g.path()); });
  REQUIRE(ds.size() == 4);
  CHECK(ds[0].to_string() == g.path() + ":5:9: entries[0].op: unknown operator kind 'gemn' (did you mean 'gemm'?)");
  CHECK(ds[1].to_string() == g.path() + ":8:27: entries[0].scalars.overhead_s: expected a finite number");
  CHECK(ds[2].to_string() ==
        g.path() + ":10:9: entries[0].curves[0]: a curve needs as many values as knots, and at least one");
  CHECK(ds[3].to_string() ==
        g.path() + ":12:63: entries[0].tables[0].seconds: expected 2 values (the product of the axis sizes), found 3");
}

TEST_CASE("Profile: unreadable files") {
  auto ds = input_errors([&] { read_profile("/nonexistent/profile.yaml"); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].message == "cannot open the profile: No such file or directory");
  const TempFile f("not_yaml.yaml", "chip: [unclosed\n");
  ds = input_errors([&] { read_profile(f.path()); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].message.rfind("not valid YAML", 0) == 0);
}

TEST_CASE("content_hash: FNV-1a 64 of the bytes") {
  // FNV-1a 64 of the empty input is the offset basis; of "a" it is 0xaf63dc4c8601ec8c (the
  // published test vector).
  const TempFile empty("empty.bin", "");
  CHECK(content_hash(empty.path()) == "fnv1a64:cbf29ce484222325");
  const TempFile a("a.bin", "a");
  CHECK(content_hash(a.path()) == "fnv1a64:af63dc4c8601ec8c");
}

TEST_CASE("Profile: a table of roofline factors round-trips and needs exactly one value list") {
  Profile p = sample();
  ProfileEntry m;
  m.op = MeasuredOp::moe;
  m.format = Format::fp8_block;
  m.cost_model = "table";
  ProfileTable t{"latency", {GridAxis{Dim::m, {1, 16}}}, {0.8, 1.25}};
  t.roofline_factor = true;
  m.tables.push_back(t);
  p.entries.push_back(m);
  const std::string text = to_text(p);
  CHECK(text.find("roofline_factor: [0.8, 1.25]") != std::string::npos);
  const TempFile f("factor_profile.yaml", text);
  const Profile q = read_profile(f.path());
  REQUIRE(q.entries.size() == 3);
  REQUIRE(q.entries[2].tables.size() == 1);
  CHECK(q.entries[2].tables[0].roofline_factor);
  CHECK(q.entries[2].tables[0].seconds == std::vector<double>{0.8, 1.25});
  CHECK(!q.entries[0].tables[0].roofline_factor);
  CHECK(to_text(q) == text);

  // Line 8: both value lists; line 9: neither; line 10: a factor that is not positive. The table
  // maps open at column 9 (after "      - "); its roofline_factor list opens at column 71 on line 10.
  const std::string bad =
      "schema: servesim.profile/1\n"
      "chip: h200-sxm\n"
      "sources: []\n"
      "entries:\n"
      "  - op: moe\n"
      "    format: fp8_block\n"
      "    tables:\n"
      "      - {name: t, axes: [{field: m, knots: [1, 2]}], seconds: [1, 2], roofline_factor: [1, 2]}\n"
      "      - {name: t, axes: [{field: m, knots: [1, 2]}]}\n"
      "      - {name: t, axes: [{field: m, knots: [1, 2]}], roofline_factor: [1, 0]}\n"
      "    cost_model: table\n"
      "errors: {cells: []}\n";
  const TempFile g("bad_factor.yaml", bad);
  const auto ds = input_errors([&] { read_profile(g.path()); });
  REQUIRE(ds.size() == 3);
  CHECK(ds[0].to_string() == g.path() +
                                 ":8:9: entries[0].tables[0]: a table needs exactly one of microseconds[], seconds[] "
                                 "and roofline_factor[]");
  CHECK(ds[1].to_string() == g.path() +
                                 ":9:9: entries[0].tables[1]: a table needs exactly one of microseconds[], seconds[] "
                                 "and roofline_factor[]");
  CHECK(ds[2].to_string() ==
        g.path() + ":10:71: entries[0].tables[2].roofline_factor: roofline factors must be positive");
}

TEST_CASE("Profile: a transferred profile names the chip whose kernels were measured") {
  Profile p = sample();
  p.chip = "ascend-910c";
  p.engine.clear();
  p.transferred_from = "h100-sxm";
  const std::string text = to_text(p);
  CHECK(text.find("\ntransferred_from: \"h100-sxm\"\n") != std::string::npos);
  CHECK(text.find("\nengine:") == std::string::npos);
  const TempFile f("transferred.yaml", text);
  const Profile q = read_profile(f.path());
  CHECK(q.transferred_from == "h100-sxm");
  CHECK(q.engine.empty());
  CHECK(to_text(q) == text);
}
