// Where each rank is, grouped, and who is out of place (open_range_places.h).
#include "client/model/open_range_places.h"

#include <algorithm>
#include <climits>
#include <map>
#include <tuple>
#include <utility>

namespace flopscope::client {
namespace {

using flopscope::v1::OpenRangesResponse;
using flopscope::v1::RankOpenRanges;
using flopscope::v1::ThreadOpenStack;

double Seconds(int64_t now_ns, int64_t then_ns) {
  return std::max<double>(0, static_cast<double>(now_ns - then_ns) / 1e9);
}

// The start of a thread's oldest open range (a stack's first range is its outermost).
int64_t OldestStart(const ThreadOpenStack& thread) {
  int64_t oldest = INT64_MAX;
  if (thread.modules_size() > 0) oldest = std::min(oldest, thread.modules(0).start_ns());
  if (thread.phases_size() > 0) oldest = std::min(oldest, thread.phases(0).start_ns());
  return oldest;
}

// The thread a rank's place is taken from: the oldest outermost range, then the deepest.
const ThreadOpenStack* PlaceThread(const RankOpenRanges& rank) {
  const ThreadOpenStack* chosen = nullptr;
  for (const ThreadOpenStack& thread : rank.threads()) {
    if (thread.modules_size() + thread.phases_size() == 0) continue;
    if (chosen == nullptr) {
      chosen = &thread;
      continue;
    }
    const auto key = [](const ThreadOpenStack& t) {
      return std::make_tuple(OldestStart(t), -static_cast<int64_t>(t.module_depth()),
                             t.thread_id());
    };
    if (key(thread) < key(*chosen)) chosen = &thread;
  }
  return chosen;
}

RankState StateOf(const RankOpenRanges& rank, const ThreadOpenStack* thread) {
  if (!rank.problem().empty()) return RankState::kUnreadable;
  if (!rank.has_snapshot()) return RankState::kNoSnapshot;
  if (!rank.connected()) return thread == nullptr ? RankState::kEnded : RankState::kGone;
  return thread == nullptr ? RankState::kNothingOpen : RankState::kOpen;
}

RankPlace PlaceOf(const RankOpenRanges& rank, int64_t now_ns) {
  RankPlace place;
  place.rank = rank.rank();
  place.problem = rank.problem();
  const ThreadOpenStack* thread = PlaceThread(rank);
  place.state = StateOf(rank, thread);
  if (rank.has_snapshot()) place.snapshot_age_s = Seconds(now_ns, rank.snapshot_ns());
  if (thread == nullptr) return place;
  place.thread_id = thread->thread_id();
  int64_t innermost_start = INT64_MIN;
  if (thread->phases_size() > 0) {
    const auto& phase = thread->phases(thread->phases_size() - 1);
    place.phase_path = phase.path();
    place.phase = LastComponent(phase.path());
    innermost_start = phase.start_ns();
    place.phase_age_s = Seconds(now_ns, phase.start_ns());
  }
  if (thread->modules_size() > 0) {
    const auto& module = thread->modules(thread->modules_size() - 1);
    place.module = module.path();
    innermost_start = module.start_ns();
  }
  place.age_s = Seconds(now_ns, innermost_start);
  place.oldest_age_s = Seconds(now_ns, OldestStart(*thread));
  for (const ThreadOpenStack& other : rank.threads()) {
    if (other.modules_size() + other.phases_size() == 0) continue;
    place.oldest_age_s = std::max(place.oldest_age_s, Seconds(now_ns, OldestStart(other)));
  }
  return place;
}

bool Running(RankState state) {
  return state == RankState::kOpen || state == RankState::kNothingOpen;
}

std::vector<PlaceGroup> GroupRunning(std::vector<RankPlace>* ranks) {
  // (nothing open, module, phase path) -> group; ranks come in rank order.
  std::map<std::tuple<bool, std::string, std::string>, PlaceGroup> by_place;
  for (const RankPlace& rank : *ranks) {
    if (!Running(rank.state)) continue;
    const bool nothing = rank.state == RankState::kNothingOpen;
    PlaceGroup& group = by_place[{nothing, rank.module, rank.phase_path}];
    if (group.ranks.empty()) {
      group =
          PlaceGroup{rank.module, rank.phase_path, rank.phase, nothing, {}, rank.age_s, rank.age_s};
    }
    group.ranks.push_back(rank.rank);
    group.min_age_s = std::min(group.min_age_s, rank.age_s);
    group.max_age_s = std::max(group.max_age_s, rank.age_s);
  }
  std::vector<PlaceGroup> groups;
  for (auto& [key, group] : by_place) groups.push_back(std::move(group));
  std::sort(groups.begin(), groups.end(), [](const PlaceGroup& a, const PlaceGroup& b) {
    if (a.ranks.size() != b.ranks.size()) return a.ranks.size() > b.ranks.size();
    return a.ranks.front() < b.ranks.front();
  });
  for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
    for (RankPlace& rank : *ranks) {
      if (std::find(groups[g].ranks.begin(), groups[g].ranks.end(), rank.rank) !=
          groups[g].ranks.end()) {
        rank.group = g;
      }
    }
  }
  return groups;
}

}  // namespace

