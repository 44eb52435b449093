#include <thd/error.h>

#include <string>

namespace thd {

Error::Error(std::string message, ErrorContext context)
    : message_(std::move(message)), context_(std::move(context)) {
  compose();
}

void Error::set_node(int node) {
  context_.node = node;
  compose();
}

void Error::compose() {
  std::string w;
  if (!context_.op.empty()) w += context_.op + ": ";
  w += message_;
  std::string where;
  auto add = [&](const char* name, int v) {
    if (v < 0) return;
    if (!where.empty()) where += ", ";
    where += name;
    where += ' ';
    where += std::to_string(v);
  };
  add("node", context_.node);
  add("rank", context_.rank);
  add("peer", context_.peer);
  if (!where.empty()) w += " [" + where + "]";
  if (context_.file != nullptr) {
    w += " (";
    w += context_.file;
    w += ':';
    w += std::to_string(context_.line);
    w += ')';
  }
  what_ = std::move(w);
}

}  // namespace thd
