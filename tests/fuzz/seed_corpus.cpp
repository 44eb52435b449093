// thd_fuzz_seed OUT_DIR: writes the seed corpus of every fuzz target into
// OUT_DIR/<target>/ (tests/fuzz/corpus/ in the repository), from real traffic:
// - worker_batch: what a real master sends node 0 of a 2-node session (and what
//   node 1 sends it) while small programs run, recorded in-process;
// - tcp_wire: the tcp backend's Hello and the frame headers of the envelopes real
//   point-to-point calls and collectives make;
// - auth_handshake, store_server, store_wire: a real handshake and real TCPStore
//   requests and replies, recorded by a loopback relay between client and server;
// - pipe_control: real sends and receives of the pipe engine, and control messages
//   built by the encoder its sender uses.
// Seeds are small (a few KiB) and few (a dozen or two per target).
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <map>
#include <thread>

#include <thd/thd.h>

#include "datachannel/net/auth.h"
#include "datachannel/pipe/small_message_header.h"
#include "datachannel/small_header.h"
#include "datachannel/store/tcp_store_wire.h"
#include "datachannel/wire.h"
#include "master/session.h"
#include "protocol/codec.h"
#include "message_versions.h"
#include "protocol/framing.h"
#include "seed_traffic.h"
#include "worker/worker.h"
#include "worker_script.h"

namespace thd::fuzz {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Bytes = std::vector<uint8_t>;

constexpr milliseconds kTimeout{30000};
constexpr const char* kToken = "fuzz-token-7d1e";  // the targets' token: recorded proofs are real ones

class Seeds {
 public:
  explicit Seeds(fs::path root) : root_(std::move(root)) {}
  void write(const std::string& target, const std::string& name, const Bytes& bytes) {
    const fs::path dir = root_ / target;
    fs::create_directories(dir);
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ++written_;
  }
  int written() const { return written_; }