std::string LastComponent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

namespace {

// The running ranks (in rank order) split by `key`; the largest part when it is larger than
// every other and there are at least two parts, else empty.
template <typename Key>
std::vector<const RankPlace*> StrictMajority(const std::vector<const RankPlace*>& running, Key key,
                                             size_t* parts) {
  std::map<decltype(key(*running.front())), std::vector<const RankPlace*>> split;
  for (const RankPlace* rank : running) split[key(*rank)].push_back(rank);
  *parts = split.size();
  if (split.size() < 2) return {};
  std::vector<const RankPlace*>* largest = nullptr;
  bool tie = false;
  for (auto& [k, members] : split) {
    if (largest == nullptr || members.size() > largest->size()) {
      largest = &members;
      tie = false;
    } else if (members.size() == largest->size()) {
      tie = true;
    }
  }
  return tie ? std::vector<const RankPlace*>{} : *largest;
}

Majority Describe(const std::vector<const RankPlace*>& members, bool by_module) {
  Majority majority;
  const RankPlace& first = *members.front();
  majority.nothing_open = first.state == RankState::kNothingOpen;
  majority.phase_path = first.phase_path;
  majority.phase = first.phase;
  bool same_module = true;
  for (const RankPlace* rank : members) same_module = same_module && rank->module == first.module;
  if (by_module || same_module) majority.module = first.module;
  majority.age_s = -1;
  for (const RankPlace* rank : members) {
    majority.ranks.push_back(rank->rank);
    const double age = majority.module.empty() ? rank->phase_age_s : rank->age_s;
    if (majority.age_s < 0 || age < majority.age_s) majority.age_s = age;
  }
  majority.age_s = std::max(0.0, majority.age_s);
  return majority;
}

}  // namespace

WhereAnswer PlaceRanks(const OpenRangesResponse& response) {
  WhereAnswer answer;
  for (const RankOpenRanges& rank : response.ranks()) {
    answer.ranks.push_back(PlaceOf(rank, response.now_ns()));
  }
  std::sort(answer.ranks.begin(), answer.ranks.end(),
            [](const RankPlace& a, const RankPlace& b) { return a.rank < b.rank; });
  answer.groups = GroupRunning(&answer.ranks);
  std::vector<const RankPlace*> running;
  for (const RankPlace& rank : answer.ranks) {
    if (Running(rank.state)) running.push_back(&rank);
  }
  if (running.size() < 2) return answer;
  // The phase level first; the module level only within one phase.
  size_t phases = 0;
  bool by_module = false;
  std::vector<const RankPlace*> majority = StrictMajority(
      running,
      [](const RankPlace& r) {
        return std::make_pair(r.state == RankState::kNothingOpen, r.phase_path);
      },
      &phases);
  if (phases == 1) {
    size_t modules = 0;
    by_module = true;
    majority = StrictMajority(
        running, [](const RankPlace& r) { return r.module; }, &modules);
  }
  if (majority.empty()) return answer;
  answer.majority = Describe(majority, by_module);
  for (RankPlace& rank : answer.ranks) {
    if (!Running(rank.state)) continue;
    if (std::find(answer.majority.ranks.begin(), answer.majority.ranks.end(), rank.rank) !=
        answer.majority.ranks.end()) {
      continue;
    }
    rank.flagged = true;
    answer.flagged.push_back(rank.rank);
  }
  return answer;
}

}  // namespace flopscope::client
