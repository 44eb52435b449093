// What an operation is, for error messages ("recv from rank 1 (tag 3)").
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace thd::detail {

// Point-to-point requests describe themselves lazily: one is made per message,
// and formatting its text (and allocating it: it outgrows the small-string
// buffer) was a measurable part of an 8-byte round trip, for a string only an
// error ever reads.
class OpLabel {
 public:
  OpLabel(std::string text) : text_(std::move(text)) {}  // NOLINT: implicit, as the string it replaces
  OpLabel(const char* text) : text_(text) {}             // NOLINT

  // A label of a kind other than text copies no string: a blocking receive's
  // request copies its call's label once per message.
  OpLabel(const OpLabel& other) : kind_(other.kind_), peer_(other.peer_), tag_(other.tag_) {
    if (other.kind_ == Kind::Text) [[unlikely]] text_ = other.text_;
  }
  OpLabel(OpLabel&&) noexcept = default;
  OpLabel& operator=(const OpLabel&) = default;
  OpLabel& operator=(OpLabel&&) noexcept = default;
  ~OpLabel() = default;

  static OpLabel send_to(int peer, int64_t tag) noexcept { return OpLabel(Kind::SendTo, peer, tag); }
  // peer < 0: from any rank.
  static OpLabel recv_from(int peer, int64_t tag) noexcept { return OpLabel(Kind::RecvFrom, peer, tag); }

  std::string str() const;
  operator std::string() const { return str(); }  // NOLINT: errors take the text

  friend std::string operator+(const OpLabel& a, std::string_view b) { return a.str().append(b); }
  friend std::string operator+(std::string_view a, const OpLabel& b) { return std::string(a).append(b.str()); }
  friend std::ostream& operator<<(std::ostream& out, const OpLabel& op) { return out << op.str(); }

 private:
  enum class Kind : uint8_t { Text, SendTo, RecvFrom };
  OpLabel(Kind kind, int peer, int64_t tag) noexcept : kind_(kind), peer_(peer), tag_(tag) {}

  Kind kind_ = Kind::Text;
  int peer_ = -1;
  int64_t tag_ = 0;
  std::string text_;
};

}  // namespace thd::detail

template <>
struct fmt::formatter<thd::detail::OpLabel> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const thd::detail::OpLabel& op, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(op.str(), ctx);
  }
};