 private:
  fs::path root_;
  int written_ = 0;
};

void append(Bytes& out, std::span<const uint8_t> bytes) { out.insert(out.end(), bytes.begin(), bytes.end()); }

// ---- worker_batch ----------------------------------------------------------------------

// What node 0 (rank 1) was sent, as the worker target's records: the messages on
// the command tag, uploads, and what node 1 sent.
std::vector<Record> node0_script(const std::vector<SentMessage>& log) {
  std::vector<Record> out;
  for (const SentMessage& m : log) {
    if (m.dst != 1 || (m.src != 0 && m.src != 2)) continue;
    const bool raw = m.envelope.kind.dtype == detail::kRawBytes;
    const bool commands = m.src == 0 && m.envelope.tag == protocol::kCommandTag;
    if (m.src == 0 && m.envelope.tag == protocol::kUploadTag) {
      out.push_back({RecordKind::Upload, m.envelope.kind.dtype, m.bytes});
      continue;
    }
    if (m.src == 0 && !commands) continue;
    const RecordKind message_kind = commands ? RecordKind::Message : RecordKind::PeerMessage;
    // A message of bytes is a protocol message (send_message sends each as one);
    // anything else is kept as the frame it is.
    if (raw) {
      out.push_back({message_kind, kRawDType, m.bytes});
      continue;
    }
    out.push_back({commands ? RecordKind::CommandFrame : RecordKind::PeerFrame, m.envelope.kind.dtype, m.bytes});
  }
  return out;
}

// Runs `program` as the master of a session with two workers over a recorded
// in-process world; returns everything every rank sent.
std::vector<SentMessage> record_session(const std::function<void()>& program) {
  auto log = std::make_shared<TrafficLog>();
  auto channels = recorded_world(3, log, kTimeout);
  std::thread node0([&] { worker::serve(channels[1]); });
  std::thread node1([&] { worker::serve(channels[2]); });
  MasterWorkerOptions options;
  options.timeout = kTimeout;
  auto session = std::make_shared<master::Session>(channels[0], options, std::function<void()>{});
  session->start(/*session_id=*/1, /*seed=*/1);
  master::set_current_session(session);
  try {
    program();
  } catch (...) {
    shutdown();
    node0.join();
    node1.join();
    throw;
  }
  shutdown();
  node0.join();
  node1.join();
  return log->take();
}

const std::vector<std::pair<std::string, std::function<void()>>>& programs() {
  static const std::vector<std::pair<std::string, std::function<void()>>> all = {
      {"elementwise",
       [] {
         auto x = DistributedFloatTensor({4, 4}).fill_(2);
         auto y = DistributedTensor::randn({4, 4});
         auto z = x + y;
         auto w = (z * 3.0).relu();
         w.exp_();
         auto c = w.clamp(0.0, 10.0).sigmoid().tanh();
         auto d = 2.0 - c / x;
         auto e = where(d.gt(x), d, x.neg()).to(kFloat64);
         e.add_(1.5);
         (void)e.get();
       }},
      {"creation",
       [] {
         auto a = DistributedTensor::arange(0, 12, 2, kInt64);
         auto b = DistributedTensor::linspace(0, 1, 5, kFloat64);
         auto c = DistributedTensor::eye(3, 4, kFloat32);
         auto d = DistributedTensor::randint(0, 10, {2, 3}, kInt32);
         auto e = DistributedTensor::zeros({2, 2}, kBool);
         auto f = DistributedTensor::full({3}, 7, kUInt8);
         auto g = DistributedTensor::rand({2}, kBFloat16);
         auto h = DistributedTensor::ones({2}, kFloat16).to(kInt8, true);
         (void)c.get();
         (void)h.get();
       }},
      {"views_indexing",
       [] {
         auto a = DistributedTensor::arange(24, kFloat32).view({2, 3, 4});
         auto t = a.transpose(0, 2).contiguous();
         auto s = a.slice(1, 0, 3, 2).narrow(2, 1, 2);
         auto sel = a.select(0, 1);
         auto e = DistributedTensor::ones({1, 4}).expand({3, 4}).clone();
         auto idx = DistributedTensor::arange(2, kInt64);
         auto is = sel.index_select(0, idx);
         auto g = sel.gather(1, DistributedTensor::zeros({3, 2}, kInt64));
         auto f = sel.masked_fill(sel.gt(5), 0);
         auto j = cat({sel, e}, 0);
         auto k = stack({sel, e}, 1);
         auto parts = j.split(2, 0);
         auto p = a.permute({2, 0, 1}).flatten(0, 1).unsqueeze(0).squeeze(0).reshape({4, 6});
         (void)p.get();
         (void)parts[0].get();
       }},
      {"reductions_linalg",
       [] {
         auto a = DistributedTensor::randn({3, 4});
         auto b = DistributedTensor::randn({4, 5});
         auto r = a.sum({1}, true) + a.mean() + a.max({0}) .sum() + a.norm(2.0) + a.var() + a.std({1}).sum();
         auto am = a.argmax(1);
         auto any = a.gt(0).any({1});
         auto m = a.matmul(b).softmax(1).log_softmax(0);
         auto mm = a.mm(b);
         auto bm = DistributedTensor::randn({2, 3, 4}).bmm(DistributedTensor::randn({2, 4, 2}));
         auto ad = DistributedTensor::zeros({3, 5}).addmm(a, b, 0.5, 2.0);
         auto v = DistributedTensor::randn({4});
         auto dot = v.dot(v);
         auto outer = v.outer(v);
         auto [values, indices] = a.sort(1, true);
         auto [top, at] = a.topk(2, 1);
         (void)r.get();
         (void)indices.get();
         (void)at.get();
       }},
      {"scatter_inplace",
       [] {
         auto a = DistributedTensor::zeros({3, 4});
         auto index = DistributedTensor::zeros({2, 4}, kInt64);
         auto src = DistributedTensor::ones({2, 4});
         auto b = a.scatter(0, index, src);
         a.scatter_(1, DistributedTensor::ones({3, 1}, kInt64), 5.0);
         a.masked_fill_(a.eq(5.0), -1.0);
         a.copy_(b);
         a.mul_(b).sub_(1.0).pow_(2.0).neg_().abs_().sqrt_();
         a.clamp_(0.0, 3.0);
         (void)a.get();
       }},
      {"uploads_fetch",
       [] {
         auto up = Tensor::randn({8}).dist_send();
         auto big = Tensor::arange(2000, kFloat32).dist_send();  // past the inline size: a body frame
         auto both = up.sum() + big.sum();
         auto i = DistributedTensor::from(Tensor::arange(6, kInt64).view({2, 3}));
         (void)both.get();
         (void)i.get();
         synchronize();
       }},
      {"streams_events",
       [] {
         Stream s = Stream::create(0);
         DistributedTensor x;
         {
           StreamScope in(s);
           x = DistributedTensor::ones({16}).mul(2.0);
         }
         Event e = s.record();
         current_stream(0).wait(e);
         auto y = x + 1.0;
         (void)e.query();
         e.synchronize();
         (void)s.query();
         Event timed(true);
         timed.record(s);
         timed.synchronize();
         (void)stats();
         (void)y.get();
       }},
      {"to_node_collectives",
       [] {
         auto a = DistributedTensor::arange(8, kFloat32);
         auto moved = a.to_node(1);
         DistributedTensor b;
         {
           NodeScope on(1);
           b = DistributedTensor::ones({8});
         }
         auto back = b.to_node(0);
         std::vector<DistributedTensor> group = {a, b};
         all_reduce(group, ReduceOp::Sum);
         broadcast(group, 0);
         auto gathered = all_gather(group);
         auto scattered = reduce_scatter(group, ReduceOp::Max);
         (void)gathered[0].get();
         (void)scattered[0].get();
         (void)back.get();
       }},
      {"graphs",
       [] {
         auto x = DistributedTensor::zeros({8});
         DistributedTensor y;
         Graph g = thd::capture([&] {
           x.add_(1.0);
           y = (x * 2.0).relu().view({2, 4});
           auto made = DistributedTensor::arange(8, kFloat32);
           x.copy_(made.mul(0.5).add(x));
         });
         g.replay();
         x.fill_(3.0);
         g.replay();
         (void)y.get();
         g.reset();
         synchronize();
       }},
      {"remote_errors",
       [] {
         auto a = DistributedTensor::arange(4, kFloat32);
         auto bad = DistributedTensor::full({2}, 9, kInt64);  // out of range: only the worker can tell
         auto picked = a.index_select(0, bad);
         auto later = picked + 1.0;
         try {
           (void)later.get();
         } catch (const RemoteError&) {
         }
         (void)a.get();
       }},
  };
  return all;
}

void worker_seeds(Seeds& seeds, std::vector<SentMessage>& all_traffic) {
  for (const auto& [name, program] : programs()) {
    std::vector<SentMessage> log = record_session(program);
    seeds.write("worker_batch", name, encode_records(node0_script(log)));
    all_traffic.insert(all_traffic.end(), log.begin(), log.end());
  }
}

// ---- tcp_wire ------------------------------------------------------------------------

// Every collective of the DataChannel over three ranks: the envelopes they send.
std::vector<SentMessage> collective_traffic() {
  auto log = std::make_shared<TrafficLog>();
  auto channels = recorded_world(3, log, kTimeout);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      DataChannel& dc = *channels[static_cast<size_t>(r)];
      Tensor t = Tensor::full({6}, r + 1, kFloat32);
      dc.all_reduce(t, ReduceOp::Sum);
      dc.broadcast(t, 1);
      dc.reduce(t, 2, ReduceOp::Max);
      Tensor gathered = Tensor::empty({3, 6}, kFloat32);
      dc.all_gather(gathered, t);
      Tensor part = Tensor::empty({2}, kFloat32);
      dc.reduce_scatter(part, t, ReduceOp::Sum);
      Tensor root_out = r == 0 ? Tensor::empty({3, 6}, kFloat32) : Tensor();
      dc.gather(root_out, t, 0);
      Tensor blocks = Tensor::full({3, 2}, r, kInt64);
      Tensor mine = Tensor::empty({2}, kInt64);
      dc.scatter(mine, r == 0 ? blocks : Tensor(), 0);
      Tensor swapped = Tensor::empty({3, 2}, kInt64);
      dc.all_to_all(swapped, blocks);
      dc.barrier();
    });
  }
  for (auto& t : ranks) t.join();
  return log->take();
}

