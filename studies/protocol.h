// The agent protocol around `servesim serve` (studies/README.md, "The agent protocol"): the JSON
// Schema of its requests and answers (schemas/serve.schema.json, built into the binary and
// printed by `servesim schema`), the machine-readable code of each error, what a key accepts, the
// verdict of a result against its constraints, and the catalog of scenario keys (`servesim keys`,
// from sim/scenario/keys.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "sim/metrics/settle_watch.h"
#include "studies/objective.h"
#include "studies/study_io.h"

namespace servesim::studies {

// The JSON Schema (draft 2020-12) of serve's requests and answers.
std::string_view serve_schema();

// The code of a problem, one of the schema's `code` enum (bad_json, unknown_key, bad_value, ...).
// Request-level problems carry theirs (Diagnostic::file "<request>", the code in front of the
// message is not used: see request_error in serve.cpp); the loader's are told apart by where and
// how it reports them (reader.cpp's messages for unknown, missing and malformed keys).
std::string error_code(const Diagnostic& d);

// An error as the protocol answers it: {code, path, message, file, line, column, allowed?} with
// `allowed` from the key catalog (choices, range, or the keys known beside an unknown one).
nlohmann::ordered_json error_json(const Diagnostic& d, const std::string& code);
// {"ok": false, "errors": [...]} with codes.
nlohmann::ordered_json error_answer(const std::vector<Diagnostic>& errors);

// What a request asks the verdict to check, parsed: per-request targets become overrides of the
// scenario's slo ("slo.ttft=2 s"), the rest constraints; `attainment` ("99%", "none") is the
// share of requests the SLO targets must hold for. Problems are sentences.
struct VerdictRequest {
  std::vector<std::string> slo_sets;
  std::vector<Constraint> constraints;
  std::string attainment = "99%";
  bool asked = false;  // constraints given (a verdict is also made when the result has SLO targets)
};
VerdictRequest parse_verdict_request(const std::vector<std::string>& constraints, const std::string& attainment,
                                     std::vector<std::string>& problems);

// What an early stop watches for a verdict (serve's `early_stop`, sim/metrics/settle_watch.h):
// the SLO attainment (unless 'none') and every constraint on a TTFT, TPOT or E2E mean or
// percentile with `<=` or `<`. The other constraints cannot settle before the run ends.
std::vector<metrics::SettleRule> settle_rules(const VerdictRequest& request);

// The verdict of an ok result (schema `verdict`), or null when there is nothing to judge. A result
// stopped early (`early`) is infeasible by the check that settled: the verdict says `early` and
// lists that check alone (the others' values are the partial run's, not a verdict).
nlohmann::ordered_json verdict_json(const nlohmann::ordered_json& result, const VerdictRequest& request);

// `servesim keys`: every scenario key (schema servesim.keys/1) and a table.
StudyOutput keys_listing();

}  // namespace servesim::studies
