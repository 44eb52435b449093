// The worker's decoder and dispatcher against malformed, truncated, hostile and
// mutated input, fed straight onto its command tag: every bad message gets an error
// reply, the worker never crashes or stops serving, and a well-formed session still
// works afterwards.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include <thd/cuda.h>
#include <thd/datachannel.h>
#include <thd/memory.h>
#include <thd/store.h>

#include "datachannel/test_util.h"
#include "protocol/codec.h"
#include "protocol/framing.h"
#include "worker/worker.h"

namespace thd {
namespace {

namespace fb = protocol::fb;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The test is the master (rank 0); a thread serves as worker node 0 (rank 1).
class WorkerDecoder : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = std::make_shared<HashStore>();
    std::shared_ptr<DataChannel> worker_channel;
    auto errors = test::run_rank_threads(2, [&](int rank) {
      DataChannelOptions o{.store = store, .rank = rank, .world_size = 2, .timeout = seconds(2),
                           .token = test::kToken};
      auto dc = DataChannel::create("tcp", o);
      (rank == 0 ? master_ : worker_channel) = dc;
    });
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    worker_ = std::thread([this, worker_channel] {
      try {
        end_ = worker::serve(worker_channel, limits_);
      } catch (const std::exception& e) {
        worker_error_ = e.what();
      }
    });
    replies_ = std::make_unique<protocol::MessageReceiver>(master_, 1, protocol::kReplyTag, size_t{1} << 20);
  }

  void TearDown() override {
    if (worker_.joinable()) {
      send(finish([](flatbuffers::FlatBufferBuilder& b) { return std::make_pair(fb::Body::Goodbye, fb::CreateGoodbye(b).Union()); }));
      worker_.join();
    }
    replies_.reset();
    master_->shutdown();
  }

  template <typename F>
  static std::vector<uint8_t> finish(F&& body, uint32_t version = protocol::kVersion) {
    flatbuffers::FlatBufferBuilder b;
    auto [type, offset] = body(b);
    b.Finish(fb::CreateMessage(b, version, type, offset));
    return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
  }

  // A batch of commands built by `add` (which returns them).
  template <typename F>
  static std::vector<uint8_t> batch(F&& add, uint64_t seq = 1, bool want_ack = false) {
    return finish([&](flatbuffers::FlatBufferBuilder& b) {
      std::vector<flatbuffers::Offset<fb::Command>> commands = add(b);
      return std::make_pair(fb::Body::CommandBatch,
                            fb::CreateCommandBatch(b, seq, want_ack, b.CreateVector(commands)).Union());
    });
  }

  void send(const std::vector<uint8_t>& message) {
    protocol::send_message(*master_, 1, protocol::kCommandTag, message, seconds(2));
  }

  // Fetches tensor `id` into `got` with op id `op_id`; waits for everything sent
  // so far (the fetch comes after it).
  void fetch_into(uint64_t op_id, uint64_t id, Tensor& got) {
    const int64_t tag = protocol::kFetchTagBase + static_cast<int64_t>(op_id);
    Request r = master_->irecv(got, 1, {.tag = tag, .timeout = seconds(5)});
    send(batch([&](flatbuffers::FlatBufferBuilder& b) {
      return std::vector{fb::CreateCommand(b, op_id, fb::Op::Fetch, fb::CreateFetch(b, id, tag).Union())};
    }));
    r.wait();
  }
  Tensor fetch(uint64_t op_id, uint64_t id, const Shape& shape, DType dtype) {
    Tensor got = Tensor::zeros(shape, dtype);
    fetch_into(op_id, id, got);
    return got;
  }

  // The next reply, verified.
  std::vector<uint8_t> next_reply() {
    Message m;
    const auto deadline = std::chrono::steady_clock::now() + seconds(10);
    while (!replies_->next(m, milliseconds(100))) {
      if (std::chrono::steady_clock::now() > deadline) ADD_FAILURE() << "no reply within 10 s";
      if (std::chrono::steady_clock::now() > deadline) return {};
    }
    (void)protocol::verify_message(m, "test");
    return {m.data(), m.data() + m.size()};
  }

  // Expects the next reply to be an error whose message mentions `needle`.
  void expect_error(const std::string& needle) {
    const std::vector<uint8_t> bytes = next_reply();
    ASSERT_FALSE(bytes.empty());
    const fb::Message* m = fb::GetMessage(bytes.data());
    ASSERT_EQ(m->body_type(), fb::Body::OpFailed) << "expected an error reply mentioning \"" << needle << "\"";
    const std::string text = m->body_as_OpFailed()->message()->str();
    EXPECT_NE(text.find(needle), std::string::npos) << text;
  }

  // A well-formed round trip: create a tensor, fetch it, check its bytes.
  void expect_still_serving(uint64_t id) {
    const int64_t tag = protocol::kFetchTagBase + static_cast<int64_t>(id);
    Tensor got = Tensor::zeros({3}, kInt32);
    Request r = master_->irecv(got, 1, {.tag = tag, .timeout = seconds(5)});
    send(batch([&](flatbuffers::FlatBufferBuilder& b) {
      const fb::Scalar seven(fb::ScalarKind::Int, 7, 0);
      const fb::Scalar zero;
      return std::vector{
          fb::CreateCommand(b, 1, fb::Op::Create,
                            fb::CreateCreate(b, id, fb::CreateKind::Full, fb::DType::Int32, b.CreateVector<int64_t>({3}),
                                             &seven, &zero, &zero, &zero)
                                .Union()),
          fb::CreateCommand(b, 2, fb::Op::Fetch, fb::CreateFetch(b, id, tag).Union())};
    }));
    r.wait();
    EXPECT_EQ(got.to_vector<int32_t>(), (std::vector<int32_t>{7, 7, 7}));
  }

  worker::SessionLimits limits_;  // set before SetUp by fixtures that need other limits
  std::shared_ptr<DataChannel> master_;
  std::thread worker_;
  std::unique_ptr<protocol::MessageReceiver> replies_;
  worker::SessionEnd end_ = worker::SessionEnd::Refused;
  std::string worker_error_;
};

TEST_F(WorkerDecoder, GarbageTruncatedAndWrongVersionMessagesGetErrorReplies) {
  send(std::vector<uint8_t>(100, 0xAB));
  expect_error("verification");
  const auto good = batch([](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{fb::CreateCommand(b, 1, fb::Op::Sync, fb::CreateSync(b, 1).Union())};
  });
  send(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(good.size() / 2)));
  expect_error("verification");
  send({1, 2});
  expect_error("too short");
  send(finish([](flatbuffers::FlatBufferBuilder& b) { return std::make_pair(fb::Body::Goodbye, fb::CreateGoodbye(b).Union()); }, 99));
  expect_error("version 99");
  // Replies are for masters: a worker refuses them.
  send(finish([](flatbuffers::FlatBufferBuilder& b) { return std::make_pair(fb::Body::Ack, fb::CreateAck(b, 1).Union()); }));
  expect_error("does not accept Ack");
  expect_still_serving(100);
}

TEST_F(WorkerDecoder, MalformedFramesGetErrorReplies) {
  // A tensor's message where a message of bytes belongs.
  master_->send(Tensor::ones({4}, kFloat32), 1, {.tag = protocol::kCommandTag});
  expect_error("malformed message");
  expect_still_serving(101);
}

