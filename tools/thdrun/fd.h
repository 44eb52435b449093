// The launcher's pipes and files live in the one owned-fd type thd has (header
// only; nothing of the DataChannel is linked), so no error path leaks a
// descriptor into the ranks it starts later.
#pragma once

#include "datachannel/net/fd.h"

namespace thd::launch {

using net::UniqueFd;

}  // namespace thd::launch