void tcp_wire_seeds(Seeds& seeds, const std::vector<SentMessage>& traffic) {
  detail::Hello hello;
  hello.rank = 1;
  hello.world_size = 3;
  for (size_t i = 0; i < hello.channel.size(); ++i) hello.channel[i] = static_cast<uint8_t>(0x30 + i);
  const auto hello_bytes = detail::encode_hello(hello);
  // One seed per kind of call (op and raw or typed), with up to four of its frames.
  std::map<std::pair<int, bool>, Bytes> by_kind;
  std::map<std::pair<int, bool>, int> frames;
  for (const SentMessage& m : traffic) {
    const auto key = std::make_pair(static_cast<int>(m.envelope.kind.op), m.envelope.kind.dtype == detail::kRawBytes);
    if (frames[key] >= 4) continue;
    Bytes& seed = by_kind[key];
    if (seed.empty()) append(seed, hello_bytes);
    // As tcp sends it: a small point-to-point message with the short header.
    if (detail::fits_small_header(m.envelope)) {
      std::array<uint8_t, detail::kSmallHeaderBytes> small{};
      detail::write_small_header(small.data(), m.envelope);
      append(seed, small);
    } else {
      append(seed, detail::encode_frame_header(m.envelope, m.bytes.size()));
    }
    ++frames[key];
  }
  for (const auto& [key, seed] : by_kind) {
    seeds.write("tcp_wire", fmt::format("{}_{}", detail::message_op_name(static_cast<detail::MessageOp>(key.first)),
                                        key.second ? "bytes" : "tensor"),
                seed);
  }
  // A large message's rendezvous, step by step.
  const SentMessage& any = traffic.front();
  Bytes rendezvous;
  append(rendezvous, hello_bytes);
  append(rendezvous, detail::encode_frame_header(any.envelope, 1 << 20, detail::FrameKind::ReadyToSend, 7));
  append(rendezvous, detail::encode_rendezvous_frame(detail::FrameKind::ClearToSend, 7));
  append(rendezvous, detail::encode_rendezvous_frame(detail::FrameKind::Data, 7, 1 << 20));
  append(rendezvous, detail::encode_rendezvous_frame(detail::FrameKind::Decline, 8));
  append(rendezvous, detail::encode_rendezvous_frame(detail::FrameKind::Revoke, 9));
  seeds.write("tcp_wire", "rendezvous", rendezvous);
}