TEST_F(WorkerDecoder, BadCommandsPoisonTheirOutputsAndReportTheOp) {
  send(batch([](flatbuffers::FlatBufferBuilder& b) {
    const fb::Scalar zero;
    return std::vector{
        // Inputs that were never created.
        fb::CreateCommand(b, 11, fb::Op::Binary, fb::CreateBinary(b, 50, fb::BinaryOp::Add, 998, 999).Union()),
        // A union type without its table.
        fb::CreateCommand(b, 12, fb::Op::Unary, flatbuffers::Offset<void>()),
        // A negative size, a dtype code outside the enum, a huge allocation.
        fb::CreateCommand(b, 13, fb::Op::Create,
                          fb::CreateCreate(b, 51, fb::CreateKind::Zeros, fb::DType::Float32,
                                           b.CreateVector<int64_t>({-4}), &zero, &zero, &zero, &zero)
                              .Union()),
        fb::CreateCommand(b, 14, fb::Op::Create,
                          fb::CreateCreate(b, 52, fb::CreateKind::Zeros, static_cast<fb::DType>(200),
                                           b.CreateVector<int64_t>({4}), &zero, &zero, &zero, &zero)
                              .Union()),
        fb::CreateCommand(b, 15, fb::Op::Create,
                          fb::CreateCreate(b, 53, fb::CreateKind::Zeros, fb::DType::Float32,
                                           b.CreateVector<int64_t>({int64_t{1} << 40, int64_t{1} << 20}), &zero,
                                           &zero, &zero, &zero)
                              .Union()),
        // An id the master never reuses, defined twice; a free of an unknown id.
        fb::CreateCommand(b, 16, fb::Op::Create,
                          fb::CreateCreate(b, 54, fb::CreateKind::Ones, fb::DType::Float32, b.CreateVector<int64_t>({2}),
                                           &zero, &zero, &zero, &zero)
                              .Union()),
        fb::CreateCommand(b, 17, fb::Op::Create,
                          fb::CreateCreate(b, 54, fb::CreateKind::Ones, fb::DType::Float32, b.CreateVector<int64_t>({2}),
                                           &zero, &zero, &zero, &zero)
                              .Union()),
        fb::CreateCommand(b, 18, fb::Op::Free, fb::CreateFree(b, b.CreateVector<uint64_t>({12345})).Union()),
        // A view out of range, and a poisoned input consumed (no second report).
        fb::CreateCommand(b, 19, fb::Op::ViewOp,
                          fb::CreateViewOp(b, 55, fb::ViewKind::Select, 54, 0, 0, 0, 0, 9).Union()),
        fb::CreateCommand(b, 20, fb::Op::Unary, fb::CreateUnary(b, 56, fb::UnaryOp::Neg, 50).Union()),
    };
  }));
  expect_error("tensor id 999 is not live");
  expect_error("carries no arguments");
  expect_error("negative size");
  expect_error("dtype code 200");
  const std::vector<uint8_t> huge = next_reply();  // bad_alloc or thd's own size error: either is a reply
  ASSERT_FALSE(huge.empty());
  EXPECT_EQ(fb::GetMessage(huge.data())->body_type(), fb::Body::OpFailed);
  expect_error("already in use");
  expect_error("tensor id 12345 is not live");
  expect_error("out of");  // select index 9 out of range
  // Fetching the tensor poisoned through its input names the ORIGINAL failure.
  send(batch([](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{fb::CreateCommand(b, 21, fb::Op::Fetch, fb::CreateFetch(b, 56, protocol::kFetchTagBase).Union())};
  }));
  const std::vector<uint8_t> failed = next_reply();
  ASSERT_FALSE(failed.empty());
  const fb::Message* m = fb::GetMessage(failed.data());
  ASSERT_EQ(m->body_type(), fb::Body::FetchFailed);
  EXPECT_EQ(m->body_as_FetchFailed()->op_id(), 11u);
  EXPECT_EQ(m->body_as_FetchFailed()->op_name()->str(), "add");
  expect_still_serving(102);
}

TEST_F(WorkerDecoder, DevicesOutsideTheEnumOrTheNodeAreRefusedWithTheReason) {
  // A device type outside the enum, negative and absurd GPU indices, and a GPU this
  // worker does not have (its count is this process's: the worker is a thread here).
  const int gpus = cuda::device_count();
  const fb::Device bad_type(static_cast<fb::DeviceType>(7), 0);
  const fb::Device negative(fb::DeviceType::CUDA, -1);
  const fb::Device absurd(fb::DeviceType::CUDA, 1 << 30);
  const fb::Device lacking(fb::DeviceType::CUDA, gpus);
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    const fb::Scalar zero;
    std::vector<flatbuffers::Offset<fb::Command>> commands;
    uint64_t id = 60;
    for (const fb::Device* d : {&bad_type, &negative, &absurd, &lacking}) {
      commands.push_back(fb::CreateCommand(b, id, fb::Op::Create,
                                           fb::CreateCreate(b, id, fb::CreateKind::Ones, fb::DType::Float32,
                                                            b.CreateVector<int64_t>({2}), &zero, &zero, &zero, &zero,
                                                            0, 0, 0, d)
                                               .Union()));
      ++id;
    }
    // A healthy CPU tensor moved to the GPU the worker lacks.
    commands.push_back(fb::CreateCommand(b, 70, fb::Op::Create,
                                         fb::CreateCreate(b, 70, fb::CreateKind::Ones, fb::DType::Float32,
                                                          b.CreateVector<int64_t>({2}), &zero, &zero, &zero, &zero)
                                             .Union()));
    commands.push_back(fb::CreateCommand(b, 71, fb::Op::ToDevice, fb::CreateToDevice(b, 71, 70, &lacking).Union()));
    // A ToDevice without a device is a copy to the CPU.
    commands.push_back(fb::CreateCommand(b, 72, fb::Op::ToDevice, fb::CreateToDevice(b, 72, 70).Union()));
    return commands;
  }));
  expect_error("device type 7");
  expect_error("index -1 is out of range");
  expect_error("out of range");
  const std::string lacks = "has no device cuda:" + std::to_string(gpus) + ": its worker has " +
                            std::to_string(gpus) + " GPU";
  expect_error(lacks);
  expect_error(lacks);
  // The copy to the CPU exists and holds ones.
  const int64_t tag = protocol::kFetchTagBase + 72;
  Tensor got = Tensor::zeros({2}, kFloat32);
  Request r = master_->irecv(got, 1, {.tag = tag, .timeout = seconds(5)});
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{fb::CreateCommand(b, 73, fb::Op::Fetch, fb::CreateFetch(b, 72, tag).Union())};
  }));
  r.wait();
  EXPECT_EQ(got.to_vector<float>(), (std::vector<float>{1, 1}));
  expect_still_serving(103);
}

// A worker whose session may hold 4 KiB of tensors.
class WorkerUploads : public WorkerDecoder {
 protected:
  WorkerUploads() { limits_.memory_bytes = 4096; }

  static std::vector<uint8_t> upload(uint64_t id, fb::DType dtype, const std::vector<int64_t>& shape) {
    return batch([&](flatbuffers::FlatBufferBuilder& b) {
      return std::vector{fb::CreateCommand(
          b, id, fb::Op::Upload, fb::CreateUpload(b, id, dtype, b.CreateVector<int64_t>(shape)).Union())};
    });
  }
  // The upload's bytes, sent as the master sends them.
  void send_bytes(const Tensor& t) { master_->send(t, 1, {.tag = protocol::kUploadTag, .timeout = seconds(5)}); }

  Tensor fetch(uint64_t id, Tensor into) {
    const int64_t tag = protocol::kFetchTagBase + static_cast<int64_t>(id);
    Request r = master_->irecv(into, 1, {.tag = tag, .timeout = seconds(5)});
    send(batch([&](flatbuffers::FlatBufferBuilder& b) {
      return std::vector{fb::CreateCommand(b, id + 1000, fb::Op::Fetch, fb::CreateFetch(b, id, tag).Union())};
    }));
    r.wait();
    return into;
  }
};

