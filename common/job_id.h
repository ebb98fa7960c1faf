#pragma once

#include <string>
#include <string_view>

namespace flopscope {

inline constexpr size_t kMaxJobIdLength = 128;

// Job ids become directory names (DESIGN: Storage), so they are checked before they touch the file
// system: 1..128 characters of [A-Za-z0-9._-], not starting with '.' or '-'. Returns an empty
// string when valid, else the reason, phrased for the user.
std::string JobIdProblem(std::string_view job_id);

// Replaces every character a job id may not hold with '_' and trims it to the limit. Used on ids
// that come from the environment (SLURM_JOB_ID, TORCHELASTIC_RUN_ID), never on a user's --job.
std::string SanitizeJobId(std::string_view raw);

}  // namespace flopscope
