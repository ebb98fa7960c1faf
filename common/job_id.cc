#include "common/job_id.h"

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
  if (job_id[0] == '.' || job_id[0] == '-') return "job id may not start with '.' or '-'";
  for (char c : job_id) {
    if (!IsJobIdChar(c)) {
      return std::string("job id may hold only letters, digits, '.', '_' and '-' (found '") + c +
             "')";
    }
  }
  return "";
}

std::string SanitizeJobId(std::string_view raw) {
  std::string out;
  for (char c : raw.substr(0, kMaxJobIdLength)) out.push_back(IsJobIdChar(c) ? c : '_');
  if (out.empty()) return "job";
  if (out[0] == '.' || out[0] == '-') out[0] = '_';
  return out;
}

}  // namespace flopscope
