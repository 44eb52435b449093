#include "tools/thdrun/free_port.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <system_error>

#include "tensor/check.h"
#include "tools/thdrun/fd.h"

namespace thd::launch {

uint16_t pick_free_port(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), "0", &hints, &found);
  THD_CHECK(rc == 0, ConnectionError, "thdrun", "cannot resolve the master address '{}' (--master-addr): {}", host,
            ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, &::freeaddrinfo);

  int last_error = 0;
  for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!s || ::bind(s.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = errno;
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      last_error = errno;
      continue;
    }
    const uint16_t port = bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                      : reinterpret_cast<sockaddr_in*>(&bound)->sin_port;
    return ntohs(port);
  }
  THD_THROW(ConnectionError, "thdrun", "cannot bind a port on the master address '{}' (--master-addr): {}", host,
            std::system_category().message(last_error));
}

}  // namespace thd::launch
