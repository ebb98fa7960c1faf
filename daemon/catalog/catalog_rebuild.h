#pragma once

#include <cstddef>
#include <string>

#include "daemon/catalog/catalog.h"

namespace flopscope::daemon {

// Lists in `catalog` every rank file under `data_dir` (jobs/<job>/rank-<NNNNN>.sqlite, or the
// .alt.sqlite beside one left alone, as queries pick it: left_alone_files.h), with the
// identity of its latest session and its totals, as if its streams had connected and ended.
// For a catalog started anew (the old one was damaged and moved aside, or deleted) while rank
// files remain: their jobs are listed and reported again instead of hidden. Files that cannot
// be read are skipped with a warning; returns how many ranks were listed.
size_t RelistRankFiles(const std::string& data_dir, Catalog* catalog);

}  // namespace flopscope::daemon
