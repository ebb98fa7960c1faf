#pragma once

// The words `flopscope` takes as commands: `flopscope bogus` is named as unknown, with the
// nearest command when one is close ("reprot" -> did you mean 'report'?) and the list.

#include <string>
#include <string_view>
#include <vector>

namespace flopscope::client {

// The command in `commands` nearest to `word` by edit distance (a swap of two neighbouring
// letters counts one), when it is at most 2 edits away and nearer than any other; else "".
std::string NearestCommand(std::string_view word, const std::vector<std::string>& commands);

// "unknown command 'bogus'; did you mean 'report'?; commands: run, jobs, ...; `flopscope help
// CMD` shows one's options" (the suggestion only when NearestCommand has one).
std::string UnknownCommandMessage(std::string_view word, const std::vector<std::string>& commands);

}  // namespace flopscope::client
