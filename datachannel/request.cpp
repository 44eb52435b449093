// thd::Request: waiting on a RequestState with the op's deadline.
#include <algorithm>

#include <thd/datachannel.h>
#include <thd/interrupt.h>

#include "datachannel/check.h"
#include "datachannel/group_state.h"
#include "datachannel/request_state.h"
#include "datachannel/transport.h"

namespace thd {

namespace {

using detail::RequestState;

// A composite request (a collective) is failed by its own executor at its
// deadline, with the error that says who was missing; a waiter only steps in
// after this much more, in case the executor itself is stuck.
constexpr std::chrono::milliseconds kCompositeGrace{2000};

std::exception_ptr timeout_error(const RequestState& s) {
  try {
    THD_THROW_AT(TimeoutError, s.op, s.rank, -1, "did not complete before its deadline");
  } catch (...) {
    return std::current_exception();
  }
}

// Fails a request whose deadline passed; the transport withdraws it first so it
// never touches the request's memory again.
void expire(const std::shared_ptr<RequestState>& s) {
  if (s->finished()) return;
  if (s->engine != nullptr) {
    s->engine->cancel(s, timeout_error(*s));
  } else {
    s->fail(timeout_error(*s));
  }
}

bool wait_once(RequestState& s, net::Deadline until) {
  if (s.engine != nullptr) return s.engine->wait(s, until);
  return s.block_until(until);
}


net::Deadline expiry(const RequestState& s) {
  const net::Deadline own = s.deadline();
  if (s.engine != nullptr || own == net::Deadline::max()) return own;
  return own + kCompositeGrace;
}

void rethrow_if_failed(const RequestState& s) {
  if (s.status() == RequestState::Failed) std::rethrow_exception(s.error);
}

}  // namespace

void Request::cancel(std::exception_ptr why) const {
  if (!state_) return;
  // Refused whether or not the collective has finished yet: a call that fails or
  // not by timing alone made a flaky test (a cancel just after test() said pending).
  if (state_->engine == nullptr) {
    THD_THROW_AT(ValueError, state_->op, state_->rank, -1,
                 "only point-to-point requests can be cancelled; a collective runs on every member");
  }
  if (state_->finished()) return;
  if (!why) {
    try {
      THD_THROW_AT(Error, state_->op, state_->rank, -1, "cancelled");
    } catch (...) {
      why = std::current_exception();
    }
  }
  state_->engine->cancel(state_, why);
}

bool Request::test() const {
  if (!state_) return true;
  if (state_->finished()) return true;
  // A request without a deadline (a watch on a peer) is tested once per command on
  // a worker's hot path: it reads no clock.
  const net::Deadline own = expiry(*state_);
  if (own != net::Deadline::max() && net::Clock::now() >= own) expire(state_);
  return state_->finished();
}

void Request::wait() const {
  if (!state_) return;
  // A point-to-point request's expiry is its own deadline, which its transport's
  // waiter fixes at its first clock read if the request's call left it open.
  const bool finished = state_->engine != nullptr ? detail::wait_own_interruptibly(*state_)
                                                  : detail::wait_until_interruptibly(*state_, expiry(*state_));
  if (!finished) expire(state_);
  rethrow_if_failed(*state_);
}

WaitStatus Request::wait_for(std::chrono::milliseconds timeout) const {
  if (!state_) return WaitStatus::Ready;
  const net::Deadline mine = net::deadline_after(timeout);
  const net::Deadline own = expiry(*state_);
  if (!detail::wait_until_interruptibly(*state_, std::min(mine, own))) {
    if (net::Clock::now() < own) return WaitStatus::Timeout;
    expire(state_);
  }
  rethrow_if_failed(*state_);
  return WaitStatus::Ready;
}

void Request::wait(std::chrono::milliseconds timeout) const {
  if (wait_for(timeout) == WaitStatus::Timeout) {
    THD_THROW_AT(TimeoutError, state_->op, state_->rank, -1,
                 "not finished after waiting {} ms; the operation is still pending", timeout.count());
  }
}

int Request::source() const {
  if (!state_ || state_->status() != RequestState::Done || state_->source < 0) return -1;
  if (!state_->group_ranks) return state_->source;
  return detail::position_in(*state_->group_ranks, state_->source);
}

size_t Request::bytes() const {
  return state_ && state_->status() == RequestState::Done ? state_->bytes : 0;
}

std::exception_ptr Request::error() const {
  return state_ && state_->status() == RequestState::Failed ? state_->error : nullptr;
}

Message Request::take_message() const {
  if (!state_ || !state_->any_length) {
    THD_THROW_AT(ValueError, state_ ? std::string(state_->op) : std::string("take_message"),
                 state_ ? state_->rank : -1, -1, "take_message: this request is not an irecv_message");
  }
  RequestState& s = *state_;
  if (s.status() != RequestState::Done) {
    THD_THROW_AT(ValueError, s.op, s.rank, -1, "take_message: the receive {}",
                 s.finished() ? "failed; wait() raises its error" : "is still pending; wait for it first");
  }
  if (s.message_taken) THD_THROW_AT(ValueError, s.op, s.rank, -1, "take_message: the message was taken already");
  s.message_taken = true;
  // Counted when taken: its length was unknown when the receive was posted.
  if (s.engine != nullptr) s.engine->count_recv(s.bytes);
  return Message(std::move(s.message), s.bytes, source());
}

void wait_all(std::span<const Request> requests) {
  std::exception_ptr first;
  // Every request is waited for even after one fails, so none is left running
  // with buffers the caller is about to reuse.
  for (const Request& r : requests) {
    try {
      r.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace thd

namespace thd::detail {

bool wait_until_interruptibly(RequestState& s, net::Deadline until) {
  if (s.finished()) return true;
  if (!interrupt_check_installed()) return wait_once(s, until);
  for (;;) {
    const net::Deadline period_end = std::min(until, net::Clock::now() + kInterruptCheckPeriod);
    if (wait_once(s, period_end)) return true;
    if (period_end >= until) return false;
    check_interrupt();
  }
}

bool wait_own_interruptibly(RequestState& s) {
  if (s.finished()) return true;
  if (s.engine == nullptr || interrupt_check_installed()) return wait_until_interruptibly(s, s.deadline());
  return s.engine->wait_own(s);
}

}  // namespace thd::detail
