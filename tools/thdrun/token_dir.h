// The job's private run directory, living exactly as long as the launcher's
// TokenDir: the shared secret handed to the ranks as a file (a fresh random token),
// and the file through which the master says the job is master-worker
// (master/job_mode.h).
#pragma once

#include <cstddef>
#include <string>

namespace thd::launch {

// `bytes` random bytes (OpenSSL RAND_bytes) as lowercase hex. Throws thd::Error
// when the random generator fails.
std::string random_token_hex(size_t bytes = 32);

// A directory made by mkdtemp (mode 0700) under $TMPDIR (else /tmp), holding the
// file `token` (mode 0600) with a fresh random_token_hex() and a newline, unless
// the job keeps a token it inherited (with_token false). The
// destructor removes the directory with everything in it, so every way out of
// the launcher that unwinds the stack removes the secret. (A SIGKILLed launcher
// cannot clean up; the directory is then left behind, readable by its owner only.)
class TokenDir {
 public:
  // Throws thd::Error naming the path when the directory or file cannot be made.
  static TokenDir create(bool with_token = true);

  TokenDir(TokenDir&& other) noexcept;
  TokenDir& operator=(TokenDir&& other) noexcept;
  TokenDir(const TokenDir&) = delete;
  TokenDir& operator=(const TokenDir&) = delete;
  ~TokenDir();

  const std::string& dir() const noexcept { return dir_; }
  // What THD_AUTH_TOKEN_FILE names; empty without a token.
  const std::string& file() const noexcept { return file_; }
  // What THD_JOB_MODE_FILE names: written by the master, if at all.
  std::string job_mode_file() const { return dir_ + "/job_mode"; }

 private:
  TokenDir() = default;
  void remove() noexcept;

  std::string dir_;
  std::string file_;
};

}  // namespace thd::launch
