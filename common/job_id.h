#pragma once

#include <string>
#include <string_view>

namespace flopscope {

inline constexpr size_t kMaxJobIdLength = 128;

// Job ids become directory names (DESIGN: Storage), so they are checked before they touch the file
// system: 1..128 characters of [A-Za-z0-9._-], not starting with '.' or '-'; or such an id, '@'
// and an owner tag of the same characters: the form a daemon gives a run it keeps apart because
// its id belongs to another user ("4242@alice", ApartJobId). Returns an empty string when valid,
// else the reason, phrased for the user.
std::string JobIdProblem(std::string_view job_id);

// The id a daemon stores a run under when `job_id` belongs to another user: `job_id@owner_tag`,
// the id's part cut so that the whole fits kMaxJobIdLength. `owner_tag` is the writer's
// OwnerTag.
std::string ApartJobId(std::string_view job_id, std::string_view owner_tag);

// The owner tag of a user: `user_name` when it is a valid id of at most 32 characters, else
// "uid<uid>".
std::string OwnerTag(std::string_view user_name, unsigned uid);

// The owner tag of an id ApartJobId made ("alice" of "4242@alice"); empty for a plain id.
std::string_view OwnerTagOf(std::string_view job_id);

// Replaces every character a job id may not hold with '_' and trims it to the limit. Used on ids
// that come from the environment (SLURM_JOB_ID, TORCHELASTIC_RUN_ID), never on a user's --job.
std::string SanitizeJobId(std::string_view raw);

}  // namespace flopscope
