// Collectives on values that are not tensors (torch.distributed's *_object
// functions), in process-group mode:
//
//   std::string config = thd::get_rank() == 0 ? load_config() : "";
//   thd::broadcast_object(config, /*src=*/0);
//   std::vector<std::string> names;
//   thd::all_gather_object(names, hostname());     // names[i]: global rank i's
//
// A value travels as the bytes thd::ObjectCodec<T> makes of it. thd has codecs
// for std::string, std::vector<uint8_t> and arithmetic types (in the host's byte
// order: every rank of a job shares one architecture). A user type plugs in by
// specializing ObjectCodec in namespace thd:
//
//   template <>
//   struct thd::ObjectCodec<Point> {
//     static std::vector<uint8_t> encode(const Point& p);        // any bytes
//     static Point decode(std::span<const uint8_t> bytes);      // encode's inverse
//   };
//
// Unlike pickle, nothing is executed on receipt: decode sees only bytes, and may
// throw (its exception reaches the caller) when they are not what it expects.
//
// Every member of the group makes the call; each is a few collectives on the
// group (sizes first, then the bytes), blocking, on the group's default tag.
// src/dst are global ranks; the group is the default one unless given.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <thd/process_group.h>

namespace thd {

// The serialization hook: encode(const T&) -> std::vector<uint8_t>, and
// decode(std::span<const uint8_t>) -> T. Not defined for types without one.
template <typename T>
struct ObjectCodec;

template <>
struct ObjectCodec<std::string> {
  static std::vector<uint8_t> encode(const std::string& s) { return {s.begin(), s.end()}; }
  static std::string decode(std::span<const uint8_t> b) { return {b.begin(), b.end()}; }
};

template <>
struct ObjectCodec<std::vector<uint8_t>> {
  static std::vector<uint8_t> encode(const std::vector<uint8_t>& v) { return v; }
  static std::vector<uint8_t> decode(std::span<const uint8_t> b) { return {b.begin(), b.end()}; }
};

namespace detail {
[[noreturn]] void throw_bad_object_size(const char* type, size_t expected, size_t got);
}

template <typename T>
  requires std::is_arithmetic_v<T>
struct ObjectCodec<T> {
  static std::vector<uint8_t> encode(const T& v) {
    std::vector<uint8_t> b(sizeof(T));
    std::memcpy(b.data(), &v, sizeof(T));
    return b;
  }
  static T decode(std::span<const uint8_t> b) {
    if (b.size() != sizeof(T)) detail::throw_bad_object_size("an arithmetic value", sizeof(T), b.size());
    T v;
    std::memcpy(&v, b.data(), sizeof(T));
    return v;
  }
};

// The byte-level collectives the templates below are made of.
namespace detail {
using ObjectBytes = std::vector<uint8_t>;
// Whether this process is global rank `global_rank`; ValueError naming `op` when
// it is not a member of the group.
bool is_this_rank(const Group& group, int global_rank, const char* op);
// src's bytes end up in every member's `bytes`.
void broadcast_object_bytes(ObjectBytes& bytes, int src, const Group& group);
// Every member's bytes, in group-rank order.
std::vector<ObjectBytes> all_gather_object_bytes(const ObjectBytes& bytes, const Group& group);
// On dst: every member's bytes, in group-rank order; elsewhere: empty.
std::vector<ObjectBytes> gather_object_bytes(const ObjectBytes& bytes, int dst, const Group& group);
// `inputs` (on src: one per member; ignored elsewhere): each member gets its entry.
ObjectBytes scatter_object_bytes(const std::vector<ObjectBytes>& inputs, int src, const Group& group);
}  // namespace detail

// src's `object` is copied into every member's.
template <typename T>
void broadcast_object(T& object, int src, const Group& group = nullptr) {
  detail::ObjectBytes bytes;
  const bool is_src = detail::is_this_rank(group, src, "broadcast_object");
  if (is_src) bytes = ObjectCodec<T>::encode(object);
  detail::broadcast_object_bytes(bytes, src, group);
  if (!is_src) object = ObjectCodec<T>::decode(bytes);
}

// torch's broadcast_object_list: every element of src's list; the others' lists
// take its length.
template <typename T>
void broadcast_object_list(std::vector<T>& objects, int src, const Group& group = nullptr) {
  uint64_t n = objects.size();
  broadcast_object(n, src, group);
  objects.resize(static_cast<size_t>(n));
  for (T& object : objects) broadcast_object(object, src, group);
}

// object_list becomes every member's `object`, in group-rank order (resized to
// the group's size).
template <typename T>
void all_gather_object(std::vector<T>& object_list, const T& object, const Group& group = nullptr) {
  const std::vector<detail::ObjectBytes> all = detail::all_gather_object_bytes(ObjectCodec<T>::encode(object), group);
  object_list.clear();
  for (const auto& bytes : all) object_list.push_back(ObjectCodec<T>::decode(bytes));
}

// On dst, object_gather_list becomes every member's `object`, in group-rank
// order; on the other ranks it is left as it is.
template <typename T>
void gather_object(const T& object, std::vector<T>& object_gather_list, int dst, const Group& group = nullptr) {
  const std::vector<detail::ObjectBytes> all =
      detail::gather_object_bytes(ObjectCodec<T>::encode(object), dst, group);
  if (!detail::is_this_rank(group, dst, "gather_object")) return;
  object_gather_list.clear();
  for (const auto& bytes : all) object_gather_list.push_back(ObjectCodec<T>::decode(bytes));
}

// src's scatter_object_input_list[i] (one per member) becomes group rank i's
// `object`; the input list is read on src only.
template <typename T>
void scatter_object(T& object, const std::vector<T>& scatter_object_input_list, int src,
                    const Group& group = nullptr) {
  std::vector<detail::ObjectBytes> inputs;
  if (detail::is_this_rank(group, src, "scatter_object")) {
    for (const T& o : scatter_object_input_list) inputs.push_back(ObjectCodec<T>::encode(o));
  }
  object = ObjectCodec<T>::decode(detail::scatter_object_bytes(inputs, src, group));
}

}  // namespace thd
