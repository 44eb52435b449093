// The one loop behind every chunked algorithm here (ring reduce-scatter and
// all-gather, the pipelined chain broadcast): a sequence of items, each a message
// from `recv_from` and/or a message to `send_to`, where an item's send may depend
// on an earlier item's receive having been consumed (reduced, or simply landed).
//
// Receives are posted ahead, up to `recv_depth` items past the last consumed
// one, so the next chunk is on the wire while this one is reduced; a send is
// posted once the data it carries is final and it is at most `send_window` items
// ahead of this rank's own consumption. That window bounds how far a rank can
// lead the next one, so a receiver posting enough ahead (ring.h,
// ring_recv_depth) never has a message arrive before its receive, which would
// cost a real transport a copy into its unexpected-message buffers. Items whose
// message is empty are skipped on both ends (both compute the same sizes).
//
// Deadlock-free for the rings and chains built on it: a rank waits only on a
// receive, and the send it waits for is held back only while the sender has
// consumed less than the waiter (readiness and window are both measured against
// the sender's consumption), which cannot hold all the way round a ring; sends
// complete on their own once the receiver has posted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "datachannel/collectives/comm.h"

namespace thd::detail {

struct PipelineShape {
  size_t items = 0;
  int send_to = -1;    // group rank, -1: this rank only receives
  int recv_from = -1;  // group rank, -1: this rank only sends
  // Item j's send may go once item j - send_lag has been consumed; items below
  // send_lag (or all, without a receive side) may go at once.
  size_t send_lag = 0;
  // How many receives may be posted and not yet consumed (scratch slots).
  size_t recv_depth = 1;
  // How far sends may run ahead of this rank's consumption (with a receive
  // side; a rank that only sends posts everything at once). Keep it at most the
  // receiver's recv_depth.
  size_t send_window = 1;
};

// send_span(j) -> std::span<const uint8_t>      what item j sends
// recv_span(j, slot) -> std::span<uint8_t>      where item j lands (slot < recv_depth)
// consume(j, slot)                              after item j landed, before its slot is reused
template <typename SendSpan, typename RecvSpan, typename Consume>
void run_pipeline(Comm& comm, const PipelineShape& shape, SendSpan&& send_span, RecvSpan&& recv_span,
                  Consume&& consume) {
  const bool receives = shape.recv_from >= 0;
  const bool sends = shape.send_to >= 0;
  const size_t depth = shape.recv_depth == 0 ? 1 : shape.recv_depth;
  std::vector<Request> recv_slots(receives ? depth : 0);
  std::vector<Request> sent(sends ? shape.items : 0);
  size_t posted_recvs = 0, consumed = 0, posted_sends = 0;

  auto post_ready = [&] {
    while (receives && posted_recvs < shape.items && posted_recvs < consumed + depth) {
      const size_t slot = posted_recvs % depth;
      std::span<uint8_t> into = recv_span(posted_recvs, slot);
      recv_slots[slot] = into.empty() ? Request() : comm.irecv(into, shape.recv_from);
      ++posted_recvs;
    }
    while (sends && posted_sends < shape.items &&
           (!receives || ((posted_sends < shape.send_lag || posted_sends - shape.send_lag < consumed) &&
                          posted_sends < consumed + shape.send_window))) {
      std::span<const uint8_t> from = send_span(posted_sends);
      if (!from.empty()) sent[posted_sends] = comm.isend(from, shape.send_to);
      ++posted_sends;
    }
  };

  while (receives && consumed < shape.items) {
    post_ready();
    const size_t slot = consumed % depth;
    comm.wait(recv_slots[slot]);
    recv_slots[slot] = Request();
    consume(consumed, slot);
    ++consumed;
  }
  post_ready();
  for (const Request& r : sent) comm.wait(r);
}

}  // namespace thd::detail
