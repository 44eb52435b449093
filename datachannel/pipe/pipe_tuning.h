// How a message-library transport spins, yields, buffers and watches, with the
// environment's and the host's say (docs/datachannel.md lists the variables).
#pragma once

#include <chrono>
#include <cstddef>

#include <thd/datachannel.h>

#include "datachannel/net/auth.h"

namespace thd::detail::pipe {

struct PipeTuning {
  // Payloads up to this size travel inside their control message.
  size_t inline_bytes = 8192 - 48;
  // How long a waiter drives the pipe itself before it blocks (THD_PIPE_SPIN_US).
  // Longer than the way back from blocking (a thread wake-up or two, tens of µs to
  // milliseconds on a busy host): with 50 µs, one moment of another process on a
  // core made both ranks of a ping-pong block on every message, each too late for
  // the other's spin, until chance put them back in step (thousands of round
  // trips over 100 µs in 300000 where raw UCX had a hundred).
  std::chrono::microseconds spin_budget{1000};
  // Whether a spinning waiter gives its core away between rounds: with more ranks
  // than cores, the rank it waits for may need that core to send.
  bool yield_while_spinning = false;
  // A yield that took at least this long ran another thread (YieldBackoff):
  // THD_PIPE_YIELD_SWITCH_NS, else measured on this host (measure_yield_switch)
  // when the waiters yield.
  std::chrono::nanoseconds yield_switch{1000};
  // How long destruction lets queued sends finish.
  std::chrono::milliseconds close_linger{2000};
  // How long withdrawing a transfer the library has already matched waits for it.
  std::chrono::milliseconds withdraw_wait{5000};
  // Bytes of messages that arrived before their receive held per peer (payloads
  // and UnexpectedMessage::kOverheadBytes each; THD_MAX_UNEXPECTED_BYTES). The
  // libraries cannot hold a sender back, so a peer past it is cut off: PeerLost,
  // and what it sends later is read and dropped. Above what a master-worker
  // session can have in flight to a node (its flow control's 256 MiB and the
  // commands' heads), so that no well-behaved session meets it.
  size_t unexpected_limit = size_t{1} << 30;
  // Pipes that cannot tell a dead peer (MessagePipe::detects_silent_peer_loss):
  // every peer is sent a heartbeat this often, and one silent for heartbeat_timeout
  // is lost (THD_PIPE_HEARTBEAT_TIMEOUT_MS).
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds heartbeat_timeout{4000};
  // Point-to-point messages whose envelope fits the pipe's tags are matched by the
  // library itself, where the pipe can (MessagePipe::matches_natively: ucx, libfabric);
  // THD_PIPE_NATIVE_MATCHING=0 sends them as control messages like the rest.
  bool native_matching = true;
  // Small blocking sends and receives of those messages go straight to the pipe,
  // where it offers that (PipeTransport's direct path); THD_PIPE_DIRECT=0 sends
  // them through the engine like the rest.
  bool direct_path = true;
};

// The defaults with THD_PIPE_SPIN_US, THD_PIPE_HEARTBEAT_TIMEOUT_MS,
// THD_PIPE_YIELD_SWITCH_NS, THD_PIPE_NATIVE_MATCHING, THD_PIPE_DIRECT and
// THD_MAX_UNEXPECTED_BYTES applied; ValueError for a
// malformed value.
PipeTuning pipe_tuning_from_env(const net::EnvLookup& env = net::process_env);
// The environment's tuning, adjusted for this rank's host: with more ranks on it
// than cores, waiters yield their core while they spin, and the cost of a yield
// that switches is measured unless THD_PIPE_YIELD_SWITCH_NS gave it.
PipeTuning pipe_tuning_for(const DataChannelOptions& options);

}  // namespace thd::detail::pipe