TEST_F(WorkerUploads, ARefusedUploadsBytesDoNotReachTheNextUpload) {
  // Past the session's limit: refused when its batch is read. Its bytes still come,
  // sent whole (8 KiB) or announced first (2 MiB, past the rendezvous size).
  uint64_t id = 80;
  for (const int64_t refused_numel : {int64_t{2048}, int64_t{1} << 19}) {
    SCOPED_TRACE(refused_numel);
    send(upload(id, fb::DType::Float32, {refused_numel}));
    send_bytes(Tensor::full({refused_numel}, 5.0f));
    expect_error("past its limit of 4096 bytes");
    // The next upload gets its own bytes, not the refused one's.
    send(upload(id + 1, fb::DType::Int32, {4}));
    send_bytes(Tensor::arange(1, 5, 1, kInt32));
    EXPECT_EQ(fetch(id + 1, Tensor::zeros({4}, kInt32)).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4}));
    id += 10;
  }
  expect_still_serving(104);
}

TEST_F(WorkerDecoder, RandomlyMutatedBatchesNeverStopTheWorker) {
  // A batch of ordinary ops over two small tensors made beforehand (so a mutation
  // cannot ask for a giant allocation), mutated byte by byte: whatever passes
  // verification runs (or fails with a reply); whatever does not is refused with a
  // reply.
  send(batch([](flatbuffers::FlatBufferBuilder& b) {
    const fb::Scalar two(fb::ScalarKind::Float, 0, 2.0);
    const fb::Scalar zero;
    std::vector<flatbuffers::Offset<fb::Command>> made;
    for (uint64_t id : {1, 2}) {
      made.push_back(fb::CreateCommand(b, id, fb::Op::Create,
                                       fb::CreateCreate(b, id, fb::CreateKind::Full, fb::DType::Float32,
                                                        b.CreateVector<int64_t>({4, 4}), &two, &zero, &zero, &zero)
                                           .Union()));
    }
    return made;
  }));
  std::vector<uint8_t> seed_batch = batch([](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{
        fb::CreateCommand(b, 3, fb::Op::Binary, fb::CreateBinary(b, 3, fb::BinaryOp::Mul, 1, 2).Union()),
        fb::CreateCommand(b, 4, fb::Op::Unary, fb::CreateUnary(b, 4, fb::UnaryOp::Exp, 3).Union()),
        fb::CreateCommand(b, 5, fb::Op::Reduce,
                          fb::CreateReduce(b, 5, fb::ReduceKind::Sum, 4, false, b.CreateVector<int64_t>({0}), true)
                              .Union()),
        fb::CreateCommand(b, 6, fb::Op::Free, fb::CreateFree(b, b.CreateVector<uint64_t>({3, 4, 5})).Union())};
  });
  std::mt19937 rng(12345);
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> m = seed_batch;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<uint8_t>(rng());
    send(m);
  }
  // Replies for the mutations may be many; the worker must still answer a real batch.
  expect_still_serving(1000);
  EXPECT_TRUE(worker_error_.empty()) << worker_error_;
}

// A batch whose frees (CommandBatch.frees) go where free_before places them.
template <typename F>
std::vector<uint8_t> batch_with_frees(F&& add, const std::vector<uint64_t>& frees,
                                      const std::vector<uint32_t>& before, uint64_t free_op, uint64_t seq = 1) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Command>> commands = add(b);
  const auto batch = fb::CreateCommandBatch(b, seq, false, b.CreateVector(commands), b.CreateVector(frees),
                                            b.CreateVector(before), free_op);
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::CommandBatch, batch.Union()));
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

flatbuffers::Offset<fb::Command> ones(flatbuffers::FlatBufferBuilder& b, uint64_t op, uint64_t id) {
  const fb::Scalar zero;
  return fb::CreateCommand(b, op, fb::Op::Create,
                           fb::CreateCreate(b, id, fb::CreateKind::Ones, fb::DType::Float32,
                                            b.CreateVector<int64_t>({2}), &zero, &zero, &zero, &zero)
                               .Union());
}

flatbuffers::Offset<fb::Command> add(flatbuffers::FlatBufferBuilder& b, uint64_t op, uint64_t out, uint64_t x,
                                     uint64_t y) {
  return fb::CreateCommand(b, op, fb::Op::Binary, fb::CreateBinary(b, out, fb::BinaryOp::Add, x, y).Union());
}

TEST_F(WorkerDecoder, BatchFreesRunBetweenTheCommandsWhereTheyArePlaced) {
  // Tensor 2 goes after the first add and before the second, which fails for it;
  // tensor 1 goes after the last command.
  send(batch_with_frees(
      [](flatbuffers::FlatBufferBuilder& b) {
        return std::vector{ones(b, 1, 1), ones(b, 2, 2), add(b, 3, 3, 1, 2), add(b, 4, 4, 1, 2)};
      },
      {2, 1}, {3, 4}, /*free_op=*/5));
  std::vector<uint8_t> bytes = next_reply();
  ASSERT_FALSE(bytes.empty());
  const fb::OpFailed* failed = fb::GetMessage(bytes.data())->body_as_OpFailed();
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->op_id(), 4u);
  EXPECT_NE(failed->message()->str().find("tensor id 2 is not live"), std::string::npos) << failed->message()->str();
  // Tensor 3 lives on; tensor 1 is gone. A free of an id not live is reported under
  // the batch's free_op, as a failed "free".
  send(batch_with_frees(
      [](flatbuffers::FlatBufferBuilder& b) { return std::vector{add(b, 6, 6, 3, 3), add(b, 7, 7, 1, 3)}; }, {1},
      {2}, /*free_op=*/8, 2));
  expect_error("tensor id 1 is not live");
  bytes = next_reply();
  ASSERT_FALSE(bytes.empty());
  failed = fb::GetMessage(bytes.data())->body_as_OpFailed();
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->op_id(), 8u);
  EXPECT_EQ(failed->op_name()->str(), "free");
  EXPECT_NE(failed->message()->str().find("tensor id 1 is not live"), std::string::npos) << failed->message()->str();
  // Frees alone, in a batch without commands.
  send(batch_with_frees([](flatbuffers::FlatBufferBuilder&) { return std::vector<flatbuffers::Offset<fb::Command>>{}; },
                        {3, 6}, {0, 0}, 9, 3));
  send(batch([](flatbuffers::FlatBufferBuilder& b) { return std::vector{add(b, 10, 10, 6, 6)}; }, 4));
  expect_error("tensor id 6 is not live");
  expect_still_serving(100);
}

TEST_F(WorkerDecoder, BatchesWithABadFreeScheduleAreRefusedWhole) {
  auto made = [](flatbuffers::FlatBufferBuilder& b) { return std::vector{ones(b, 1, 1), ones(b, 2, 2)}; };
  send(batch_with_frees(made, {1, 2}, {1}, 3));
  expect_error("frees 2 tensors but places 1");
  send(batch_with_frees(made, {1}, {}, 3));
  expect_error("frees 1 tensors but places 0");
  send(batch_with_frees(made, {1, 2}, {2, 1}, 3));
  expect_error("must not decrease");
  send(batch_with_frees(made, {1}, {3}, 3));
  expect_error("before command 3");
  // None of them ran: ids 1 and 2 are still free to define (the next error is the
  // marker's, not "already in use").
  send(batch([](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{ones(b, 4, 1), ones(b, 5, 2), add(b, 6, 6, 998, 998)};
  }));
  expect_error("tensor id 998 is not live");
  expect_still_serving(100);
  EXPECT_TRUE(worker_error_.empty()) << worker_error_;
}

