#include "client/text/loss_cause_names.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/metadata_keys.h"
#include "common/utf8.h"

namespace flopscope::client {

std::string LossCauseName(int cause) {
  constexpr absl::string_view kPrefix = "LOSS_CAUSE_";
  if (!flopscope::v1::LossCause_IsValid(cause)) return absl::StrCat("cause_", cause);
  std::string name = flopscope::v1::LossCause_Name(static_cast<flopscope::v1::LossCause>(cause));
  if (absl::StartsWith(name, kPrefix)) name.erase(0, kPrefix.size());
  return absl::AsciiStrToLower(name);
}

std::string LossCauseDescription(int cause) {
  using flopscope::v1::LossCause;
  switch (cause) {
    case LossCause::LOSS_CAUSE_BUFFER_FULL:
      return "the injector's buffer was full";
    case LossCause::LOSS_CAUSE_DAEMON_UNREACHABLE:
      return "dropped while the daemon was unreachable (memory queue and spool full)";
    case LossCause::LOSS_CAUSE_REJECTED:
      return "rejected by the daemon as invalid";
    case LossCause::LOSS_CAUSE_UNMATCHED_POP:
      return "range pops without a push";
    case LossCause::LOSS_CAUSE_STACK_OVERFLOW:
      return "ranges nested deeper than the injector's limit";
    case LossCause::LOSS_CAUSE_TOO_MANY_PATHS:
      return "range-path table full";
    case LossCause::LOSS_CAUSE_UNCLOSED_RANGE:
      return "ranges still open at exit";
    case LossCause::LOSS_CAUSE_CUPTI_DROPPED:
      return "dropped by CUPTI";
    case LossCause::LOSS_CAUSE_EXIT_UNDELIVERED:
      return "still unsent when the process exited";
    case LossCause::LOSS_CAUSE_COUNTER_UNMATCHED:
      return "counter ranges and launches did not pair up";
    case LossCause::LOSS_CAUSE_NOT_ARRIVED:
      return "queued by a process whose stream ended without a final batch, never arrived";
    case LossCause::LOSS_CAUSE_ENDED_WITHOUT_FINAL:
      return "sessions that ended without a final batch (killed, _exit or exec)";
    case LossCause::LOSS_CAUSE_KILLED:
      return "records made but still in the process's buffers when it was killed";
    case LossCause::LOSS_CAUSE_BACKLOG_FULL:
      return "dropped while the daemon was connected but behind (memory queue and spool full)";
    case LossCause::LOSS_CAUSE_FORWARD_DROPPED:
      return "dropped by the node daemon's forwarding outbox (full while the aggregator was away "
             "or behind): stored on the node only";
    default:
      return "unknown cause";
  }
}

bool CountsSessions(int cause) {
  return cause == flopscope::v1::LossCause::LOSS_CAUSE_ENDED_WITHOUT_FINAL;
}

uint64_t SessionsWithoutFinal(
    const google::protobuf::RepeatedPtrField<flopscope::v1::LossCounter>& losses) {
  uint64_t sessions = 0;
  for (const auto& loss : losses) {
    if (CountsSessions(loss.cause())) sessions += loss.records();
  }
  return sessions;
}

namespace {

// "SIGINT (Ctrl-C)", "SIGTERM": printable only (the names come from producers' records).
std::string SignalLabel(const std::string& name) {
  const std::string printable = PrintableForTerminal(name);
  return printable == "SIGINT" ? "SIGINT (Ctrl-C)" : printable;
}

std::string Sessions(uint64_t count) {
  return absl::StrCat(count, count == 1 ? " session" : " sessions");
}

// "SIGINT (Ctrl-C) 2 sessions, SIGTERM 1 session".
std::string SignalList(const SignalSessions& sessions) {
  std::vector<std::string> parts;
  for (const auto& [name, count] : sessions) {
    if (count > 0) parts.push_back(absl::StrCat(SignalLabel(name), " ", Sessions(count)));
  }
  return absl::StrJoin(parts, ", ");
}

uint64_t Total(const SignalSessions& sessions) {
  uint64_t total = 0;
  for (const auto& [name, count] : sessions) total += count;
  return total;
}

}  // namespace

void EndSignalsOf(const google::protobuf::RepeatedPtrField<flopscope::v1::Metadata>& metadata,
                  SignalSessions* drained, SignalSessions* cut_short) {
  for (const auto& entry : metadata) {
    if (entry.key() == kEndSignalKey) ++(*drained)[entry.value()];
    if (entry.key() == kEndSignalCutShortKey) ++(*cut_short)[entry.value()];
  }
}

std::string SessionsWithoutFinalNote(uint64_t sessions, const SignalSessions& cut_short) {
  if (sessions == 0) return "";
  std::vector<std::string> parts;
  const uint64_t named = std::min(sessions, Total(cut_short));
  if (named > 0) {
    std::vector<std::string> labels;
    for (const auto& [name, count] : cut_short) {
      if (count > 0) labels.push_back(SignalLabel(name));
    }
    parts.push_back(absl::StrCat(
        Sessions(named), " ended by ", absl::StrJoin(labels, " or "), " before ",
        named == 1 ? "its" : "their",
        " final batch was delivered (the drain was cut short: the transport had not started, "
        "its bound ran out or a second signal came): records recorded after the last delivery "
        "are counted as killed"));
  }
  if (sessions > named) {
    parts.push_back(absl::StrCat(Sessions(sessions - named),
                                 " ended without a final batch (killed, _exit or exec?): records "
                                 "recorded after its last delivery are missing"));
  }
  return absl::StrJoin(parts, "; ");
}

std::string EndSignalsNote(const SignalSessions& drained, const SignalSessions& cut_short) {
  std::vector<std::string> parts;
  if (const std::string list = SignalList(drained); !list.empty()) {
    parts.push_back(
        absl::StrCat(list, "; drained first: what was recorded before the signal was delivered"));
  }
  if (const std::string list = SignalList(cut_short); !list.empty()) {
    parts.push_back(absl::StrCat(list,
                                 " whose drain was cut short before the final batch: what did not "
                                 "arrive is counted as killed"));
  }
  return absl::StrJoin(parts, "; ");
}

std::string SpooledNote(uint64_t records) {
  if (records == 0) return "";
  return absl::StrCat(records, records == 1 ? " record waits" : " records wait",
                      " in spool files the daemon is delivering: not lost (they arrive within "
                      "seconds, at most flopscoped's --collect-spools-period-s)");
}

}  // namespace flopscope::client
