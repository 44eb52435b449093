// Where a tensor's bytes live on one process: host memory or one CUDA device.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace thd {

enum class DeviceType : uint8_t { CPU, CUDA };

class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type_(type), index_(index) {}

  static constexpr Device cpu() { return Device(DeviceType::CPU, -1); }
  static constexpr Device cuda(int index = 0) { return Device(DeviceType::CUDA, index); }

  constexpr DeviceType type() const { return type_; }
  // -1 for the CPU.
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }

  // "cpu", "cuda:1"
  std::string str() const;

  friend constexpr bool operator==(Device a, Device b) = default;

 private:
  DeviceType type_ = DeviceType::CPU;
  int index_ = -1;
};

std::ostream& operator<<(std::ostream& os, Device d);

}  // namespace thd
