// Streamed reading of request traces: arrival times, prompt and output lengths, and (where the
// format has them) prefix block hash ids and session ids, one row at a time from a fixed buffer,
// so a trace of any length is replayed in bounded memory.
//
// Formats (auto-detected from the first line, or named):
//   azure      Azure LLM inference traces, CSV `TIMESTAMP,ContextTokens,GeneratedTokens`; the 2023
//              layout has `2023-11-16 18:17:03.9799600` (local, 7 digits), the 2024 one
//              `2024-05-10 00:00:00.009930+00:00` (a UTC offset); both are read, any number of
//              fractional digits up to 12, `T` or a space between date and time, `Z` or +-HH:MM.
//   splitwise  Splitwise / Vidur CSV `arrived_at,num_prefill_tokens,num_decode_tokens` (seconds)
//   burstgpt   BurstGPT CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`
//              (seconds); an optional `Session ID` column (BurstGPT_3) gives session ids.
//   mooncake   Mooncake JSON lines `{"timestamp": ms, "input_length", "output_length",
//              "hash_ids": [...]}`; each hash id names one block of block_tokens prompt tokens
//              (512 in the published traces), so ceil(input_length / block_tokens) ids per row.
// CSV columns may come in any order and extra columns are ignored; fields may be double-quoted.
// JSON keys may come in any order; unknown keys are skipped; duplicates are errors.
//
// Times are exact: decimal text is converted to integer picoseconds without going through a
// double (up to 12 fractional digits; more are rounded to the picosecond). They are relative to
// the first row's whole second, and must not go back (a row earlier than the previous good row is
// a bad row). A bad row (a missing or extra field, text where a number goes, a fraction of a
// token, a negative count, a truncated JSON line, a time that goes back) is an InputError naming
// file, line and column, or, with skip_bad_rows, skipped and counted. Zero lengths are not errors;
// the replay raises them to 1 token (every request reads and generates at least one) and the scan
// counts them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/csv.h"
#include "core/errors.h"
#include "core/time.h"
#include "workloads/trace_fields.h"

namespace servesim::workloads {

enum class TraceFormat : std::uint8_t { kAuto, kAzure, kSplitwise, kBurstGpt, kMooncake };
std::string_view trace_format_name(TraceFormat f);

// What the loader learns by reading the whole (windowed) trace once before anything runs.
struct TraceScan {
  TraceFormat format = TraceFormat::kAuto;  // as detected
  std::int64_t rows = 0;                    // good rows in the window: requests per pass
  std::int64_t bad_rows = 0;                // skipped (skip_bad_rows), in the part of the file read
  std::string first_bad;                    // the first skipped row's diagnostic, for reports
  std::int64_t zero_lengths = 0;            // rows in the window with a zero prompt or output (raised to 1)
  std::int64_t origin_ps = 0;               // trace time of simulated time 0 (window start, or first row)
  std::int64_t first_ps = 0, last_ps = 0;   // trace times of the first and last rows used
  std::int64_t period_ps = 0;               // one pass, for looping: the window's duration, or the span of
                                            // the rows plus their mean gap (last - first) x rows / (rows - 1)
  std::uint64_t max_hash_id = 0;            // ids of pass k are offset by k x (max_hash_id + 1) when fresh
  bool has_hash_ids = false;
  bool has_sessions = false;
};

// A trace to replay as an open-loop request stream.
struct TraceReplay {
  std::string path;
  std::string key_path = "workload.arrivals";  // the scenario key, for diagnostics
  TraceFormat format = TraceFormat::kAuto;
  double time_scale = 1;                    // trace seconds -> simulated seconds (2 = half the rate)
  double rate_scale = 1;                    // multiplies the arrival rate (divides the times)
  Duration window_start;                    // trace time after the first row at which the window opens
  std::optional<Duration> window_duration;  // none: to the end of the file
  std::int64_t loops = 1;                   // passes over the window; 0 = forever (until the run ends)
  bool fresh_prefixes = true;               // later passes get new hash ids and session ids
  bool skip_bad_rows = false;
  std::int64_t block_tokens = 512;        // prompt tokens per hash id
  std::int64_t max_total_tokens = 0;      // proportional cap on prompt + output; 0 = none
  std::shared_ptr<const TraceScan> scan;  // filled by the loader (scan_trace)
};

// One good row, as read.
struct TraceRow {
  std::int64_t time_ps = 0;  // relative to the first row's whole second
  std::int64_t prompt = 0;
  std::int64_t output = 0;
  std::uint64_t session = ~std::uint64_t{0};  // FNV-1a of the session id text; ~0 when none
  int line = 0;
};

class TraceReader {
 public:
  // Opens the file and reads its header. Throws InputError when the file cannot be read, is
  // empty, or its first line is not a known layout (or lacks a column the named format needs).
  TraceReader(const std::string& path, TraceFormat format, std::string key_path, std::int64_t block_tokens = 512);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // Bad rows: with `collect`, each one's diagnostic goes to `collect` (the caller decides);
  // without, they are skipped and counted when `skip`, else thrown at once.
  void on_bad_rows(bool skip, std::vector<Diagnostic>* collect = nullptr) {
    skip_ = skip;
    collect_ = collect;
  }
  // The next good row; `ids` receives its hash ids (cleared first). False at the end of the file.
  bool next(TraceRow& row, std::vector<std::uint64_t>& ids);
  // Back to the first data row (times keep their origin, so a pass reads the same values).
  void rewind();

