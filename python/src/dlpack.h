// The DLPack ABI (https://dmlc.github.io/dlpack/latest/c_api.html, v1.0): the
// structs a producer and a consumer of tensors agree on, laid out as dlpack.h lays
// them out. Only what thd's Python interop uses; the names are the spec's, so the
// code reads against it.
#pragma once

#include <cstdint>

namespace thd::python::dlpack {

// DLDeviceType: a C enum, so int-sized.
enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,  // pinned host memory, which the CPU reads as any other
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
};

struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null means compact row-major
  uint64_t byte_offset;
};

// The classic form, in a capsule named "dltensor".
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

inline constexpr uint32_t kDLPackMajorVersion = 1;
inline constexpr uint32_t kDLPackMinorVersion = 0;
inline constexpr uint64_t kFlagReadOnly = 1ULL << 0;
inline constexpr uint64_t kFlagIsCopied = 1ULL << 1;

// The versioned form (DLPack 1.0), in a capsule named "dltensor_versioned".
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

// The capsule names of the Python protocol: a consumer renames the capsule it took
// ownership of, so that the capsule's destructor leaves the tensor alone and a
// second consumer fails.
inline constexpr const char* kCapsuleName = "dltensor";
inline constexpr const char* kUsedCapsuleName = "used_dltensor";
inline constexpr const char* kVersionedCapsuleName = "dltensor_versioned";
inline constexpr const char* kUsedVersionedCapsuleName = "used_dltensor_versioned";

}  // namespace thd::python::dlpack