TEST_F(WorkerDecoder, SyncAnswersOnItsOwnTagCountingTheRepliesSentBeforeIt) {
  const int64_t tag = protocol::kFetchTagBase + 77;
  protocol::PostedMessage answer(*master_, 1, tag, seconds(5));
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{
        fb::CreateCommand(b, 1, fb::Op::Unary, fb::CreateUnary(b, 60, fb::UnaryOp::Neg, 998).Union()),
        fb::CreateCommand(b, 2, fb::Op::Unary, fb::CreateUnary(b, 61, fb::UnaryOp::Neg, 999).Union()),
        fb::CreateCommand(b, 3, fb::Op::Sync, fb::CreateSync(b, 42, tag).Union())};
  }));
  const fb::Message& m = protocol::verify_message(answer.wait(), "test");
  ASSERT_EQ(m.body_type(), fb::Body::SyncDone);
  EXPECT_EQ(m.body_as_SyncDone()->sync_id(), 42u);
  EXPECT_EQ(m.body_as_SyncDone()->replies_sent(), 2u) << "both errors went out before the sync";
  expect_error("tensor id 998 is not live");
  expect_error("tensor id 999 is not live");

  // A reply tag outside the fetch range (e.g. the command tag) is refused.
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{
        fb::CreateCommand(b, 4, fb::Op::Sync, fb::CreateSync(b, 43, protocol::kCommandTag).Union())};
  }));
  expect_error("outside the fetch range");
  expect_still_serving(102);
}

// Each error reply says what kind of error the op raised (OpFailed.kind), and a
// tensor poisoned through its input carries the original kind to its Fetch.
TEST_F(WorkerDecoder, ErrorRepliesCarryTheKindOfTheWorkersError) {
  send(batch([](flatbuffers::FlatBufferBuilder& b) {
    const fb::Scalar zero;
    auto ones = [&](uint64_t out, int64_t n) {
      return fb::CreateCreate(b, out, fb::CreateKind::Ones, fb::DType::Float32, b.CreateVector<int64_t>({n}), &zero,
                              &zero, &zero, &zero)
          .Union();
    };
    return std::vector{
        fb::CreateCommand(b, 1, fb::Op::Create, ones(70, 2)),
        fb::CreateCommand(b, 2, fb::Op::Create, ones(71, 3)),
        // Shapes [2] and [3] do not broadcast: a ShapeError.
        fb::CreateCommand(b, 3, fb::Op::Binary, fb::CreateBinary(b, 72, fb::BinaryOp::Add, 70, 71).Union()),
        // Reads the poisoned tensor: poisoned with the same failure, not reported again.
        fb::CreateCommand(b, 4, fb::Op::Unary, fb::CreateUnary(b, 73, fb::UnaryOp::Neg, 72).Union()),
        // 4 TiB of float32: more than the node may hold.
        fb::CreateCommand(b, 5, fb::Op::Create, ones(74, int64_t{1} << 40)),
        // An index out of range, and an input that was never created.
        fb::CreateCommand(b, 6, fb::Op::ViewOp,
                          fb::CreateViewOp(b, 75, fb::ViewKind::Select, 70, 0, 0, 0, 0, 9).Union()),
        fb::CreateCommand(b, 7, fb::Op::Unary, fb::CreateUnary(b, 76, fb::UnaryOp::Neg, 999).Union()),
        fb::CreateCommand(b, 8, fb::Op::Fetch, fb::CreateFetch(b, 73, protocol::kFetchTagBase + 7).Union()),
    };
  }));
  auto expect_kind = [&](uint64_t op_id, fb::ErrorKind kind) {
    const std::vector<uint8_t> bytes = next_reply();
    ASSERT_FALSE(bytes.empty());
    const fb::Message* m = fb::GetMessage(bytes.data());
    ASSERT_EQ(m->body_type(), fb::Body::OpFailed);
    EXPECT_EQ(m->body_as_OpFailed()->op_id(), op_id);
    EXPECT_EQ(m->body_as_OpFailed()->kind(), kind)
        << fb::EnumNameErrorKind(m->body_as_OpFailed()->kind()) << ": " << m->body_as_OpFailed()->message()->str();
  };
  expect_kind(3, fb::ErrorKind::Shape);
  expect_kind(5, fb::ErrorKind::OutOfMemory);
  expect_kind(6, fb::ErrorKind::Index);
  expect_kind(7, fb::ErrorKind::Value);
  const std::vector<uint8_t> failed = next_reply();
  ASSERT_FALSE(failed.empty());
  const fb::Message* m = fb::GetMessage(failed.data());
  ASSERT_EQ(m->body_type(), fb::Body::FetchFailed);
  EXPECT_EQ(m->body_as_FetchFailed()->op_id(), 3u);
  EXPECT_EQ(m->body_as_FetchFailed()->kind(), fb::ErrorKind::Shape);
  expect_still_serving(103);
}

// ---- graphs (docs/graphs.md) ------------------------------------------------------------

// The bytes of a whole Message holding a batch of `commands` (a graph's part on a
// node, as DefineGraph carries it).
template <typename F>
std::vector<uint8_t> graph_bytes(F&& add, uint32_t version = protocol::kVersion) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Command>> commands = add(b);
  b.Finish(fb::CreateMessage(b, version, fb::Body::CommandBatch,
                             fb::CreateCommandBatch(b, 0, false, b.CreateVector(commands)).Union()));
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

// x (id `in`, made before) times 3 into `out`, then out += 1: a graph of two ops.
std::vector<uint8_t> triple_plus_one(uint64_t in, uint64_t out) {
  return graph_bytes([&](flatbuffers::FlatBufferBuilder& b) {
    const fb::Scalar three(fb::ScalarKind::Float, 0, 3.0), one(fb::ScalarKind::Float, 0, 1.0);
    return std::vector{
        fb::CreateCommand(b, 901, fb::Op::BinaryScalar,
                          fb::CreateBinaryScalar(b, out, fb::BinaryOp::Mul, in, &three).Union()),
        fb::CreateCommand(b, 902, fb::Op::BinaryScalar,
                          fb::CreateBinaryScalar(b, 0, fb::BinaryOp::Add, out, &one).Union())};
  });
}

flatbuffers::Offset<fb::Command> define_graph(flatbuffers::FlatBufferBuilder& b, uint64_t op_id, uint64_t graph,
                                              const std::vector<uint8_t>& bytes,
                                              const std::vector<uint64_t>& owned) {
  return fb::CreateCommand(b, op_id, fb::Op::DefineGraph,
                           fb::CreateDefineGraph(b, graph, b.CreateVector(bytes), b.CreateVector(owned)).Union());
}

flatbuffers::Offset<fb::Command> replay_graph(flatbuffers::FlatBufferBuilder& b, uint64_t op_id, uint64_t graph,
                                              uint64_t replay) {
  return fb::CreateCommand(b, op_id, fb::Op::ReplayGraph, fb::CreateReplayGraph(b, graph, replay).Union());
}

