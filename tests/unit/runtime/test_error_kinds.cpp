// The kind of an error (include/thd/error.h): what a worker's exception is
// classified as, how a kind travels on the wire, and which RemoteError subclass the
// master raises for it.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

#include <thd/error.h>

#include "protocol/codec.h"

namespace thd {
namespace {

namespace fb = protocol::fb;

TEST(ErrorKinds, AnExceptionIsClassifiedByItsMostDerivedClass) {
  EXPECT_EQ(error_kind_of(std::bad_alloc()), ErrorKind::OutOfMemory);
  EXPECT_EQ(error_kind_of(std::bad_array_new_length()), ErrorKind::OutOfMemory);
  EXPECT_EQ(error_kind_of(HostOutOfMemoryError("no memory")), ErrorKind::OutOfMemory);
  EXPECT_EQ(error_kind_of(OutOfMemoryError("cudaErrorMemoryAllocation")), ErrorKind::OutOfMemory);
  EXPECT_EQ(error_kind_of(CudaError("cudaErrorIllegalAddress")), ErrorKind::Cuda);
  EXPECT_EQ(error_kind_of(ShapeError("shapes")), ErrorKind::Shape);
  EXPECT_EQ(error_kind_of(ValueError("value")), ErrorKind::Value);
  EXPECT_EQ(error_kind_of(protocol::ProtocolError("bad message")), ErrorKind::Value);
  EXPECT_EQ(error_kind_of(TypeError("dtype")), ErrorKind::Type);
  EXPECT_EQ(error_kind_of(IndexError("index")), ErrorKind::Index);
  EXPECT_EQ(error_kind_of(TimeoutError("late")), ErrorKind::Timeout);
  EXPECT_EQ(error_kind_of(WorkerLost("gone")), ErrorKind::Connection);
  EXPECT_EQ(error_kind_of(NotImplementedError("no kernel")), ErrorKind::NotImplemented);
  EXPECT_EQ(error_kind_of(AuthError("secret")), ErrorKind::Generic);
  EXPECT_EQ(error_kind_of(std::runtime_error("other")), ErrorKind::Generic);
  // A RemoteError keeps the kind it was raised with.
  EXPECT_EQ(error_kind_of(RemoteIndexError("index", {}, 3)), ErrorKind::Index);
}

template <typename Expected>
::testing::AssertionResult raises_as(ErrorKind kind) {
  const std::exception_ptr p = make_remote_error(kind, "op 7 failed on node 1: why", {.op = "add", .node = 1}, 7);
  try {
    std::rethrow_exception(p);
  } catch (const Expected& e) {
    if (e.kind() != kind) return ::testing::AssertionFailure() << "kind() is " << error_kind_name(e.kind());
    if (e.op_id() != 7 || e.context().node != 1 || e.context().op != "add") {
      return ::testing::AssertionFailure() << "lost its context: " << e.what();
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << error_kind_name(kind) << " raised another class: " << e.what();
  }
}

TEST(ErrorKinds, EachKindRaisesItsRemoteErrorSubclass) {
  EXPECT_TRUE(raises_as<RemoteError>(ErrorKind::Generic));
  EXPECT_TRUE(raises_as<RemoteOutOfMemoryError>(ErrorKind::OutOfMemory));
  EXPECT_TRUE(raises_as<RemoteValueError>(ErrorKind::Value));
  EXPECT_TRUE(raises_as<RemoteShapeError>(ErrorKind::Shape));
  EXPECT_TRUE(raises_as<RemoteValueError>(ErrorKind::Shape));  // a shape error is a value error
  EXPECT_TRUE(raises_as<RemoteTypeError>(ErrorKind::Type));
  EXPECT_TRUE(raises_as<RemoteIndexError>(ErrorKind::Index));
  EXPECT_TRUE(raises_as<RemoteTimeoutError>(ErrorKind::Timeout));
  EXPECT_TRUE(raises_as<RemoteConnectionError>(ErrorKind::Connection));
  EXPECT_TRUE(raises_as<RemoteNotImplementedError>(ErrorKind::NotImplemented));
  EXPECT_TRUE(raises_as<RemoteCudaError>(ErrorKind::Cuda));
  // Every subclass is a RemoteError and a thd::Error.
  EXPECT_TRUE(raises_as<RemoteError>(ErrorKind::OutOfMemory));
  EXPECT_TRUE(raises_as<RemoteError>(ErrorKind::Shape));
  EXPECT_THROW(std::rethrow_exception(make_remote_error(ErrorKind::Index, "m", {}, 1)), Error);
  // Only the kind's own subclass: a remote index error is no out-of-memory one.
  EXPECT_FALSE(raises_as<RemoteOutOfMemoryError>(ErrorKind::Index));
  EXPECT_FALSE(raises_as<RemoteShapeError>(ErrorKind::Value));
}

TEST(ErrorKinds, TheWireCarriesEveryKindAndReadsAnUnknownOneAsGeneric) {
  for (int k = 0; k <= static_cast<int>(ErrorKind::Cuda); ++k) {
    const auto kind = static_cast<ErrorKind>(k);
    EXPECT_EQ(protocol::from_fb(protocol::to_fb(kind)), kind) << error_kind_name(kind);
  }
  EXPECT_STREQ(fb::EnumNameErrorKind(protocol::to_fb(ErrorKind::OutOfMemory)), "OutOfMemory");
  EXPECT_STREQ(fb::EnumNameErrorKind(protocol::to_fb(ErrorKind::Shape)), "Shape");
  EXPECT_EQ(protocol::from_fb(static_cast<fb::ErrorKind>(200)), ErrorKind::Generic);
  // A message without the field (an older worker's) decodes as Generic.
  flatbuffers::FlatBufferBuilder b;
  fb::OpFailedBuilder f(b);
  f.add_op_id(5);
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::OpFailed, f.Finish().Union()));
  const fb::Message& m = protocol::verify_message({b.GetBufferPointer(), b.GetSize()}, "test");
  EXPECT_EQ(m.body_as_OpFailed()->kind(), fb::ErrorKind::Generic);
}

}  // namespace
}  // namespace thd
