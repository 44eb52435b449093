// How a master-worker job tells the launcher what it is. thdrun cannot know from
// outside whether the program it started is a master-worker job (the master
// decides what a lost worker means: thd::WorkerLost) or an SPMD job (every rank is
// needed); its default --on-rank-failure policy depends on it (docs/thdrun.md).
// thdrun names a file in the job's private run directory in THD_JOB_MODE_FILE,
// and the master writes the mode into it once every worker is connected.
#pragma once

namespace thd::master {

inline constexpr const char* kJobModeFileVariable = "THD_JOB_MODE_FILE";
// The file's whole content in a master-worker job.
inline constexpr const char* kMasterWorkerJobMode = "master-worker\n";

// Writes kMasterWorkerJobMode into the file THD_JOB_MODE_FILE names; nothing when
// the variable is unset (not under thdrun). Never throws: a file that cannot be
// written is logged (THD_LOG_WARN), and the launcher then treats the job as SPMD.
void announce_master_worker_job() noexcept;

}  // namespace thd::master
