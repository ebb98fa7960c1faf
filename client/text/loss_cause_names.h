#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "flopscope/v1/records.pb.h"

namespace flopscope::client {

// The short name reports use for a loss cause: LOSS_CAUSE_BUFFER_FULL -> "buffer_full"; a value
// this client does not know (a newer injector) -> "cause_<number>".
std::string LossCauseName(int cause);

// What a person should make of it, one short phrase ("the injector's buffer was full").
std::string LossCauseDescription(int cause);

// LOSS_CAUSE_ENDED_WITHOUT_FINAL counts sessions, not records: views show it on its own and
// leave it out of record totals.
bool CountsSessions(int cause);

// The sessions of `losses` whose stream ended without a final batch.
uint64_t SessionsWithoutFinal(
    const google::protobuf::RepeatedPtrField<flopscope::v1::LossCounter>& losses);

// Signal name ("SIGINT", "SIGTERM") -> sessions: how sessions that a signal ended ended.
using SignalSessions = std::map<std::string, uint64_t>;

// Of a report's metadata: the sessions drained after a signal (`process.end_signal` records)
// and those whose drain was cut short before their final batch (the daemon's
// `process.end_signal_cut_short` rows: common/metadata_keys.h).
void EndSignalsOf(const google::protobuf::RepeatedPtrField<flopscope::v1::Metadata>& metadata,
                  SignalSessions* drained, SignalSessions* cut_short);

// The one-line note views print for them ("" when there are none). Those of them a signal's
// drain was cut short in (`cut_short`, at most `sessions` of them) are named with the signal;
// only the rest are guessed at: "1 session ended by SIGINT (Ctrl-C) before its final batch was
// delivered (...); 1 session ended without a final batch (killed, _exit or exec?): ...".
std::string SessionsWithoutFinalNote(uint64_t sessions, const SignalSessions& cut_short = {});

// How the sessions a signal ended ended: drained ("SIGINT (Ctrl-C) 1 session; drained first:
// what was recorded before the signal was delivered"), then cut short ("SIGTERM 1 session, its
// drain cut short before its final batch: ..."); "" for none. Printable only.
std::string EndSignalsNote(const SignalSessions& drained, const SignalSessions& cut_short = {});

// "N records wait in spool files ...": records a process that ended left in its spool, which
// the daemon delivers soon (Report.spooled_records); "" for none. Never part of what is lost.
std::string SpooledNote(uint64_t records);

}  // namespace flopscope::client
