#include "datachannel/op_label.h"

namespace thd::detail {

std::string OpLabel::str() const {
  switch (kind_) {
    case Kind::Text:
      return text_;
    case Kind::SendTo:
      return fmt::format("send to rank {} (tag {})", peer_, tag_);
    case Kind::RecvFrom:
      return peer_ < 0 ? fmt::format("recv from any rank (tag {})", tag_)
                       : fmt::format("recv from rank {} (tag {})", peer_, tag_);
  }
  return text_;
}

}  // namespace thd::detail
