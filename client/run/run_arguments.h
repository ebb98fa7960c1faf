#pragma once

#include <string>
#include <vector>

namespace flopscope::client {

// `flopscope run [OPTIONS] [--] CMD ARGS...`: the command line split into the part flopscope parses
// and the command it runs. The command starts at the first argument after "run" that is not an
// option or an option's value, or right after a "--"; from there on nothing is flopscope's, so
// `flopscope run python train.py --job x` hands `--job x` to train.py.
struct RunArguments {
  std::vector<std::string> flopscope_args;  // argv[0], "run" and run's options
  std::vector<std::string> command;         // empty when none was given
};

// `args` is the whole argv; `run_index` the position of the "run" subcommand in it. The options
// named in `options_with_value` take the next argument as their value unless written `--opt=value`.
RunArguments SplitRunArguments(const std::vector<std::string>& args, size_t run_index,
                               const std::vector<std::string>& options_with_value);

}  // namespace flopscope::client