// ---- auth_handshake, store_server, store_wire ---------------------------------------------

struct StoreSession {
  Bytes to_server;  // after the handshake
  Bytes to_client;
  Bytes client_hello;
  Bytes server_hello_and_finish;
};

// A TCPStore client's session with a real server through the relay: `use` runs
// against the client.
StoreSession record_store(const std::function<void(Store&)>& use) {
  TCPStoreOptions server_options;
  server_options.is_server = true;
  server_options.wait_for_workers = false;
  server_options.token = kToken;
  server_options.timeout = kTimeout;
  TCPStore server(server_options);
  TcpRelay relay("127.0.0.1", server.port());
  {
    TCPStoreOptions client_options;
    client_options.port = relay.port();
    client_options.token = kToken;
    client_options.timeout = kTimeout;
    TCPStore client(client_options);
    use(client);
  }
  relay.finish(milliseconds(5000));
  StoreSession s;
  const auto& up = relay.to_server();
  const auto& down = relay.to_client();
  const size_t hello = net::kClientHelloBytes;
  const size_t greeting = net::kServerHelloBytes + net::kServerFinishBytes;
  s.client_hello.assign(up.begin(), up.begin() + static_cast<ptrdiff_t>(std::min(hello, up.size())));
  if (up.size() > hello) s.to_server.assign(up.begin() + static_cast<ptrdiff_t>(hello), up.end());
  s.server_hello_and_finish.assign(down.begin(), down.begin() + static_cast<ptrdiff_t>(std::min(greeting, down.size())));
  if (down.size() > greeting) s.to_client.assign(down.begin() + static_cast<ptrdiff_t>(greeting), down.end());
  return s;
}

void use_every_command(Store& store) {
  store.set("alpha", Bytes{1, 2, 3});
  (void)store.get("alpha");
  (void)store.add("counter", 5);
  (void)store.add("counter", -2);
  (void)store.compare_set("alpha", Bytes{1, 2, 3}, Bytes{4});
  (void)store.compare_set("missing", Bytes{}, Bytes{9});
  store.wait({"alpha", "counter"});
  (void)store.check({"alpha", "nope"});
  (void)store.delete_key("alpha");
  (void)store.num_keys();
  try {
    (void)store.get("never", milliseconds(1));
  } catch (const TimeoutError&) {
  }
}

