// The world a fuzzed worker node lives in, without a network: a Transport for
// node 0 (rank 1) of a session whose master (rank 0) and other node (rank 2) are
// played from a script (worker_script.h).
//
// Receives are answered at once: from the master on the command tag with its next
// command frame (none left: the master is lost, which ends the session), on the
// upload tag with its next upload frame, from the other node with its next frame
// whatever the tag; nothing left to answer with fails the receive with a
// TimeoutError at once (the deadline it would have reached). A receive from the
// master on any other tag (the session's watch for a lost master) stays pending
// until it is cancelled. Frames are checked
// against the receive as every transport checks them (accept_match). Every send
// completes at once; what the worker sends the master on the reply tag is checked
// to be whole, verifiable Messages (an invariant: a worker never answers with
// garbage, whatever it was sent). THD_FUZZ_VERBOSE=1 prints each reply, for triage.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include <thd/datachannel.h>

#include "datachannel/matching.h"
#include "datachannel/transport.h"
#include "worker_script.h"

namespace thd::fuzz {

class ScriptedTransport final : public detail::Transport {
 public:
  static constexpr int kMaster = 0;
  static constexpr int kWorker = 1;  // node 0: the node under test
  static constexpr int kPeer = 2;    // node 1
  static constexpr int kWorldSize = 3;

  explicit ScriptedTransport(const std::vector<Record>& script);
  ~ScriptedTransport() override;

  std::string_view name() const noexcept override { return "scripted"; }
  void post_send(std::span<const uint8_t> data, int dst, const detail::Envelope& envelope,
                 const std::shared_ptr<detail::RequestState>& request) override;
  void post_recv(std::span<uint8_t> data, int src, const detail::Envelope& envelope,
                 const std::shared_ptr<detail::RequestState>& request) override;
  void cancel(const std::shared_ptr<detail::RequestState>& request, std::exception_ptr why) override;
  std::exception_ptr peer_error(int world_rank) const override;

  // Replies the worker sent the master (each verified).
  size_t replies() const;

 private:
  struct Frame {
    detail::MessageKind kind;
    std::vector<uint8_t> bytes;
  };
  static Frame raw_frame(std::vector<uint8_t> bytes);
  static Frame typed_frame(uint8_t dtype, std::vector<uint8_t> bytes);
  void verify_reply(std::span<const uint8_t> message);

  mutable std::mutex mu_;
  std::deque<Frame> commands_;
  std::deque<Frame> uploads_;
  std::deque<Frame> peer_;
  std::vector<std::shared_ptr<detail::RequestState>> parked_;  // receives nothing will answer
  size_t replies_ = 0;
  const bool verbose_;  // THD_FUZZ_VERBOSE: print each reply (for triage)
};

// The worker's channel over a ScriptedTransport: rank 1 of 3, with an in-memory
// store for the groups its collectives make.
std::shared_ptr<DataChannel> scripted_channel(std::shared_ptr<ScriptedTransport> transport,
                                              std::chrono::milliseconds timeout);

}  // namespace thd::fuzz
