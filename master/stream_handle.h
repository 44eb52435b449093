// The master's side of a stream and of an event: ids the master assigned, the node
// they live on, and the lazy destroy their last handle queues.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include <thd/stream.h>

namespace thd::master {

class Session;

struct StreamHandle {
  StreamHandle(std::weak_ptr<Session> session, int node, uint32_t id, Stream::Priority priority)
      : session(std::move(session)), node(node), id(id), priority(priority) {}
  // A created stream's last handle destroys it on its node (its queued work still runs).
  ~StreamHandle();
  StreamHandle(const StreamHandle&) = delete;
  StreamHandle& operator=(const StreamHandle&) = delete;

  std::weak_ptr<Session> session;
  const int node;
  const uint32_t id;  // 0: the node's default stream
  const Stream::Priority priority;
};

struct EventHandle {
  EventHandle(std::weak_ptr<Session> session, uint64_t id, bool timing)
      : session(std::move(session)), id(id), timing(timing) {}
  // Forgets the event on its node (streams waiting on it keep it until they are done).
  ~EventHandle();
  EventHandle(const EventHandle&) = delete;
  EventHandle& operator=(const EventHandle&) = delete;

  // The node of its first record (-1 before); binds it then, ValueError for another.
  int bind(int node);
  int node() const;

  std::weak_ptr<Session> session;
  const uint64_t id;
  const bool timing;

 private:
  mutable std::mutex mu_;
  int node_ = -1;
};

// The stream id commands for `node` carry on this thread (scopes.cpp): the
// innermost StreamScope's stream of that node, else 0 (the default stream).
uint32_t scoped_stream(int node);
// The handle of that stream, when a StreamScope set one (else null).
std::shared_ptr<StreamHandle> scoped_stream_handle(int node);
void push_stream_scope(std::shared_ptr<StreamHandle> stream);
void pop_stream_scope();
// Sets this thread's current node; returns the previous one.
int exchange_scoped_node(int node);

}  // namespace thd::master
