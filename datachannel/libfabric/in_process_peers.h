// Endpoints of one process that are each other's peers, kept open until every
// one of them is done with the others.
//
// The shm provider (libfabric 1.17) reaches a peer endpoint of the same process
// through that endpoint's own memory, not a mapping of its own: once the peer
// closes, a send to it (a goodbye, a late message) or a reply to one of its
// rendezvous touches freed memory and the process crashes. Separate processes each
// map the other's region and are not affected. So where the provider does this
// (shares_in_process_peers), a closing pipe parks its endpoint, with whatever the
// provider may still write into, in its Lifeline, and the endpoint closes only
// when no pipe in this process that has it as a peer remains.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "datachannel/libfabric/endpoint.h"

namespace thd::detail::libfabric {

// Whether libfabric provider `provider` reaches endpoints of the same process
// through their own memory (shm).
bool shares_in_process_peers(std::string_view provider) noexcept;

// One endpoint's lifetime, shared by its pipe and every pipe of this process that
// has it as a peer.
class Lifeline {
 public:
  // What outlives the pipe: its endpoint and the ops the provider may still touch
  // (owned type-erased: only their destruction matters here).
  struct Remains {
    Endpoint endpoint;
    std::vector<std::shared_ptr<void>> ops;
  };

  // Registers an endpoint of this process under its address (fi_getname), where
  // in-process peers find it.
  static std::shared_ptr<Lifeline> enroll(std::vector<uint8_t> name);
  // The lifeline of the endpoint of this process at `name`, or null when none is
  // (a peer in another process, or one already gone).
  static std::shared_ptr<Lifeline> find(std::span<const uint8_t> name);
  // How many endpoints of this process are enrolled (open or parked).
  static size_t enrolled();

  explicit Lifeline(std::vector<uint8_t> name) : name_(std::move(name)) {}
  // Closes the parked endpoint (the endpoint first: after it the provider touches
  // no op), then frees the ops, and leaves the registry.
  ~Lifeline();
  Lifeline(const Lifeline&) = delete;
  Lifeline& operator=(const Lifeline&) = delete;

  // The pipe is done: its endpoint stays open until the last holder lets go.
  void park(Remains remains);

 private:
  std::vector<uint8_t> name_;
  std::unique_ptr<Remains> parked_;
};

}  // namespace thd::detail::libfabric