// Splits a stream of length-prefixed frames into their bodies.
std::vector<Bytes> frame_bodies(const Bytes& stream) {
  std::vector<Bytes> out;
  size_t at = 0;
  while (stream.size() - at >= 4) {
    const uint32_t n = detail::store_wire::decode_length(stream.data() + at);
    if (stream.size() - at - 4 < n) break;
    out.emplace_back(stream.begin() + static_cast<ptrdiff_t>(at + 4), stream.begin() + static_cast<ptrdiff_t>(at + 4 + n));
    at += 4 + n;
  }
  return out;
}

Bytes store_client(bool authenticated, const Bytes& bytes) {
  Bytes out{static_cast<uint8_t>(authenticated ? 1 : 0), static_cast<uint8_t>(bytes.size()),
            static_cast<uint8_t>(bytes.size() >> 8)};
  append(out, bytes);
  return out;
}

void network_seeds(Seeds& seeds) {
  const StoreSession s = record_store(use_every_command);
  // auth_handshake: the ClientHello in one piece and in three, the server's bytes
  // to a client, and the ClientHello to a server; mode 1 with the recorded nonce.
  Bytes whole{0, static_cast<uint8_t>(net::kClientHelloBytes - 1)};
  append(whole, s.client_hello);
  seeds.write("auth_handshake", "server_state_machine", whole);
  Bytes pieces{0};
  for (size_t at = 0, piece = 0; at < s.client_hello.size(); at += piece) {
    piece = std::min<size_t>(s.client_hello.size() - at, 24 + at % 7);
    pieces.push_back(static_cast<uint8_t>(piece - 1));
    append(pieces, std::span(s.client_hello).subspan(at, piece));
  }
  seeds.write("auth_handshake", "server_state_machine_pieces", pieces);
  Bytes proved{1, 0};
  append(proved, std::span(s.client_hello).subspan(8, net::kNonceBytes));
  seeds.write("auth_handshake", "server_proved", proved);
  Bytes client{2};
  append(client, s.server_hello_and_finish);
  seeds.write("auth_handshake", "client_blocking", client);
  Bytes server{3};
  append(server, s.client_hello);
  seeds.write("auth_handshake", "server_blocking", server);

  // store_server: the client's requests behind a handshake the target runs; raw bytes
  // before any handshake; two clients, one waiting for a key the other sets.
  seeds.write("store_server", "every_command", store_client(true, s.to_server));
  Bytes raw = store_client(false, s.client_hello);
  seeds.write("store_server", "raw_client_hello", raw);
  const StoreSession waiter = record_store([](Store& st) {
    try {
      st.wait({"late"}, milliseconds(1));
    } catch (const TimeoutError&) {
    }
    try {
      (void)st.get("late", milliseconds(1));
    } catch (const TimeoutError&) {
    }
  });
  const StoreSession setter = record_store([](Store& st) { st.set("late", Bytes{7}); });
  Bytes two = store_client(true, waiter.to_server);
  append(two, store_client(true, setter.to_server));
  seeds.write("store_server", "waiter_and_setter", two);

  // store_wire: each request body and each reply body.
  int i = 0;
  for (const Bytes& body : frame_bodies(s.to_server)) seeds.write("store_wire", fmt::format("request_{:02}", i++), body);
  i = 0;
  for (const Bytes& body : frame_bodies(s.to_client)) seeds.write("store_wire", fmt::format("reply_{:02}", i++), body);
}

// ---- pipe_control --------------------------------------------------------------------

void put16(Bytes& out, size_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}

// op 2: a raw receive of `size` bytes from rank 1.
void receive(Bytes& out, uint8_t context, uint8_t tag, size_t size) {
  out.insert(out.end(), {2, 0, context, tag, 0, detail::kRawBytes});
  put16(out, size);
  put16(out, size);
}

