// Fuzz target pipe_control: the control-message engine under the mpi, ucx and
// libfabric backends (datachannel/pipe/pipe_transport.cpp, on_control and what it
// feeds: matching, inline and announced payloads, the checks before a byte lands,
// cancel), over the in-memory pipe of its unit tests. Rank 0 is the engine under
// test; rank 1 is a real engine too, which proves the token, and the input speaks
// for it besides: bytes injected on the control tag or a data tag, real sends, and
// rank 0's own receives and cancels, in input order.
//
//   input := op*
//   op 0  control   length[2] bytes            injected from rank 1, control tag
//   op 1  data      tag[1] length[2] bytes     injected from rank 1 on a data tag
//   op 2  receive   from[1] context[1] tag[1] op[1] dtype[1] count[2] size[2]
//                                              posted by rank 0 (from: 1, any, 0)
//   op 3  cancel                               rank 0 withdraws its oldest receive
//   op 4  send      context[1] tag[1] size[2]  a real send of raw bytes from rank 1
//
// What must hold: whatever rank 1 sends, rank 0 delivers a message only into a
// receive that matches it (never more bytes than the receive holds) or drops rank
// 1 as lost; a message rank 1 sends after all that is matched, or fails with
// PeerLost, within the deadline — never a hang, a crash or a leak.
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include <thd/store.h>

#include "byte_reader.h"
#include "datachannel/pipe/pipe_transport.h"
#include "fuzz_target.h"
#include "memory_pipe.h"

namespace {

using namespace thd;
using detail::Envelope;
using detail::RequestState;
using detail::pipe::PipeTransport;
using std::chrono::milliseconds;

constexpr milliseconds kPatience{5000};
// A context no receive of the input uses (they take one byte): the final message's.
constexpr uint32_t kFinalContext = 1000;

detail::pipe::PipeTuning tuning() {
  detail::pipe::PipeTuning t;
  // What rank 1 sends and rank 0 never takes must not hold destruction for long.
  t.close_linger = milliseconds(50);
  t.withdraw_wait = milliseconds(200);
  return t;
}

struct Pair {
  Pair() : fabric(2) {
    auto store = std::make_shared<HashStore>(kPatience);
    std::thread other([&] { one = make(1, store); });
    zero = make(0, store);
    other.join();
  }
  std::unique_ptr<PipeTransport> make(int rank, const std::shared_ptr<Store>& store) {
    return std::make_unique<PipeTransport>(fabric.make_pipe(rank),
                                           detail::pipe::PipeAuth{net::AuthToken("fuzz-token-7d1e", "fuzz"), store,
                                                                  kPatience},
                                           tuning());
  }
  test::MemoryFabric fabric;
  std::unique_ptr<PipeTransport> zero;
  std::unique_ptr<PipeTransport> one;
};

std::shared_ptr<RequestState> new_request(int rank) {
  return std::make_shared<RequestState>("fuzz", net::deadline_after(kPatience), nullptr, rank);
}

Envelope raw(uint32_t context, int64_t tag, size_t bytes) {
  Envelope e;
  e.context = context;
  e.tag = tag;
  e.kind.count = bytes;
  return e;
}

struct Receive {
  std::vector<uint8_t> buffer;
  std::shared_ptr<RequestState> request;
};

void check_received(const Receive& r) {
  if (r.request->status() != RequestState::Done) return;
  THD_FUZZ_CHECK(r.request->bytes == r.buffer.size(), "a receive completed with a size other than its own");
}

void run(fuzz::ByteReader& in) {
  Pair pair;
  std::deque<std::unique_ptr<Receive>> receives;  // rank 0's, oldest first; alive until the engines are gone
  std::vector<std::vector<uint8_t>> sent;         // rank 1's payloads, alive as long
  std::vector<std::shared_ptr<RequestState>> sends;
  while (!in.empty()) {
    switch (in.u8() % 5) {
      case 0: {
        auto bytes = in.take(in.u16());
        pair.fabric.inject(1, 0, detail::pipe::kControlTag, {bytes.begin(), bytes.end()});
        break;
      }
      case 1: {
        const uint32_t tag = 1 + in.u8();
        auto bytes = in.take(in.u16());
        pair.fabric.inject(1, 0, tag, {bytes.begin(), bytes.end()});
        break;
      }
      case 2: {
        const uint8_t from = in.u8() % 3;
        const int src = from == 0 ? 1 : from == 1 ? kAnySource : 0;
        Envelope e = raw(in.u8(), in.u8(), 0);
        e.kind.op = static_cast<detail::MessageOp>(in.u8() % (static_cast<uint8_t>(detail::kLastMessageOp) + 1));
        e.kind.dtype = in.u8();
        e.kind.count = in.u16();
        auto r = std::make_unique<Receive>();
        r->buffer.resize(in.u16() % 20000);
        r->request = new_request(0);
        pair.zero->post_recv(r->buffer, src, e, r->request);
        receives.push_back(std::move(r));
        break;
      }
      case 3:
        if (!receives.empty()) {
          pair.zero->cancel(receives.front()->request, nullptr);
          check_received(*receives.front());
          receives.pop_front();
        }
        break;
      case 4: {
        const uint32_t context = in.u8();
        const int64_t tag = in.u8();
        sent.emplace_back(in.u16() % 20000, 0x5a);
        sends.push_back(new_request(1));
        pair.one->post_send(sent.back(), 0, raw(context, tag, sent.back().size()), sends.back());
        break;
      }
    }
  }
  // Control messages from one peer are handled in send order: once this one has
  // met its receive (or rank 1 was dropped), every injected byte before it has been
  // read. (Input may have injected a message of the same envelope: it matches
  // first, and may fail the receive as a mismatch. Finishing is what must hold.)
  std::vector<uint8_t> last(8, 1);
  std::vector<uint8_t> got(8, 0);
  auto send = new_request(1);
  auto recv = new_request(0);
  pair.zero->post_recv(got, 1, raw(kFinalContext, 0, got.size()), recv);
  pair.one->post_send(last, 0, raw(kFinalContext, 0, last.size()), send);
  THD_FUZZ_CHECK(pair.zero->wait(*recv, net::deadline_after(kPatience)),
                 "a message sent after the input was neither delivered nor failed");
  for (const auto& r : receives) check_received(*r);
  pair.zero.reset();
  pair.one.reset();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ByteReader in({data, size});
  run(in);
  return 0;
}