TEST_F(WorkerDecoder, HostileGraphDefinitionsAreRefusedWithTheReason) {
  const std::vector<uint8_t> garbage(64, 0xAB);
  const std::vector<uint8_t> not_a_batch =
      finish([](flatbuffers::FlatBufferBuilder& b) { return std::make_pair(fb::Body::Goodbye, fb::CreateGoodbye(b).Union()); });
  const std::vector<uint8_t> holds_a_fetch = graph_bytes([](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{fb::CreateCommand(b, 1, fb::Op::Fetch, fb::CreateFetch(b, 1, protocol::kFetchTagBase).Union())};
  });
  const std::vector<uint8_t> holds_a_graph = graph_bytes([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{replay_graph(b, 1, 1, 1)};
  });
  const std::vector<uint8_t> old_version = triple_plus_one(1, 2);
  std::vector<uint8_t> wrong_version = graph_bytes(
      [](flatbuffers::FlatBufferBuilder& b) {
        return std::vector{fb::CreateCommand(b, 1, fb::Op::Unary, fb::CreateUnary(b, 0, fb::UnaryOp::Neg, 1).Union())};
      },
      99);
  const std::vector<uint8_t> no_table = graph_bytes([](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{fb::CreateCommand(b, 1, fb::Op::Unary, flatbuffers::Offset<void>())};
  });
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{define_graph(b, 31, 1, garbage, {500}),
                       define_graph(b, 32, 2, not_a_batch, {}),
                       define_graph(b, 33, 3, holds_a_fetch, {}),
                       define_graph(b, 34, 4, holds_a_graph, {}),
                       define_graph(b, 35, 5, wrong_version, {}),
                       define_graph(b, 36, 6, no_table, {}),
                       define_graph(b, 37, 7, {}, {}),
                       define_graph(b, 38, 0, old_version, {}),
                       define_graph(b, 39, 8, old_version, {0}),
                       replay_graph(b, 40, 77, 1)};
  }));
  expect_error("verification");
  expect_error("not a CommandBatch");
  expect_error("is a Fetch, which a graph cannot hold");
  expect_error("is a ReplayGraph, which a graph cannot hold");
  expect_error("version 99");
  expect_error("carries no arguments");
  expect_error("carries no commands");
  expect_error("graph id 0");
  expect_error("tensor id 0");
  expect_error("graph 77 is not defined on node 0");
  // A refused graph's tensors are poisoned with the refusal; its replays add nothing.
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{replay_graph(b, 41, 1, 1),
                       fb::CreateCommand(b, 42, fb::Op::Fetch, fb::CreateFetch(b, 500, protocol::kFetchTagBase).Union())};
  }));
  const std::vector<uint8_t> failed = next_reply();
  ASSERT_FALSE(failed.empty());
  const fb::Message* m = fb::GetMessage(failed.data());
  ASSERT_EQ(m->body_type(), fb::Body::FetchFailed);
  EXPECT_EQ(m->body_as_FetchFailed()->op_id(), 31u);
  EXPECT_EQ(m->body_as_FetchFailed()->op_name()->str(), "define_graph");
  expect_still_serving(103);
  EXPECT_TRUE(worker_error_.empty()) << worker_error_;
}

TEST_F(WorkerDecoder, AGraphIsDefinedOnceAndEachReplayRunsItAgain) {
  const fb::Scalar two(fb::ScalarKind::Float, 0, 2.0), zero;
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{
        fb::CreateCommand(b, 1, fb::Op::Create,
                          fb::CreateCreate(b, 1, fb::CreateKind::Full, fb::DType::Float32, b.CreateVector<int64_t>({3}),
                                           &two, &zero, &zero, &zero)
                              .Union()),
        define_graph(b, 2, 9, triple_plus_one(1, 2), {2}),
        replay_graph(b, 3, 9, 1),
        replay_graph(b, 4, 9, 2),
        // The graph id is taken: a second definition is refused, the first stays.
        define_graph(b, 5, 9, triple_plus_one(1, 2), {2})};
  }));
  expect_error("graph id 9 is already in use");
  const int64_t tag = protocol::kFetchTagBase + 7;
  Tensor got = Tensor::zeros({3}, kFloat32);
  Request r = master_->irecv(got, 1, {.tag = tag, .timeout = seconds(5)});
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{replay_graph(b, 6, 9, 3),
                       fb::CreateCommand(b, 7, fb::Op::Fetch, fb::CreateFetch(b, 2, tag).Union())};
  }));
  r.wait();
  EXPECT_EQ(got.to_vector<float>(), (std::vector<float>{7, 7, 7}));
  // A failing op of a replay reports the graph and the replay; after a DropGraph
  // the graph is gone.
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{fb::CreateCommand(b, 8, fb::Op::Free, fb::CreateFree(b, b.CreateVector<uint64_t>({1})).Union()),
                       replay_graph(b, 9, 9, 4),
                       fb::CreateCommand(b, 10, fb::Op::DropGraph, fb::CreateDropGraph(b, 9).Union()),
                       replay_graph(b, 11, 9, 5)};
  }));
  const std::vector<uint8_t> failed = next_reply();
  ASSERT_FALSE(failed.empty());
  const fb::Message* m = fb::GetMessage(failed.data());
  ASSERT_EQ(m->body_type(), fb::Body::OpFailed);
  EXPECT_EQ(m->body_as_OpFailed()->op_id(), 901u);
  EXPECT_EQ(m->body_as_OpFailed()->graph(), 9u);
  EXPECT_EQ(m->body_as_OpFailed()->replay(), 4u);
  EXPECT_NE(m->body_as_OpFailed()->message()->str().find("tensor id 1 is not live"), std::string::npos);
  expect_error("graph 9 is not defined on node 0");
  expect_still_serving(104);
}

// A graph of elementwise ops, constant creations and copies on 256 floats of x
// (id 1): 2 = x * 3, 3 = 2 + x, 4 = relu(3), 5 = zeros, 6 = 5 - 4, 6 += 1,
// 7 = 6 as float64, 8 = clone(2).
std::vector<uint8_t> elementwise_chain() {
  return graph_bytes([](flatbuffers::FlatBufferBuilder& b) {
    const fb::Scalar three(fb::ScalarKind::Float, 0, 3.0), one(fb::ScalarKind::Float, 0, 1.0), zero;
    return std::vector{
        fb::CreateCommand(b, 901, fb::Op::BinaryScalar, fb::CreateBinaryScalar(b, 2, fb::BinaryOp::Mul, 1, &three).Union()),
        fb::CreateCommand(b, 902, fb::Op::Binary, fb::CreateBinary(b, 3, fb::BinaryOp::Add, 2, 1).Union()),
        fb::CreateCommand(b, 903, fb::Op::Unary, fb::CreateUnary(b, 4, fb::UnaryOp::Relu, 3).Union()),
        fb::CreateCommand(b, 904, fb::Op::Create,
                          fb::CreateCreate(b, 5, fb::CreateKind::Zeros, fb::DType::Float32,
                                           b.CreateVector<int64_t>({256}), &zero, &zero, &zero, &zero)
                              .Union()),
        fb::CreateCommand(b, 905, fb::Op::Binary, fb::CreateBinary(b, 6, fb::BinaryOp::Sub, 5, 4).Union()),
        fb::CreateCommand(b, 906, fb::Op::BinaryScalar, fb::CreateBinaryScalar(b, 0, fb::BinaryOp::Add, 6, &one).Union()),
        fb::CreateCommand(b, 907, fb::Op::Cast, fb::CreateCast(b, 7, 6, fb::DType::Float64).Union()),
        fb::CreateCommand(b, 908, fb::Op::Unary, fb::CreateUnary(b, 8, fb::UnaryOp::Clone, 2).Union())};
  });
}

// The worker runs in this process: its tensor allocations are this process's.
TEST_F(WorkerDecoder, AGraphsIntermediatesAreAllocatedOnceAndWrittenByEachReplay) {
  const fb::Scalar two(fb::ScalarKind::Float, 0, 2.0), minus_one(fb::ScalarKind::Float, 0, -1.0), zero;
  Tensor got = Tensor::zeros({256}, kFloat32);
  auto fetch = [&](uint64_t op_id, uint64_t id) {
    fetch_into(op_id, id, got);
    return got.to_vector<float>();
  };
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{
        fb::CreateCommand(b, 1, fb::Op::Create,
                          fb::CreateCreate(b, 1, fb::CreateKind::Full, fb::DType::Float32, b.CreateVector<int64_t>({256}),
                                           &two, &zero, &zero, &zero)
                              .Union()),
        define_graph(b, 2, 9, elementwise_chain(), {2, 3, 4, 5, 6, 7, 8}), replay_graph(b, 3, 9, 1)};
  }));
  EXPECT_EQ(fetch(4, 6), std::vector<float>(256, -7.0f));  // 0 - relu(2 * 3 + 2) + 1
  const int64_t allocs = memory_stats().num_allocs;
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    std::vector<flatbuffers::Offset<fb::Command>> replays;
    for (uint64_t i = 0; i < 50; ++i) replays.push_back(replay_graph(b, 10 + i, 9, 2 + i));
    return replays;
  }));
  EXPECT_EQ(fetch(100, 6), std::vector<float>(256, -7.0f));
  EXPECT_EQ(memory_stats().num_allocs, allocs) << "replays after the first allocated tensors";
  // An input updated in place between replays: the next replay writes the new values
  // into the same storage.
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{fb::CreateCommand(b, 101, fb::Op::Fill, fb::CreateFill(b, 1, &minus_one).Union()),
                       replay_graph(b, 102, 9, 52)};
  }));
  EXPECT_EQ(fetch(103, 6), std::vector<float>(256, 1.0f));  // 0 - relu(-3 - 1) + 1
  EXPECT_EQ(fetch(104, 8), std::vector<float>(256, -3.0f));
  EXPECT_EQ(memory_stats().num_allocs, allocs);
  Tensor as_double = Tensor::zeros({256}, kFloat64);
  Request r = master_->irecv(as_double, 1, {.tag = protocol::kFetchTagBase + 106, .timeout = seconds(5)});
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{
        fb::CreateCommand(b, 106, fb::Op::Fetch, fb::CreateFetch(b, 7, protocol::kFetchTagBase + 106).Union())};
  }));
  r.wait();
  EXPECT_EQ(as_double.to_vector<double>(), std::vector<double>(256, 1.0));
  expect_still_serving(105);
}

