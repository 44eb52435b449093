// Writing recorded traces as one Chrome/Perfetto JSON file ("Trace Event Format",
// open it in ui.perfetto.dev or chrome://tracing).
//
// What is written, for each part (the master's Recorder and each worker's):
//   "ph":"M" process_name / process_sort_index / thread_name / thread_sort_index
//   "ph":"X" one complete slice per op, its args as a JSON object
//   "ph":"s" / "ph":"f" (with "bp":"e") flow ends, cat "thd", name "flow", "id" the
//            flow id as a hex string (numbers above 2^53 would lose bits in JSON)
//   "ph":"i" one global instant event when any part dropped events at its cap
// Timestamps: each part's offset_ns is added (putting it on the master's clock), the
// earliest timestamp of the whole trace is subtracted ("metadata" keeps it as
// thd_clock_base_ns), and "ts"/"dur" are microseconds with three decimals, so
// nanoseconds survive exactly. Strings are escaped for JSON; bytes that are not
// valid UTF-8 become U+FFFD.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "streams/trace.h"

namespace thd::trace {

struct TracePart {
  const Recorder* recorder = nullptr;  // not owned; must not be null
  int64_t offset_ns = 0;               // added to this part's timestamps
};

// Writes the trace of `parts` to `path` atomically: into a temporary file beside it
// (mode 0600), renamed over `path` once complete, so a reader never sees half a
// file. Throws thd::Error naming the path when it cannot be written, ValueError on
// a null recorder. Each recorder is locked while its part is written.
void write_chrome_trace(const std::string& path, const std::vector<TracePart>& parts);

// The same JSON text, in memory.
std::string chrome_trace_json(const std::vector<TracePart>& parts);

}  // namespace thd::trace
