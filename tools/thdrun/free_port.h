// Choosing MASTER_PORT when the user did not.
#pragma once

#include <cstdint>
#include <string>

namespace thd::launch {

// A TCP port that is free on `host` now: binds port 0 on the first address `host`
// resolves to that accepts it, reads the port back and releases it. Another
// process may take it before rank 0 binds it (as with torchrun); rank 0 then fails
// with "address in use" and the job stops. Throws thd::ConnectionError naming the
// host when it does not resolve or nothing can be bound there.
uint16_t pick_free_port(const std::string& host);

}  // namespace thd::launch
