#include "client/run/run_arguments.h"

#include <algorithm>

namespace flopscope::client {

RunArguments SplitRunArguments(const std::vector<std::string>& args, size_t run_index,
                               const std::vector<std::string>& options_with_value) {
  RunArguments split;
  size_t i = 0;
  for (; i < args.size() && i <= run_index; ++i) split.flopscope_args.push_back(args[i]);
  while (i < args.size()) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the command ("-" alone is not an option)
    split.flopscope_args.push_back(arg);
    ++i;
    const bool takes_next = std::find(options_with_value.begin(), options_with_value.end(), arg) !=
                            options_with_value.end();
    if (takes_next && i < args.size()) split.flopscope_args.push_back(args[i++]);
  }
  split.command.assign(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())),
                       args.end());
  return split;
}

}  // namespace flopscope::client