// A graph of the ops that write their results in place beyond the flat
// elementwise ones, on x [6, 5] (id 1), w [5, 4] (id 2) and bias [4] (id 3):
// 10 = x @ w, 11 = addmm(bias, x, w, 0.5, 2), 12 = 10 + bias (broadcast),
// 13 = 12 < 11, 14 = 12 ** 2, 15 = sum(14, dim 1), 16 = softmax(11, 1),
// 17 = randn [6, 4], 18 = where(13, 16, 17), 19 = bmm(x3, w3) on [2, 6, 5] and
// [2, 5, 4] (ids 4, 5), 20 = mean(x, all), 21 = masked_fill(16, 13, 0),
// 22 = clamp(12, -1, 1).
std::vector<uint8_t> products_and_reductions() {
  return graph_bytes([](flatbuffers::FlatBufferBuilder& b) {
    const fb::Scalar half(fb::ScalarKind::Float, 0, 0.5), two(fb::ScalarKind::Float, 0, 2.0), zero;
    const fb::Scalar one(fb::ScalarKind::Float, 0, 1.0), minus_one(fb::ScalarKind::Float, 0, -1.0);
    return std::vector{
        fb::CreateCommand(b, 901, fb::Op::Matmul, fb::CreateMatmul(b, 10, fb::MatmulKind::Matmul, 1, 2).Union()),
        fb::CreateCommand(b, 902, fb::Op::Addmm, fb::CreateAddmm(b, 11, 3, 1, 2, &half, &two).Union()),
        fb::CreateCommand(b, 903, fb::Op::Binary, fb::CreateBinary(b, 12, fb::BinaryOp::Add, 10, 3).Union()),
        fb::CreateCommand(b, 904, fb::Op::Binary, fb::CreateBinary(b, 13, fb::BinaryOp::Lt, 12, 11).Union()),
        fb::CreateCommand(b, 905, fb::Op::BinaryScalar, fb::CreateBinaryScalar(b, 14, fb::BinaryOp::Pow, 12, &two).Union()),
        fb::CreateCommand(b, 906, fb::Op::Reduce,
                          fb::CreateReduce(b, 15, fb::ReduceKind::Sum, 14, false, b.CreateVector<int64_t>({1})).Union()),
        fb::CreateCommand(b, 907, fb::Op::Softmax, fb::CreateSoftmax(b, 16, 11, 1, false).Union()),
        fb::CreateCommand(b, 908, fb::Op::Create,
                          fb::CreateCreate(b, 17, fb::CreateKind::Randn, fb::DType::Float32,
                                           b.CreateVector<int64_t>({6, 4}), &zero, &zero, &zero, &zero)
                              .Union()),
        fb::CreateCommand(b, 909, fb::Op::Where, fb::CreateWhere(b, 18, 13, 16, 17).Union()),
        fb::CreateCommand(b, 910, fb::Op::Matmul, fb::CreateMatmul(b, 19, fb::MatmulKind::Bmm, 4, 5).Union()),
        fb::CreateCommand(b, 911, fb::Op::Reduce, fb::CreateReduce(b, 20, fb::ReduceKind::Mean, 1, true).Union()),
        fb::CreateCommand(b, 912, fb::Op::MaskedFill, fb::CreateMaskedFill(b, 21, 16, 13, &zero).Union()),
        fb::CreateCommand(b, 913, fb::Op::Clamp, fb::CreateClamp(b, 22, 12, true, &minus_one, true, &one).Union())};
  });
}

// The worker runs in this process: its tensor allocations are this process's.
TEST_F(WorkerDecoder, ProductsReductionsSoftmaxAndRandomDrawsAreWrittenInPlaceByEachReplay) {
  const fb::Scalar zero;
  auto rand = [&](flatbuffers::FlatBufferBuilder& b, uint64_t op_id, uint64_t id, std::vector<int64_t> shape) {
    return fb::CreateCommand(b, op_id, fb::Op::Create,
                             fb::CreateCreate(b, id, fb::CreateKind::Rand, fb::DType::Float32,
                                              b.CreateVector<int64_t>(shape), &zero, &zero, &zero, &zero)
                                 .Union());
  };
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{rand(b, 1, 1, {6, 5}), rand(b, 2, 2, {5, 4}), rand(b, 3, 3, {4}), rand(b, 4, 4, {2, 6, 5}),
                       rand(b, 5, 5, {2, 5, 4}),
                       define_graph(b, 6, 9, products_and_reductions(),
                                    {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22}),
                       replay_graph(b, 7, 9, 1)};
  }));
  const Tensor x = fetch(8, 1, {6, 5}, kFloat32), w = fetch(9, 2, {5, 4}, kFloat32), bias = fetch(10, 3, {4}, kFloat32);
  const Tensor x3 = fetch(11, 4, {2, 6, 5}, kFloat32), w3 = fetch(12, 5, {2, 5, 4}, kFloat32);
  const Tensor first_noise = fetch(13, 17, {6, 4}, kFloat32);
  Tensor noise = Tensor::zeros({6, 4}, kFloat32);
  const int64_t allocs = memory_stats().num_allocs;
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    std::vector<flatbuffers::Offset<fb::Command>> replays;
    for (uint64_t i = 0; i < 20; ++i) replays.push_back(replay_graph(b, 20 + i, 9, 2 + i));
    return replays;
  }));
  fetch_into(100, 17, noise);
  EXPECT_EQ(memory_stats().num_allocs, allocs) << "replays after the first allocated tensors";
  EXPECT_NE(std::memcmp(noise.data_ptr(), first_noise.data_ptr(), noise.nbytes()), 0) << "each replay draws anew";
  // What the same ops make here, from the same inputs and the latest draws.
  const Tensor mm = x.matmul(w), am = bias.addmm(x, w, 0.5, 2.0), added = mm + bias, less = added.lt(am);
  const Tensor soft = am.softmax(1);
  auto same = [](const Tensor& got, const Tensor& expected) {
    return got.shape() == expected.shape() && got.dtype() == expected.dtype() &&
           std::memcmp(got.data_ptr(), expected.contiguous().data_ptr(), got.nbytes()) == 0;
  };
  EXPECT_TRUE(same(fetch(101, 10, {6, 4}, kFloat32), mm));
  EXPECT_TRUE(same(fetch(102, 11, {6, 4}, kFloat32), am));
  EXPECT_TRUE(same(fetch(103, 12, {6, 4}, kFloat32), added));
  EXPECT_TRUE(same(fetch(104, 13, {6, 4}, kBool), less));
  EXPECT_TRUE(same(fetch(105, 14, {6, 4}, kFloat32), added.pow(2)));
  EXPECT_TRUE(same(fetch(106, 15, {6}, kFloat32), added.pow(2).sum({1})));
  EXPECT_TRUE(same(fetch(107, 16, {6, 4}, kFloat32), soft));
  EXPECT_TRUE(same(fetch(108, 18, {6, 4}, kFloat32), where(less, soft, noise)));
  EXPECT_TRUE(same(fetch(109, 19, {2, 6, 4}, kFloat32), x3.bmm(w3)));
  EXPECT_TRUE(same(fetch(110, 20, {}, kFloat32), x.mean()));
  EXPECT_TRUE(same(fetch(111, 21, {6, 4}, kFloat32), soft.masked_fill(less, 0)));
  EXPECT_TRUE(same(fetch(112, 22, {6, 4}, kFloat32), added.clamp(Scalar(-1.0), Scalar(1.0))));
  expect_still_serving(113);
  EXPECT_TRUE(worker_error_.empty()) << worker_error_;
}