  TraceFormat format() const { return format_; }
  std::int64_t bad_rows() const { return bad_rows_; }
  const std::string& first_bad() const { return first_bad_; }
  bool has_sessions() const { return session_col_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  struct Failure {
    int column;
    std::string message;
    std::string key;  // the column or JSON key at fault, for the key path
  };
  bool next_line(const char*& line, const char*& eol);
  void refill();
  void detect(const char* line, const char* eol);
  // Parse one row; nullopt when good, else what was wrong.
  // The common CSV row (unquoted, plain numbers) in one pass; false sends the row to parse_csv,
  // which handles everything else and says what is wrong.
  bool parse_csv_fast(const char* line, const char* eol, TraceRow& row);
  std::optional<Failure> parse_csv(const char* line, const char* eol, TraceRow& row, std::vector<std::uint64_t>& ids);
  // The published Mooncake line shape ({"timestamp": .., "input_length": .., "output_length": ..,
  // "hash_ids": [..]} with ", " and ": " separators) in one pass; false sends the line to
  // parse_json, which takes any key order and spacing and says what is wrong.
  bool parse_json_fast(const char* line, const char* eol, TraceRow& row, std::vector<std::uint64_t>& ids);
  std::optional<Failure> parse_json(const char* line, const char* eol, TraceRow& row, std::vector<std::uint64_t>& ids);
  std::optional<Failure> place_time(std::int64_t seconds, std::int64_t frac_ps, TraceRow& row, int column,
                                    const std::string& key);
  Diagnostic diagnostic(int line, const Failure& f) const;

  std::string path_;
  std::string key_path_;
  TraceFormat format_;
  std::int64_t block_tokens_;
  std::FILE* file_ = nullptr;
  std::vector<char> buf_;
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  long data_offset_ = 0;       // file offset of the first data row
  std::int64_t consumed_ = 0;  // file offset of buf_[0]
  int line_no_ = 0, data_line_ = 0;

  // CSV layout
  std::size_t fields_ = 0;
  int time_col_ = -1, prompt_col_ = -1, output_col_ = -1, session_col_ = -1;
  std::vector<std::string> header_;
  std::vector<CsvSpan> spans_;  // parse_csv's scratch

  fields::DateCache dates_;  // the fast path's last Azure date
  bool have_base_ = false;
  std::int64_t base_s_ = 0;  // the first row's whole second
  std::int64_t last_ps_ = INT64_MIN;
  bool skip_ = false;
  std::vector<Diagnostic>* collect_ = nullptr;
  std::int64_t bad_rows_ = 0;
  std::string first_bad_;
};

// Reads the trace once: validates every row up to the end of the window (all problems reported
// together, at most 20), and measures what the replay needs (rows, origin, period, hash ids).
// Throws InputError; with skip_bad_rows, bad rows are counted instead.
TraceScan scan_trace(const TraceReplay& config);

}  // namespace servesim::workloads
