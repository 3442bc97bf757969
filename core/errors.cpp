#include "core/errors.h"

#include <ostream>

namespace servesim {

std::string Diagnostic::to_string() const {
  std::string out = file;
  if (line > 0) {
    out.append(":").append(std::to_string(line));
    if (column > 0) out.append(":").append(std::to_string(column));
  }
  out.append(": ");
  if (!path.empty()) out.append(path).append(": ");
  out.append(message);
  return out;
}

namespace {
std::string summarize(const std::vector<Diagnostic>& ds) {
  if (ds.empty()) return "invalid input";
  std::string out = ds.front().to_string();
  if (ds.size() > 1) out += " (and " + std::to_string(ds.size() - 1) + " more)";
  return out;
}
}  // namespace

InputError::InputError(std::vector<Diagnostic> diagnostics, std::string outcome)
    : std::runtime_error(summarize(diagnostics)), diagnostics_(std::move(diagnostics)), outcome_(std::move(outcome)) {}

void print_diagnostics(const InputError& e, std::ostream& err) {
  for (const auto& d : e.diagnostics()) err << "error: " << d.to_string() << "\n";
  err << e.diagnostics().size() << (e.diagnostics().size() == 1 ? " problem" : " problems") << " found; " << e.outcome()
      << ".\n";
}

}  // namespace servesim