// A graph of indexing ops, joins, vector products, sorts and sequences, on x [6, 5] (id 1), the
// vectors v [5], u [5] and w [4] (ids 2, 3, 4), rows [3] (id 5, int64 in [0, 6))
// and cols [6, 2] (id 6, int64 in [0, 5)): 30 = index_select(x, 0, rows),
// 31 = gather(x, 1, cols), 32 = cat([x, 30], 0), 33 = stack([x, x], 1),
// 34 = dot(v, u), 35 = outer(v, w), 36 = matmul(v, u), 37/38 = sort(x, 1,
// descending), 39/40 = topk(x, 2, 0, largest, sorted), 41 = arange(3, 40, 3)
// int64, 42 = arange(-1.5, 2.5, 0.25) float64, 43 = linspace(-2, 5, 9) float32,
// 44 = eye(3, 5) float32.
std::vector<uint8_t> indexing_joins_products_and_sorts() {
  return graph_bytes([](flatbuffers::FlatBufferBuilder& b) {
    const fb::Scalar zero, three(fb::ScalarKind::Int, 3, 0), forty(fb::ScalarKind::Int, 40, 0);
    const fb::Scalar low(fb::ScalarKind::Float, 0, -1.5), high(fb::ScalarKind::Float, 0, 2.5);
    const fb::Scalar quarter(fb::ScalarKind::Float, 0, 0.25), minus_two(fb::ScalarKind::Float, 0, -2.0);
    const fb::Scalar five(fb::ScalarKind::Float, 0, 5.0);
    auto create = [&](uint64_t op_id, uint64_t id, fb::CreateKind kind, fb::DType dtype, const fb::Scalar& start,
                      const fb::Scalar& end, const fb::Scalar& step, int64_t steps, int64_t rows, int64_t cols) {
      return fb::CreateCommand(b, op_id, fb::Op::Create,
                               fb::CreateCreate(b, id, kind, dtype, b.CreateVector<int64_t>({}), &zero, &start, &end,
                                                &step, steps, rows, cols)
                                   .Union());
    };
    return std::vector{
        create(910, 41, fb::CreateKind::Arange, fb::DType::Int64, three, forty, three, 0, 0, 0),
        create(911, 42, fb::CreateKind::Arange, fb::DType::Float64, low, high, quarter, 0, 0, 0),
        create(912, 43, fb::CreateKind::Linspace, fb::DType::Float32, minus_two, five, zero, 9, 0, 0),
        create(913, 44, fb::CreateKind::Eye, fb::DType::Float32, zero, zero, zero, 0, 3, 5),
        fb::CreateCommand(b, 901, fb::Op::IndexOp, fb::CreateIndexOp(b, 30, fb::IndexKind::IndexSelect, 1, 0, 5).Union()),
        fb::CreateCommand(b, 902, fb::Op::IndexOp, fb::CreateIndexOp(b, 31, fb::IndexKind::Gather, 1, 1, 6).Union()),
        fb::CreateCommand(b, 903, fb::Op::Join,
                          fb::CreateJoin(b, 32, fb::JoinKind::Cat, b.CreateVector<uint64_t>({1, 30}), 0).Union()),
        fb::CreateCommand(b, 904, fb::Op::Join,
                          fb::CreateJoin(b, 33, fb::JoinKind::Stack, b.CreateVector<uint64_t>({1, 1}), 1).Union()),
        fb::CreateCommand(b, 905, fb::Op::Matmul, fb::CreateMatmul(b, 34, fb::MatmulKind::Dot, 2, 3).Union()),
        fb::CreateCommand(b, 906, fb::Op::Matmul, fb::CreateMatmul(b, 35, fb::MatmulKind::Outer, 2, 4).Union()),
        fb::CreateCommand(b, 907, fb::Op::Matmul, fb::CreateMatmul(b, 36, fb::MatmulKind::Matmul, 2, 3).Union()),
        fb::CreateCommand(b, 908, fb::Op::Sort, fb::CreateSort(b, 37, 38, 1, 1, true, -1, true).Union()),
        fb::CreateCommand(b, 909, fb::Op::Sort, fb::CreateSort(b, 39, 40, 1, 0, true, 2, true).Union())};
  });
}

TEST_F(WorkerDecoder, IndexingJoinsVectorProductsSortsAndSequencesAreWrittenInPlaceByEachReplay) {
  const fb::Scalar zero, five(fb::ScalarKind::Int, 5, 0), six(fb::ScalarKind::Int, 6, 0);
  auto create = [&](flatbuffers::FlatBufferBuilder& b, uint64_t op_id, uint64_t id, fb::CreateKind kind, fb::DType dtype,
                    std::vector<int64_t> shape, const fb::Scalar& end) {
    return fb::CreateCommand(
        b, op_id, fb::Op::Create,
        fb::CreateCreate(b, id, kind, dtype, b.CreateVector<int64_t>(shape), &zero, &zero, &end, &zero).Union());
  };
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    using fb::CreateKind;
    return std::vector{create(b, 1, 1, CreateKind::Rand, fb::DType::Float32, {6, 5}, zero),
                       create(b, 2, 2, CreateKind::Rand, fb::DType::Float32, {5}, zero),
                       create(b, 3, 3, CreateKind::Rand, fb::DType::Float32, {5}, zero),
                       create(b, 4, 4, CreateKind::Rand, fb::DType::Float32, {4}, zero),
                       create(b, 5, 5, CreateKind::Randint, fb::DType::Int64, {3}, six),
                       create(b, 6, 6, CreateKind::Randint, fb::DType::Int64, {6, 2}, five),
                       define_graph(b, 7, 9, indexing_joins_products_and_sorts(),
                                    {30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44}),
                       replay_graph(b, 8, 9, 1)};
  }));
  const Tensor x = fetch(10, 1, {6, 5}, kFloat32), v = fetch(11, 2, {5}, kFloat32), u = fetch(12, 3, {5}, kFloat32);
  const Tensor w = fetch(13, 4, {4}, kFloat32), rows = fetch(14, 5, {3}, kInt64), cols = fetch(15, 6, {6, 2}, kInt64);
  Tensor selected = Tensor::zeros({3, 5}, kFloat32);
  const int64_t allocs = memory_stats().num_allocs;
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    std::vector<flatbuffers::Offset<fb::Command>> replays;
    for (uint64_t i = 0; i < 20; ++i) replays.push_back(replay_graph(b, 20 + i, 9, 2 + i));
    return replays;
  }));
  fetch_into(100, 30, selected);
  EXPECT_EQ(memory_stats().num_allocs, allocs) << "replays after the first allocated tensors";
  auto same = [](const Tensor& got, const Tensor& expected) {
    return got.shape() == expected.shape() && got.dtype() == expected.dtype() &&
           std::memcmp(got.data_ptr(), expected.contiguous().data_ptr(), got.nbytes()) == 0;
  };
  EXPECT_TRUE(same(selected, x.index_select(0, rows)));
  EXPECT_TRUE(same(fetch(101, 31, {6, 2}, kFloat32), x.gather(1, cols)));
  EXPECT_TRUE(same(fetch(102, 32, {9, 5}, kFloat32), cat({x, x.index_select(0, rows)}, 0)));
  EXPECT_TRUE(same(fetch(103, 33, {6, 2, 5}, kFloat32), stack({x, x}, 1)));
  EXPECT_TRUE(same(fetch(104, 34, {}, kFloat32), v.dot(u)));
  EXPECT_TRUE(same(fetch(105, 35, {5, 4}, kFloat32), v.outer(w)));
  EXPECT_TRUE(same(fetch(106, 36, {}, kFloat32), v.matmul(u)));
  const auto [sorted, order] = x.sort(1, true);
  EXPECT_TRUE(same(fetch(107, 37, {6, 5}, kFloat32), sorted));
  EXPECT_TRUE(same(fetch(108, 38, {6, 5}, kInt64), order));
  const auto [top, where_top] = x.topk(2, 0, true, true);
  EXPECT_TRUE(same(fetch(109, 39, {2, 5}, kFloat32), top));
  EXPECT_TRUE(same(fetch(110, 40, {2, 5}, kInt64), where_top));
  EXPECT_TRUE(same(fetch(111, 41, {13}, kInt64), Tensor::arange(3, 40, 3, kInt64)));
  EXPECT_TRUE(same(fetch(112, 42, {16}, kFloat64), Tensor::arange(-1.5, 2.5, 0.25, kFloat64)));
  EXPECT_TRUE(same(fetch(113, 43, {9}, kFloat32), Tensor::linspace(-2.0, 5.0, 9, kFloat32)));
  EXPECT_TRUE(same(fetch(114, 44, {3, 5}, kFloat32), Tensor::eye(3, 5, kFloat32)));
  expect_still_serving(115);
  EXPECT_TRUE(worker_error_.empty()) << worker_error_;
}