void pipe_seeds(Seeds& seeds) {
  Bytes inline_send;  // posted first, then a real inline message
  receive(inline_send, 0, 5, 16);
  inline_send.insert(inline_send.end(), {4, 0, 5});
  put16(inline_send, 16);
  seeds.write("pipe_control", "inline_send", inline_send);

  Bytes announced;  // a real message past the inline size: announced, then its payload
  announced.insert(announced.end(), {4, 1, 2});
  put16(announced, 12000);
  receive(announced, 1, 2, 12000);
  seeds.write("pipe_control", "announced_send", announced);

  // Control messages as the engine's sender writes them, each then received.
  detail::Envelope e;
  e.context = 3;
  e.tag = 7;
  e.kind.count = 4;
  // op 0 with a header and a 4-byte payload, then the receive that takes it.
  auto inject_then_receive = [&](std::span<const uint8_t> header, std::initializer_list<uint8_t> payload) {
    Bytes seed{0};
    put16(seed, header.size() + payload.size());
    append(seed, header);
    seed.insert(seed.end(), payload);
    receive(seed, 3, 7, payload.size());
    return seed;
  };
  seeds.write("pipe_control", "injected_inline",
              inject_then_receive(detail::encode_frame_header(e, 4), {1, 2, 3, 4}));
  // A small point-to-point message, with its 16-byte header.
  std::array<uint8_t, detail::kSmallHeaderBytes> small_header{};
  detail::write_small_header(small_header.data(), e);
  seeds.write("pipe_control", "injected_small", inject_then_receive(small_header, {5, 6, 7, 8}));

  Bytes rendezvous;  // an announcement of data tag 1, its receive, then the payload
  e.kind.count = 64;
  const auto announce = detail::encode_frame_header(e, 64, detail::FrameKind::ReadyToSend, 1);
  rendezvous.push_back(0);
  put16(rendezvous, announce.size());
  append(rendezvous, announce);
  receive(rendezvous, 3, 7, 64);
  rendezvous.insert(rendezvous.end(), {1, 0});
  put16(rendezvous, 64);
  rendezvous.insert(rendezvous.end(), 64, 0x11);
  seeds.write("pipe_control", "injected_announced", rendezvous);

  Bytes heartbeat{0, 4, 0, 't', 'h', 'd', 'B'};
  seeds.write("pipe_control", "heartbeat", heartbeat);

  Bytes cancelled;
  receive(cancelled, 9, 9, 32);
  cancelled.push_back(3);
  cancelled.insert(cancelled.end(), {4, 9, 9});
  put16(cancelled, 32);
  seeds.write("pipe_control", "cancelled_receive", cancelled);
}

}  // namespace
}  // namespace thd::fuzz

// thd_fuzz_seed --restamp FILE...: worker_batch inputs (regressions crafted for an
// older protocol version) rewritten in place with this build's version.
int restamp(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "thd_fuzz_seed: cannot read %s\n", argv[i]);
      return 1;
    }
    const thd::fuzz::Bytes input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t restamped = 0;
    const thd::fuzz::Bytes output = thd::fuzz::restamp_versions(input, &restamped);
    if (restamped != 0) {
      std::ofstream out(argv[i], std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(output.data()), static_cast<std::streamsize>(output.size()));
    }
    std::printf("%s: %zu version fields set to %u\n", argv[i], restamped, thd::protocol::kVersion);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--restamp") {
    try {
      return restamp(argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "thd_fuzz_seed: %s\n", e.what());
      return 1;
    }
  }
  if (argc != 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fprintf(stderr, "usage: thd_fuzz_seed OUT_DIR\n  writes the seed corpus of every fuzz target into "
                         "OUT_DIR/<target>/ (tests/fuzz/corpus in the repository)\n"
                         "       thd_fuzz_seed --restamp FILE...\n  sets the protocol version of the Messages "
                         "in worker_batch inputs to this build's\n");
    return argc == 2 ? 0 : 2;
  }
  try {
    thd::fuzz::Seeds seeds{std::filesystem::path(argv[1])};
    std::vector<thd::fuzz::SentMessage> traffic;
    thd::fuzz::worker_seeds(seeds, traffic);
    const auto collectives = thd::fuzz::collective_traffic();
    traffic.insert(traffic.end(), collectives.begin(), collectives.end());
    thd::fuzz::tcp_wire_seeds(seeds, traffic);
    thd::fuzz::network_seeds(seeds);
    thd::fuzz::pipe_seeds(seeds);
    std::printf("thd_fuzz_seed: wrote %d seeds under %s\n", seeds.written(), argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "thd_fuzz_seed: %s\n", e.what());
    return 1;
  }
  return 0;
}
