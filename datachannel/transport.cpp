#include "datachannel/transport.h"

namespace thd::detail {

Transport::~Transport() = default;

bool Transport::wait(RequestState& request, net::Deadline until) { return request.block_until(until); }

}  // namespace thd::detail
