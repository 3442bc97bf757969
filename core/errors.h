// Bad input, as opposed to bugs (check.h) and simulated failures (events and states).
//
// Every problem found in a user's file becomes one Diagnostic with its location and key path.
// Loaders collect all of them before giving up and throw one InputError carrying the list; the
// CLI prints each on its own line and exits with code 2. Library code never prints or exits.
#pragma once

#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

namespace servesim {

struct Diagnostic {
  std::string file;     // path as the user gave it, or "<command line>"
  int line = 0;         // 1-based; 0 when unknown
  int column = 0;       // 1-based; 0 when unknown
  std::string path;     // key path inside the document, e.g. "deployment.pools[0].parallel.tp"
  std::string message;  // a complete sentence: what is wrong and what would be right

  // "file:line:col: path: message"
  std::string to_string() const;
};

class InputError : public std::runtime_error {
 public:
  // `outcome` completes the count line the command line prints: what became of the command
  // ("nothing was run" for input found bad before any work; "nothing was written" for an output
  // that could not be written after it).
  explicit InputError(std::vector<Diagnostic> diagnostics, std::string outcome = "nothing was run");
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  const std::string& outcome() const { return outcome_; }

 private:
  std::vector<Diagnostic> diagnostics_;
  std::string outcome_;
};

// Prints every diagnostic ("error: file:line:col: path: message") and the count with the outcome,
// for the command line and the studies that report to a stream.
void print_diagnostics(const InputError& e, std::ostream& err);

}  // namespace servesim
