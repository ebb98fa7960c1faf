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

// The one-line note views print for them ("" when there are none).
std::string SessionsWithoutFinalNote(uint64_t sessions);
// How the sessions a signal ended after the injector drained them ended, from their
// `process.end_signal` records (signal name -> sessions): "SIGINT (Ctrl-C) 1 session; drained
// first: what was recorded before the signal was delivered"; "" for none. Printable only.
std::string EndSignalsNote(const std::map<std::string, uint64_t>& sessions);

// "N records wait in spool files ...": records a process that ended left in its spool, which
// the daemon delivers soon (Report.spooled_records); "" for none. Never part of what is lost.
std::string SpooledNote(uint64_t records);

}  // namespace flopscope::client
