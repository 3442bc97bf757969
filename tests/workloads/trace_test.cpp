// Streamed trace reading and replay: every format read exactly (times to the picosecond, lengths,
// hash ids, sessions), replay transformations (time and rate scaling, windows, loops), and bad
// input reported with file, line, column, key path and message (or skipped and counted).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/rng.h"
#include "tests/scratch.h"
#include "workloads/source.h"
#include "workloads/trace_reader.h"

using namespace servesim;
using namespace servesim::workloads;

namespace {

const std::string kTraces = SERVESIM_SOURCE_DIR "/workloads/traces/";
const std::string kData = SERVESIM_SOURCE_DIR "/tests/workloads/data/";
constexpr std::int64_t kS = 1'000'000'000'000;  // picoseconds per second

std::string write_temp(const std::string& name, const std::string& text) { return testing::scratch_file(name, text); }

struct Read {
  std::vector<TraceRow> rows;
  std::vector<std::vector<std::uint64_t>> ids;
  TraceFormat format;
};

Read read_all(const std::string& path, TraceFormat format = TraceFormat::kAuto) {
  TraceReader reader(path, format, "workload.arrivals");
  Read out;
  TraceRow row;
  std::vector<std::uint64_t> ids;
  while (reader.next(row, ids)) {
    out.rows.push_back(row);
    out.ids.push_back(ids);
  }
  out.format = reader.format();
  return out;
}

TraceReplay replay_of(const std::string& path) {
  TraceReplay t;
  t.path = path;
  return t;
}

WorkloadConfig replay_workload(TraceReplay t, std::int64_t requests = 0) {
  t.scan = std::make_shared<TraceScan>(scan_trace(t));
  ClassConfig c;
  c.arrivals = t;
  WorkloadConfig w;
  w.classes.push_back(c);
  w.requests = requests;
  return w;
}

struct Replayed {
  Request r;
  std::vector<std::uint64_t> ids;
};

std::vector<Replayed> replay(const WorkloadConfig& w, std::int64_t max = 0) {
  RequestSource source(w, 1);
  std::vector<Replayed> out;
  drive(source, max, [&](const Request& r, const RequestSource& s) {
    const std::uint64_t* ids = s.hash_ids(r);
    out.push_back({r, std::vector<std::uint64_t>(ids, ids + r.hash_ids)});
  });
  return out;
}

// The one diagnostic of a bad trace (the scan reports every problem; these files have one).
std::vector<Diagnostic> problems(const TraceReplay& t) {
  try {
    scan_trace(t);
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  FAIL("expected an InputError");
  return {};
}

void check_problem(const std::string& text, int line, int column, const std::string& path, const std::string& message,
                   const char* name = "bad.csv") {
  const std::string file = write_temp(name, text);
  const auto d = problems(replay_of(file));
  INFO(d.front().to_string());
  REQUIRE(d.size() == 1);
  CHECK(d[0].file == file);
  CHECK(d[0].line == line);
  CHECK(d[0].column == column);
  CHECK(d[0].path == path);
  CHECK(d[0].message == message);
}

}  // namespace

TEST_CASE("Trace reader: the shipped Splitwise trace replays its times and lengths exactly") {
  // Expected figures from the file by an independent parse (Python, decimal arithmetic, rounded
  // half up to the picosecond like the reader: the file has floats like 5.8926549999999995):
  //   rows = list(csv.DictReader(open('workloads/traces/splitwise_conv.csv')))
  //   ps = [int((Decimal(r['arrived_at']) * 10**12).to_integral_value(ROUND_HALF_UP)) for r in rows]
  //   len(rows) = 19366; ps[1] = 4314579000000; ps[5] = 6311529000000; ps[-1] = 3501721937000000;
  //   sum(ps) % 2**64 = 15026596311697448384; prompt sum 22361870, output sum 4088665.
  const auto w = replay_workload(replay_of(kTraces + "splitwise_conv.csv"));
  const auto got = replay(w);
  REQUIRE(got.size() == 19366);
  CHECK(got[0].r.arrival.ps() == 0);
  CHECK(got[1].r.arrival.ps() == 4'314'579'000'000);
  CHECK(got[5].r.arrival.ps() == 6'311'529'000'000);
  CHECK(got.back().r.arrival.ps() == 3'501'721'937'000'000);
  std::uint64_t sum = 0;
  std::int64_t prompt = 0, output = 0;
  for (const auto& x : got) {
    sum += static_cast<std::uint64_t>(x.r.arrival.ps());
    prompt += x.r.prompt_tokens;
    output += x.r.output_tokens;
  }
  CHECK(sum == 15026596311697448384ULL);
  CHECK(prompt == 22361870);
  CHECK(output == 4088665);
}

TEST_CASE("Trace reader: the shipped Azure 2023 trace replays relative to its first row") {
  // Python: t = [datetime.strptime(s[:19], '%Y-%m-%d %H:%M:%S') seconds x 10^12 + the 7 digits
  // padded to 12] over TIMESTAMP; rel = t - t[0]: sum(rel) % 2**64 = 15026596311697448384,
  // rel[1] = 4314579000000 (the same as Vidur's Splitwise copy above, once its floats are rounded
  // to the picosecond).
  const auto w = replay_workload(replay_of(kTraces + "azure_llm_2023_conv.csv"));
  CHECK(w.classes[0].arrivals.index() == 3);
  CHECK(std::get<TraceReplay>(w.classes[0].arrivals).scan->format == TraceFormat::kAzure);
  const auto got = replay(w);
  REQUIRE(got.size() == 19366);
  CHECK(got[1].r.arrival.ps() == 4'314'579'000'000);
  std::uint64_t sum = 0;
  for (const auto& x : got) sum += static_cast<std::uint64_t>(x.r.arrival.ps());
  CHECK(sum == 15026596311697448384ULL);
}

TEST_CASE("Trace reader: the shipped Mooncake trace replays times, lengths and hash ids") {
  // Python over the JSON lines: 12031 rows; sum(timestamp) x 10^9 % 2**64 = 3777882514290448384;
  // input sum 144793823, output sum 4122048; 288500 hash ids summing to 23407000830.
  const auto w = replay_workload(replay_of(kTraces + "mooncake_fast25_conversation_trace.jsonl"));
  const auto got = replay(w);
  REQUIRE(got.size() == 12031);
  std::uint64_t sum = 0, id_sum = 0, ids = 0;
  std::int64_t prompt = 0, output = 0;
  for (const auto& x : got) {
    sum += static_cast<std::uint64_t>(x.r.arrival.ps());
    prompt += x.r.prompt_tokens;
    output += x.r.output_tokens;
    ids += x.ids.size();
    for (auto id : x.ids) id_sum += id;
  }
  CHECK(sum == 3777882514290448384ULL);
  CHECK(prompt == 144793823);
  CHECK(output == 4122048);
  CHECK(ids == 288500);
  CHECK(id_sum == 23407000830ULL);
  // The first row: {"timestamp": 0, "input_length": 6758, "output_length": 500,
  //                 "hash_ids": [0, 1, ..., 13]}.
  CHECK(got[0].r.prompt_tokens == 6758);
  CHECK(got[0].ids == std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});
}

TEST_CASE("Trace reader: the Azure 2024 layout with UTC offsets and any number of digits") {
  // tests/workloads/data/azure_2024_sample.csv; times relative to 2024-05-10 00:00:00 UTC:
  // .009930 s, .110507 s, 1 s, 1.5 s, 02:00:02.000001+02:00 = 2.000001 s, 00:00:03Z = 3 s.
  const Read r = read_all(kData + "azure_2024_sample.csv");
  CHECK(r.format == TraceFormat::kAzure);
  REQUIRE(r.rows.size() == 6);
  const std::int64_t want[] = {9'930'000'000, 110'507'000'000, kS, kS + kS / 2, 2 * kS + 1'000'000, 3 * kS};
  for (std::size_t i = 0; i < 6; ++i) CHECK(r.rows[i].time_ps == want[i]);
  CHECK(r.rows[1].prompt == 4813);
  CHECK(r.rows[1].output == 12);
  CHECK(r.rows[5].line == 7);
}

TEST_CASE("Trace reader: BurstGPT rows, zero lengths counted, sessions from Session ID") {
  const Read r = read_all(kData + "burstgpt_sample.csv");
  CHECK(r.format == TraceFormat::kBurstGpt);
  REQUIRE(r.rows.size() == 5);
  CHECK(r.rows[4].time_ps == 116 * kS + kS / 4);  // relative to the first row's whole second, 5
  CHECK(r.rows[2].prompt == 417);
  CHECK(r.rows[3].output == 0);
  CHECK(r.rows[0].session == ~std::uint64_t{0});
  // The scan counts the two rows with a zero (a failed request's 0 response tokens, a 0-token
  // prompt); the replay raises them to 1.
  TraceReplay t = replay_of(kData + "burstgpt_sample.csv");
  const auto w = replay_workload(t);
  CHECK(std::get<TraceReplay>(w.classes[0].arrivals).scan->zero_lengths == 2);
  const auto got = replay(w);
  CHECK(got[3].r.output_tokens == 1);
  CHECK(got[4].r.prompt_tokens == 1);
  CHECK(got[4].r.arrival.ps() == 116 * kS + kS / 4);  // 121.25 - 5

  const Read s = read_all(kData + "burstgpt3_sample.csv");
  REQUIRE(s.rows.size() == 4);
  // Rows 1 and 3 share a session, rows 2 and 4 another (one quoted): equal ids, distinct pairs.
  CHECK(s.rows[0].session == s.rows[2].session);
  CHECK(s.rows[1].session == s.rows[3].session);
  CHECK(s.rows[0].session != s.rows[1].session);
  CHECK(s.rows[3].prompt == 150);
}

TEST_CASE("Trace replay: time scale, rate scale, a window and loops") {
  // Rows at 0, 1, 2, 4 s (trace time).
  const std::string file = write_temp("small.csv",
                                      "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                                      "0,10,1\n1,20,2\n2,30,3\n4,40,4\n");
  SUBCASE("time_scale 2 and rate_scale 4 together halve the times") {
    TraceReplay t = replay_of(file);
    t.time_scale = 2;
    t.rate_scale = 4;
    const auto got = replay(replay_workload(t));
    REQUIRE(got.size() == 4);
    CHECK(got[1].r.arrival.ps() == kS / 2);
    CHECK(got[3].r.arrival.ps() == 2 * kS);
  }
  SUBCASE("a window keeps [start, start + duration) and starts the clock at its start") {
    TraceReplay t = replay_of(file);
    t.window_start = Duration::seconds(1);
    t.window_duration = Duration::seconds(2);
    const auto got = replay(replay_workload(t));
    REQUIRE(got.size() == 2);  // the rows at 1 s and 2 s
    CHECK(got[0].r.prompt_tokens == 20);
    CHECK(got[0].r.arrival.ps() == 0);
    CHECK(got[1].r.arrival.ps() == kS);
  }
  SUBCASE("loops repeat the trace with a period of its span plus its mean gap") {
    // Span 4 s over 4 rows: period 4 x 4 / 3 = 5.333... s (rounded to the picosecond).
    TraceReplay t = replay_of(file);
    t.loops = 3;
    const auto got = replay(replay_workload(t));
    REQUIRE(got.size() == 12);
    const std::int64_t period = 5'333'333'333'333;
    CHECK(got[4].r.arrival.ps() == period);
    CHECK(got[11].r.arrival.ps() == 2 * period + 4 * kS);
    CHECK(got[7].r.prompt_tokens == 40);
    for (std::size_t i = 1; i < got.size(); ++i) CHECK(got[i - 1].r.arrival <= got[i].r.arrival);
  }
  SUBCASE("a trace spanning the 100 days a trace may cover loops once: its period saturates") {
    // Rows at 0 and 8,640,000 s: period 2 x 8.64e18 ps, past int64 (a fuzzer's finding: the cast
    // overflowed). The second pass would start after the replay's last instant, so it ends.
    const std::string wide = write_temp("wide.csv",
                                        "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                                        "0,10,1\n8640000,20,2\n");
    TraceReplay t = replay_of(wide);
    t.loops = 0;  // forever
    CHECK(scan_trace(t).period_ps == std::numeric_limits<std::int64_t>::max());
    const auto got = replay(replay_workload(t));
    REQUIRE(got.size() == 2);
    CHECK(got[1].r.arrival.ps() == 8'640'000 * kS);
  }
  SUBCASE("a windowed loop repeats with the window's duration") {
    TraceReplay t = replay_of(file);
    t.window_duration = Duration::seconds(3);
    t.loops = 0;  // forever: the request count ends it
    const auto got = replay(replay_workload(t, 7));
    REQUIRE(got.size() == 7);
    // Rows at 0, 1, 2 s repeat every 3 s; the row at 4 s is outside the window.
    for (std::size_t i = 0; i < 7; ++i) CHECK(got[i].r.arrival.ps() == static_cast<std::int64_t>(i) * kS);
  }
}

TEST_CASE("Trace replay: later passes get fresh hash ids unless prefixes are shared") {
  const std::string file =
      write_temp("ids.jsonl",
                 "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 7]}\n"
                 "{\"timestamp\": 10, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [3]}\n");
  TraceReplay t = replay_of(file);
  t.loops = 2;
  auto got = replay(replay_workload(t));
  REQUIRE(got.size() == 4);
  // The largest id is 7, so pass 1 adds 8.
  CHECK(got[0].ids == std::vector<std::uint64_t>{0, 7});
  CHECK(got[2].ids == std::vector<std::uint64_t>{8, 15});
  CHECK(got[3].ids == std::vector<std::uint64_t>{11});
  t.fresh_prefixes = false;
  got = replay(replay_workload(t));
  CHECK(got[2].ids == std::vector<std::uint64_t>{0, 7});
  // A cap on the prompt drops the hash ids of the blocks it cut: 600 + 5 capped at 300 keeps
  // 600 - ceil(305 x 600 / 605) = 297 prompt tokens, one block of 512.
  t.max_total_tokens = 300;
  got = replay(replay_workload(t));
  CHECK(got[0].r.prompt_tokens == 297);
  CHECK(got[0].ids == std::vector<std::uint64_t>{0});
}

TEST_CASE("Trace reader: bad rows are reported with file, line, column, key and message") {
  const std::string header = "arrived_at,num_prefill_tokens,num_decode_tokens\n";
  SUBCASE("a missing column") {
    check_problem("arrived_at,num_prefill_tokens\n0,1\n", 1, 1, "workload.arrivals",
                  "not a known trace layout (columns: arrived_at, num_prefill_tokens); expected "
                  "Azure (TIMESTAMP,ContextTokens,GeneratedTokens), Splitwise "
                  "(arrived_at,num_prefill_tokens,num_decode_tokens), BurstGPT (Timestamp,...,"
                  "Request tokens,Response tokens,...) or Mooncake JSON lines");
  }
  SUBCASE("a named format whose column is missing") {
    const std::string file = write_temp("named.csv", "TIMESTAMP,ContextTokens\n2024-01-01 00:00:00,1\n");
    TraceReplay t = replay_of(file);
    t.format = TraceFormat::kAzure;
    const auto d = problems(t);
    REQUIRE(d.size() == 1);
    CHECK(d[0].line == 1);
    CHECK(d[0].message ==
          "no column 'GeneratedTokens' in the header of this azure trace (columns: TIMESTAMP, "
          "ContextTokens)");
  }
  SUBCASE("time going back") {
    check_problem(header + "0.5,10,1\n0.25,10,1\n", 3, 1, "workload.arrivals (column arrived_at)",
                  "the time goes back: this row is earlier than the row before it (traces must be "
                  "in arrival order)");
  }
  SUBCASE("a negative length") {
    check_problem(header + "0,10,1\n1,-3,1\n", 3, 3, "workload.arrivals (column num_prefill_tokens)",
                  "token counts cannot be negative");
  }
  SUBCASE("a fraction of a token") {
    check_problem(header + "0,10,2.5\n", 2, 6, "workload.arrivals (column num_decode_tokens)",
                  "'2.5' is not a whole number of tokens");
  }
  SUBCASE("garbage where a number goes") {
    check_problem(header + "0,10,1\nabc,10,1\n", 3, 1, "workload.arrivals (column arrived_at)",
                  "'abc' is not a time in seconds");
  }
  SUBCASE("a row with a field missing") {
    check_problem(header + "0,10\n", 2, 1, "workload.arrivals",
                  "expected 3 comma-separated fields as in the header, found 2");
  }
  SUBCASE("a date that does not exist") {
    check_problem("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-30 00:00:00.1,5,5\n", 2, 1,
                  "workload.arrivals (column TIMESTAMP)",
                  "'2023-02-30 00:00:00.1': day 30 does not exist in that month");
  }
  SUBCASE("an hour that does not exist") {
    check_problem("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 24:00:00.1,5,5\n", 2, 1,
                  "workload.arrivals (column TIMESTAMP)", "'2023-11-16 24:00:00.1': the time of day is out of range");
  }
  SUBCASE("a time of day without its colons") {
    check_problem("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 12-00-00,5,5\n", 2, 1,
                  "workload.arrivals (column TIMESTAMP)",
                  "'2023-11-16 12-00-00': expected a time like '2023-11-16 18:17:03.9799600' or "
                  "'2024-05-10 00:00:00.009930+00:00'");
  }
  SUBCASE("a truncated JSON line") {
    check_problem(
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n"
        "{\"timestamp\": 5, \"input_length\": 10, \"output_len\n",
        2, 49, "workload.arrivals", "the line ends before the key's closing quote (a truncated JSON line?)", "t.jsonl");
  }
  SUBCASE("a JSON line cut inside the hash ids") {
    check_problem("{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 1, \"hash_ids\": [0, 1", 1, 77,
                  "workload.arrivals (key hash_ids)",
                  "the line ends before the list of hash ids ends (a truncated JSON line?)", "u.jsonl");
  }
  SUBCASE("a JSON line without a key") {
    check_problem("{\"timestamp\": 0, \"output_length\": 1, \"hash_ids\": []}\n", 1, 1,
                  "workload.arrivals (key input_length)", "the object has no 'input_length'", "v.jsonl");
  }
  SUBCASE("hash ids that do not cover the prompt") {
    check_problem("{\"timestamp\": 0, \"input_length\": 1025, \"output_length\": 1, \"hash_ids\": [4, 5]}\n", 1, 1,
                  "workload.arrivals (key hash_ids)", "2 hash ids for 1025 input tokens; blocks of 512 tokens need 3",
                  "w.jsonl");
  }
  SUBCASE("a key given twice") {
    check_problem(
        "{\"timestamp\": 0, \"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, "
        "\"hash_ids\": [0]}\n",
        1, 18, "workload.arrivals (key timestamp)", "the key appears twice", "x.jsonl");
  }
  SUBCASE("an empty file") {
    const std::string file = write_temp("empty.csv", "\n\n");
    const auto d = problems(replay_of(file));
    CHECK(d[0].message == "the trace file is empty");
  }
}

TEST_CASE("Trace reader: every bad row is reported together, at most 20") {
  std::string text = "arrived_at,num_prefill_tokens,num_decode_tokens\n";
  for (int i = 0; i < 30; ++i) text += std::to_string(i) + ",x,1\n";
  const auto d = problems(replay_of(write_temp("many.csv", text)));
  CHECK(d.size() == 20);
  CHECK(d[0].line == 2);
  CHECK(d[19].line == 21);
}

TEST_CASE("Trace replay: skip_bad_rows replays the good rows and counts the others") {
  const std::string file = write_temp("skip.csv",
                                      "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                                      "0,10,1\n"
                                      "1,11,1\n"
                                      "0.5,10,1\n"  // earlier than the row before
                                      "2,-5,1\n"    // negative
                                      "3,12\n"      // a field missing
                                      "4,13,1\n");
  TraceReplay t = replay_of(file);
  t.skip_bad_rows = true;
  t.loops = 2;
  const auto w = replay_workload(t);
  const TraceScan& scan = *std::get<TraceReplay>(w.classes[0].arrivals).scan;
  CHECK(scan.rows == 3);
  CHECK(scan.bad_rows == 3);
  CHECK(scan.first_bad.find(":4:1: workload.arrivals (column arrived_at): the time goes back") != std::string::npos);
  const auto got = replay(w);
  REQUIRE(got.size() == 6);  // three good rows, two passes
  CHECK(got[2].r.prompt_tokens == 13);
  CHECK(got[2].r.arrival.ps() == 4 * kS);
  // Period: span 4 s x 3 rows / 2 gaps = 6 s.
  CHECK(got[3].r.arrival.ps() == 6 * kS);
}

TEST_CASE("Trace reader: numbers of every length parse exactly (the 8-byte digit path and its fallback)") {
  // For each whole-part length w = 1..15 one file (times within a file stay within the reader's
  // 100-day span): rows w...w.f...f with 0..12 fractional digits and counts of 1..9 digits, each
  // value built here by integer arithmetic. Times come back relative to the first row's second.
  Rng rng(3, "digits");
  for (int w = 1; w <= 15; ++w) {
    CAPTURE(w);
    std::string text = "arrived_at,num_prefill_tokens,num_decode_tokens\n";
    std::vector<std::int64_t> want_ps, want_prompt;
    const std::int64_t base = w == 1 ? 0 : static_cast<std::int64_t>(std::llround(std::pow(10.0, w - 1)));
    for (int f = 0; f <= 12; ++f) {
      const std::int64_t whole = base + f;  // w digits (for w = 1: 0 .. 9 and then 10, 11, 12)
      std::int64_t frac = 0;
      std::string fs;
      for (int k = 0; k < f; ++k) {
        const int d = static_cast<int>(rng.uniform_int(0, 9));
        fs += static_cast<char>('0' + d);
        frac = frac * 10 + d;
      }
      for (int k = f; k < 12; ++k) frac *= 10;
      const int digits = 1 + (w + f) % 9;
      std::int64_t count = 0;
      std::string cs;
      for (int k = 0; k < digits; ++k) {
        const int d = static_cast<int>(rng.uniform_int(k == 0 ? 1 : 0, 9));
        cs += static_cast<char>('0' + d);
        count = count * 10 + d;
      }
      if (count > 100'000'000) {
        cs = "100000000";
        count = 100'000'000;
      }
      text += std::to_string(whole) + (f > 0 ? "." + fs : "") + "," + cs + ",1\n";
      want_ps.push_back((whole - base) * kS + frac);
      want_prompt.push_back(count);
    }
    const Read r = read_all(write_temp("digits.csv", text));
    REQUIRE(r.rows.size() == want_ps.size());
    for (std::size_t i = 0; i < want_ps.size(); ++i) {
      CAPTURE(i);
      CHECK(r.rows[i].time_ps == want_ps[i]);
      CHECK(r.rows[i].prompt == want_prompt[i]);
    }
  }
}

TEST_CASE("Trace reader: every CSV layout reads the same rows with LF and CRLF line ends, quoted or not") {
  // The same rows in each shipped layout; CRLF and quoted fields go through core's CSV splitter
  // (the slow path) or the fast scanner, and must agree field for field.
  const std::vector<std::string> layouts = {
      "arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,374,44\n1.25,396,109\n",
      "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
      "2023-11-16 18:15:47.4305900,396,109\n",
      "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Session ID\n"
      "5,ChatGPT,374,44,418,Conversation log,s1\n5.75,GPT-4,396,109,505,Conversation log,\"s,2\"\n"};
  for (const std::string& lf : layouts) {
    std::string crlf, quoted;
    for (const char c : lf) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    // Quote every data field of the second row.
    const auto second = lf.find('\n', lf.find('\n') + 1) + 1;
    quoted = lf.substr(0, second);
    std::string row = lf.substr(second, lf.size() - second - 1);
    if (row.find('"') == std::string::npos) {
      std::string q = "\"";
      for (const char c : row) q += c == ',' ? std::string("\",\"") : std::string(1, c);
      row = q + "\"";
    }
    quoted += row + "\r\n";
    const Read a = read_all(write_temp("lf.csv", lf));
    const Read b = read_all(write_temp("crlf.csv", crlf));
    const Read c = read_all(write_temp("quoted.csv", quoted));
    REQUIRE(a.rows.size() == 2);
    REQUIRE(b.rows.size() == 2);
    REQUIRE(c.rows.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
      CHECK(b.rows[i].time_ps == a.rows[i].time_ps);
      CHECK(b.rows[i].prompt == a.rows[i].prompt);
      CHECK(b.rows[i].output == a.rows[i].output);
      CHECK(b.rows[i].session == a.rows[i].session);
      CHECK(c.rows[i].time_ps == a.rows[i].time_ps);
      CHECK(c.rows[i].prompt == a.rows[i].prompt);
      CHECK(c.rows[i].output == a.rows[i].output);
    }
    // 0.75 s between the rows in every layout.
    CHECK(a.rows[1].time_ps - a.rows[0].time_ps == 3 * kS / 4);
  }
}
