// Output files that are never half-written: the text goes to a temporary file beside the target
// and is renamed into place, so a failed or interrupted write leaves the old file (or none).
#pragma once

#include <filesystem>
#include <string>

namespace servesim {

// Writes `text` to `path` through a temporary file beside it and a rename. Throws
// std::runtime_error when the file cannot be written.
void write_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace servesim
