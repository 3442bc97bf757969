// Input files read with limits: every file the project reads (scenarios, profiles, Hugging Face
// config.json files, traces, measurement tables, saved reports) opens through here.
//
// - Read whole (read_input_file): a regular file larger than its limit is refused from its size,
//   before a byte is read; a stream (a pipe, /dev/stdin, a FIFO with a writer, /dev/zero) is read
//   up to the limit and refused beyond it; a folder is refused. The text is returned as bytes.
// - Streamed and re-read (check_streamed_file): traces and measurement tables are read in chunks
//   and rewound for loops, so they must be regular files; anything else is refused at once (a FIFO
//   would block or be consumed, /dev/zero would never end). Their readers bound each line
//   (kMaxLineBytes) so a file without line breaks cannot fill memory.
// Errors are InputError diagnostics naming the file (and the scenario key that named it, when
// given), what the file was for and the limit: exit code 2.
// The limits are constants, listed with their defaults in README.md (Limits).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servesim {

// Files read whole. YAML trees cost yaml-cpp about 1 KB of memory per node (a 16 MB YAML list of
// small numbers took 3.6 GB), so YAML files are also bounded in nodes (sim/scenario).
inline constexpr std::uint64_t kMaxScenarioBytes = 16ull << 20;  // scenario and profile YAML
inline constexpr std::uint64_t kMaxJsonFileBytes = 16ull << 20;  // config.json, saved reports
inline constexpr std::uint64_t kMaxTableBytes = 256ull << 20;    // a CSV read whole (compare_h200)
// One line of a streamed text file (a trace row, a measurement row, a serve request).
inline constexpr std::uint64_t kMaxLineBytes = 16ull << 20;

// Where an input file came from, for its diagnostics.
struct InputSource {
  std::string path;      // as the user gave it (resolved against the scenario's folder)
  std::string what;      // "scenario file", "trace file", ...
  std::string key_path;  // the scenario key that names it ("" for a command-line file)
};

// The whole file, at most `max_bytes`. Throws InputError.
std::string read_input_file(const InputSource& source, std::uint64_t max_bytes);

// Throws InputError unless `source.path` is a regular file that can be opened for reading.
void check_streamed_file(const InputSource& source);

// The offset of the first byte of `text` that is not part of well-formed UTF-8 (overlong forms,
// surrogates and code points above U+10FFFF are not), or nullopt when all of it is.
std::optional<std::size_t> invalid_utf8_at(std::string_view text);
// 1-based line and column (in bytes) of `offset` in `text`.
std::pair<int, int> line_and_column(std::string_view text, std::size_t offset);

// JSON text (a serve request, a config.json, a saved report) nests at most this deep: parsers and
// printers of nested values recurse, and no input of ours needs more than a dozen levels.
inline constexpr int kMaxJsonDepth = 64;
// The offset of the bracket that opens level `max_depth` + 1 of the JSON text's arrays and
// objects (brackets inside strings do not count), or nullopt when it nests no deeper.
std::optional<std::size_t> json_too_deep_at(std::string_view text, int max_depth = kMaxJsonDepth);

// A sandbox of folders (serve's scenario roots): `file`, with every symbolic link and ".." resolved,
// must lie inside one of `roots` (canonical folders, as canonical_folders gives them). A file that
// does not exist is judged by where it would be.
bool path_within(const std::string& file, const std::vector<std::string>& roots);
// The folders that exist among `dirs`, canonical (symbolic links resolved).
std::vector<std::string> canonical_folders(const std::vector<std::string>& dirs);

// "16 MiB", "256 MiB", "1.5 GiB": a byte limit for messages.
std::string format_limit(std::uint64_t bytes);

}  // namespace servesim