TEST_F(WorkerDecoder, IntegerPowersAreWrittenInPlaceByEachReplayAndANegativeExponentFailsAsEagerly) {
  const fb::Scalar zero, three(fb::ScalarKind::Int, 3, 0), minus_one(fb::ScalarKind::Int, -1, 0),
      two(fb::ScalarKind::Int, 2, 0), nine(fb::ScalarKind::Int, 9, 0);
  auto fetch_int = [&](uint64_t op_id, uint64_t id) { return fetch(op_id, id, {4, 8}, kInt64); };
  // 1: the base, 4: the exponent (made before); 2 = 1 ** 3, 3 = 1 ** 4.
  const std::vector<uint8_t> powers = graph_bytes([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{
        fb::CreateCommand(b, 901, fb::Op::BinaryScalar, fb::CreateBinaryScalar(b, 2, fb::BinaryOp::Pow, 1, &three).Union()),
        fb::CreateCommand(b, 902, fb::Op::Binary, fb::CreateBinary(b, 3, fb::BinaryOp::Pow, 1, 4).Union())};
  });
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{
        fb::CreateCommand(b, 1, fb::Op::Create,
                          fb::CreateCreate(b, 1, fb::CreateKind::Randint, fb::DType::Int64, b.CreateVector<int64_t>({4, 8}),
                                           &zero, &zero, &nine, &zero)
                              .Union()),
        fb::CreateCommand(b, 2, fb::Op::Create,
                          fb::CreateCreate(b, 4, fb::CreateKind::Randint, fb::DType::Int64, b.CreateVector<int64_t>({4, 8}),
                                           &zero, &zero, &nine, &zero)
                              .Union()),
        define_graph(b, 3, 9, powers, {2, 3}), replay_graph(b, 4, 9, 1)};
  }));
  const Tensor base = fetch_int(5, 1), exponent = fetch_int(6, 4);
  Tensor cubes = Tensor::zeros({4, 8}, kInt64);
  const int64_t allocs = memory_stats().num_allocs;
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    std::vector<flatbuffers::Offset<fb::Command>> replays;
    for (uint64_t i = 0; i < 20; ++i) replays.push_back(replay_graph(b, 10 + i, 9, 2 + i));
    return replays;
  }));
  {
    const int64_t tag = protocol::kFetchTagBase + 100;
    Request r = master_->irecv(cubes, 1, {.tag = tag, .timeout = seconds(5)});
    send(batch([&](flatbuffers::FlatBufferBuilder& b) {
      return std::vector{fb::CreateCommand(b, 100, fb::Op::Fetch, fb::CreateFetch(b, 2, tag).Union())};
    }));
    r.wait();
  }
  EXPECT_EQ(memory_stats().num_allocs, allocs) << "replays after the first allocated tensors";
  EXPECT_EQ(cubes.to_vector<int64_t>(), base.pow(3).to_vector<int64_t>());
  EXPECT_EQ(fetch_int(101, 3).to_vector<int64_t>(), base.pow(exponent).to_vector<int64_t>());
  // A negative exponent fails the replay's pow with the eager op's error.
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{fb::CreateCommand(b, 102, fb::Op::Fill, fb::CreateFill(b, 4, &minus_one).Union()),
                       replay_graph(b, 103, 9, 22)};
  }));
  expect_error("integers to negative integer powers are not allowed");
  // The exponent fixed, the next replay computes it again.
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{fb::CreateCommand(b, 104, fb::Op::Fill, fb::CreateFill(b, 4, &two).Union()),
                       replay_graph(b, 105, 9, 23)};
  }));
  EXPECT_EQ(fetch_int(106, 3).to_vector<int64_t>(), base.pow(2).to_vector<int64_t>());
  expect_still_serving(107);
  EXPECT_TRUE(worker_error_.empty()) << worker_error_;
}

TEST_F(WorkerDecoder, RandomlyMutatedGraphsNeverStopTheWorker) {
  const fb::Scalar two(fb::ScalarKind::Float, 0, 2.0), zero;
  send(batch([&](flatbuffers::FlatBufferBuilder& b) {
    return std::vector{fb::CreateCommand(
        b, 1, fb::Op::Create,
        fb::CreateCreate(b, 1, fb::CreateKind::Full, fb::DType::Float32, b.CreateVector<int64_t>({4, 4}), &two, &zero,
                         &zero, &zero)
            .Union())};
  }));
  const std::vector<uint8_t> graph = triple_plus_one(1, 2);
  std::mt19937 rng(54321);
  for (uint64_t i = 0; i < 300; ++i) {
    std::vector<uint8_t> g = graph;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) g[rng() % g.size()] = static_cast<uint8_t>(rng());
    // Each mutation a graph of its own, replayed twice and dropped.
    send(batch([&](flatbuffers::FlatBufferBuilder& b) {
      return std::vector{define_graph(b, 10 * i + 1, 100 + i, g, {5000 + i}), replay_graph(b, 10 * i + 2, 100 + i, 1),
                         replay_graph(b, 10 * i + 3, 100 + i, 2),
                         fb::CreateCommand(b, 10 * i + 4, fb::Op::DropGraph, fb::CreateDropGraph(b, 100 + i).Union())};
    }));
  }
  expect_still_serving(1001);
  EXPECT_TRUE(worker_error_.empty()) << worker_error_;
}

TEST_F(WorkerDecoder, GoodbyeEndsTheSession) {
  send(finish([](flatbuffers::FlatBufferBuilder& b) { return std::make_pair(fb::Body::Goodbye, fb::CreateGoodbye(b).Union()); }));
  worker_.join();
  EXPECT_EQ(end_, worker::SessionEnd::Goodbye);
  EXPECT_TRUE(worker_error_.empty()) << worker_error_;
}

}  // namespace
}  // namespace thd
