#include "protocol/graph_ops.h"

#include <thd/config.h>

namespace thd::protocol {

InGraph in_graph(fb::Op op) {
  switch (op) {
    case fb::Op::Create:
    case fb::Op::ManualSeed:
    case fb::Op::SendTo:
    case fb::Op::RecvFrom:
    case fb::Op::Unary:
    case fb::Op::Binary:
    case fb::Op::BinaryScalar:
    case fb::Op::Clamp:
    case fb::Op::Fill:
    case fb::Op::CopyFrom:
    case fb::Op::Cast:
    case fb::Op::Reduce:
    case fb::Op::Softmax:
    case fb::Op::Matmul:
    case fb::Op::Addmm:
    case fb::Op::ViewOp:
    case fb::Op::IndexOp:
    case fb::Op::Scatter:
    case fb::Op::MaskedFill:
    case fb::Op::Where:
    case fb::Op::Join:
    case fb::Op::Split:
    case fb::Op::Sort:
    case fb::Op::Collective:
    case fb::Op::EventRecord:
    case fb::Op::EventWait:
    case fb::Op::EventNotify:
    case fb::Op::EventWaitRemote:
    case fb::Op::ToDevice:
#if THD_ENABLE_TEST_HOOKS
    case fb::Op::TestLatch:
#endif
      return InGraph::Held;
    case fb::Op::StreamCreate:
    case fb::Op::StreamDestroy:
    case fb::Op::EventDestroy:
    case fb::Op::DefineGraph:
    case fb::Op::DropGraph:
      return InGraph::SentAtOnce;
    case fb::Op::NONE:
    case fb::Op::Upload:
    case fb::Op::Fetch:
    case fb::Op::Free:
    case fb::Op::Sync:
    case fb::Op::EventQuery:
    case fb::Op::StreamQuery:
    case fb::Op::StatsQuery:
    case fb::Op::ClockQuery:
    case fb::Op::TraceDump:
    case fb::Op::ReplayGraph:
      return InGraph::Refused;
  }
  return InGraph::Refused;  // a value outside the enum (hostile bytes)
}

}  // namespace thd::protocol
