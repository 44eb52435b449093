// The signal handlers some backends' libraries install when they are loaded.
#pragma once

namespace thd::detail {

// Puts back the default action of the signals whose handlers belong to libraries
// thd does not want catching them (library_signal_handlers.cpp says which and why).
// Called right after a backend's module is loaded.
void restore_library_signal_handlers();

}  // namespace thd::detail
