// Which commands a graph holds, decided once for the master, whose capture records
// them, and the worker, which checks every command of a DefineGraph against it
// (hostile bytes included), so the two cannot disagree.
#pragma once

#include "protocol/codec.h"

namespace thd::protocol {

enum class InGraph {
  // Runs in its stream's order: a capture records it and every replay runs it.
  Held,
  // Not ordered by a stream (a stream's or an event's lifetime, the graph commands
  // themselves): a capture lets it go out at once, as outside a capture.
  SentAtOnce,
  // A sync point, a query or bytes from the master: an error inside a capture.
  Refused,
};

// Refused for a value outside the enum.
InGraph in_graph(fb::Op op);

}  // namespace thd::protocol
