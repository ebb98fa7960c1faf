#include "client/text/rejected_batches.h"

namespace flopscope::client {

void RejectedBatches::Add(const flopscope::v1::RankInfo& rank) {
  for (const flopscope::v1::Rejection& rejection : rank.rejections()) {
    for (Counts* counts : {&total, &by_rule[rejection.rule()]}) {
      counts->batches += rejection.batches();
      counts->records += rejection.records();
    }
  }
}

}  // namespace flopscope::client
