// Records waiting in spool files, moved out of the losses they are counted in (spooled_records.h).
#include "daemon/query/spooled_records.h"

#include <algorithm>

namespace flopscope::daemon {
namespace {

// Takes up to `records` out of the NOT_ARRIVED counter of `losses`; returns how many it took.
template <typename Losses>
uint64_t TakeFromNotArrived(uint64_t records, Losses* losses) {
  for (v1::LossCounter& loss : *losses) {
    if (loss.cause() != v1::LOSS_CAUSE_NOT_ARRIVED) continue;
    const uint64_t taken = std::min(records, loss.records());
    loss.set_records(loss.records() - taken);
    return taken;
  }
  return 0;
}

}  // namespace

uint64_t MoveSpooledOutOfLosses(uint64_t spooled, v1::RankInfo* rank) {
  rank->set_spooled_records(spooled);
  return spooled == 0 ? 0 : TakeFromNotArrived(spooled, rank->mutable_losses());
}

SpooledTotals MoveSpooledOutOfLosses(const std::map<int32_t, uint64_t>& spooled,
                                     std::vector<v1::RankInfo>* ranks) {
  SpooledTotals totals;
  for (v1::RankInfo& rank : *ranks) {
    const auto it = spooled.find(rank.rank());
    if (it == spooled.end()) continue;
    totals.waiting += it->second;
    totals.moved += MoveSpooledOutOfLosses(it->second, &rank);
  }
  return totals;
}

void MoveSpooledOutOfLosses(v1::Report* report) {
  uint64_t waiting = 0;
  for (const v1::RankInfo& rank : report->ranks()) waiting += rank.spooled_records();
  report->set_spooled_records(waiting);
  if (waiting > 0) TakeFromNotArrived(waiting, report->mutable_losses());
}

}  // namespace flopscope::daemon
