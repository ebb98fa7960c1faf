#include "client/run/ld_preload.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace flopscope::client {

absl::StatusOr<std::string> PrependToLdPreload(absl::string_view existing,
                                               absl::string_view library) {
  if (library.empty()) return absl::InvalidArgumentError("the injector path is empty");
  if (library.find_first_of(": \t") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the injector path '", library,
                     "' contains ':' or a space, which LD_PRELOAD cannot express; move it to a "
                     "path without them (or point FLOPSCOPE_INJECT_LIB at a copy there)"));
  }
  std::vector<absl::string_view> kept = {library};
  for (absl::string_view entry :
       absl::StrSplit(existing, absl::ByAnyChar(": \t"), absl::SkipEmpty())) {
    if (entry != library) kept.push_back(entry);
  }
  return absl::StrJoin(kept, ":");
}

}  // namespace flopscope::client
