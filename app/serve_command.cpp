// `servesim serve`: hypotheses as JSON lines on stdin, answers on stdout (studies/serve.h).
#include <ostream>

#include "app/commands.h"
#include "studies/serve.h"

namespace servesim::app {

int serve_command(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
                  std::ostream& err) {
  static constexpr const char* kHelp =
      "usage: servesim serve\n\n"
      "Reads one hypothesis per line on stdin and answers each with one line on stdout, in order:\n"
      "  request: {\"id\": any, \"scenario\": PATH or {inline scenario}, \"set\": {\"key.path\": value},"
      " \"seed\": N,\n           \"constraints\": [\"ttft_p99 <= 2 s\", \"tpot <= 50 ms\"], \"attainment\": \"99%\"}\n"
      "  answer:  {\"id\", \"ok\": true, \"summary\", \"pools\", \"simulation\", \"verdict\"} or"
      " {\"id\", \"ok\": false, \"errors\": [{\"code\", \"path\", \"message\", \"allowed\", ...}]}\n"
      "Bad lines get an error answer; the process ends at the end of input. The JSON Schema of both:\n"
      "'servesim schema'; every key a request can set: 'servesim keys'; a Python client:\n"
      "python/servesim_client.py.\n";
  if (!args.empty()) {
    const bool help = args.size() == 1 && (args[0] == "--help" || args[0] == "-h");
    (help ? out : err) << (help ? "" : "error: serve takes no arguments\n\n") << kHelp;
    return help ? 0 : 2;
  }
  studies::ScenarioCache cache;
  studies::serve(in, out, cache);
  return 0;
}

}  // namespace servesim::app
