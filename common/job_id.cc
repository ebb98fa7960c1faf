#include "common/job_id.h"

#include <algorithm>

namespace flopscope {
namespace {

bool IsJobIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

std::string JobIdProblem(std::string_view job_id) {
  if (job_id.empty()) return "job id is empty";
  if (job_id.size() > kMaxJobIdLength) {
    return "job id is " + std::to_string(job_id.size()) + " characters long (at most " +
           std::to_string(kMaxJobIdLength) + ")";
  }
  const size_t at = job_id.find('@');
  if (at != std::string_view::npos) {
    // An apart id: both halves plain ids.
    if (at == 0 || at + 1 == job_id.size() || job_id.find('@', at + 1) != job_id.npos ||
        !JobIdProblem(job_id.substr(0, at)).empty() ||
        !JobIdProblem(job_id.substr(at + 1)).empty()) {
      return "job id may hold '@' only as <id>@<owner>, the form a daemon gives a run it keeps "
             "apart";
    }
    return "";
  }
  if (job_id[0] == '.' || job_id[0] == '-') return "job id may not start with '.' or '-'";
  for (char c : job_id) {
    if (!IsJobIdChar(c)) {
      return std::string("job id may hold only letters, digits, '.', '_' and '-' (found '") + c +
             "')";
    }
  }
  return "";
}

std::string ApartJobId(std::string_view job_id, std::string_view owner_tag) {
  const size_t room = kMaxJobIdLength - owner_tag.size() - 1;
  std::string apart(job_id.substr(0, std::min(job_id.find('@'), room)));
  apart += '@';
  apart += owner_tag;
  return apart;
}

std::string OwnerTag(std::string_view user_name, unsigned uid) {
  constexpr size_t kMaxTag = 32;
  if (!user_name.empty() && user_name.size() <= kMaxTag && user_name.find('@') == user_name.npos &&
      JobIdProblem(user_name).empty()) {
    return std::string(user_name);
  }
  return "uid" + std::to_string(uid);
}

std::string_view OwnerTagOf(std::string_view job_id) {
  const size_t at = job_id.find('@');
  return at == job_id.npos ? std::string_view() : job_id.substr(at + 1);
}

std::string SanitizeJobId(std::string_view raw) {
  std::string out;
  for (char c : raw.substr(0, kMaxJobIdLength)) out.push_back(IsJobIdChar(c) ? c : '_');
  if (out.empty()) return "job";
  if (out[0] == '.' || out[0] == '-') out[0] = '_';
  return out;
}

}  // namespace flopscope
