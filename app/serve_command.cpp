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
      " \"seed\": N}\n"
      "  answer:  {\"id\", \"ok\": true, \"summary\", \"pools\", \"simulation\"} or"
      " {\"id\", \"ok\": false, \"errors\": [{\"path\", \"message\", ...}]}\n"
      "Bad lines get an error answer; the process ends at the end of input.\n";
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
