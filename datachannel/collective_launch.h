// Issuing one collective on a group: what every collective of the DataChannel
// (data_channel_collectives.cpp) and the list forms (collective_lists.cpp) share.
#pragma once

#include <functional>
#include <vector>

#include <thd/datachannel.h>

#include "datachannel/collectives/comm.h"
#include "datachannel/envelope.h"
#include "datachannel/group_state.h"

namespace thd::detail {

// Takes the call's sequence number now (issue order), then runs `body` on the
// queue of its tag; a blocking call on an idle queue runs it on this thread. The
// request keeps `keep` alive until it finishes; `body` throwing fails it.
Request launch_collective(GroupState& g, const MessageKind& kind, const CollectiveOptions& o, std::vector<Tensor> keep,
                          std::function<void(Comm&)> body, bool blocking);

}  // namespace thd::detail
