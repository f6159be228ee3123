// Password hashing for user sign-in: argon2id through libsodium's crypto_pwhash_str.
//
// Hashing is deliberately expensive (64 MiB and ~0.1 s each), so a PasswordHasher lets at most
// `max_concurrent` hashes run at once: a burst of sign-ins queues instead of exhausting the
// console's memory. Verifying an unknown email runs the same work against a dummy hash, so
// the reply time does not tell which emails exist.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "common/bounded_workers.h"
#include "common/secret.h"
#include "common/status.h"

namespace uplink::console {

struct PasswordHashingOptions {
  unsigned long long opslimit = 2;           // crypto_pwhash_OPSLIMIT_INTERACTIVE
  std::size_t memlimit = 64ull << 20;        // crypto_pwhash_MEMLIMIT_INTERACTIVE
  int max_concurrent = 2;
};

// The longest password, in bytes (docs/api.md); request bodies are refused beyond it.
inline constexpr std::size_t kMaxPasswordBytes = 256;

// The rules of docs/api.md: 12-256 bytes, not all one character, not the email itself.
Status ValidateNewPassword(const Secret& password, std::string_view email);

class PasswordHasher {
 public:
  explicit PasswordHasher(PasswordHashingOptions options = {});
  PasswordHasher(const PasswordHasher&) = delete;
  PasswordHasher& operator=(const PasswordHasher&) = delete;

  // The encoded hash ("$argon2id$v=19$m=65536,t=2,p=1$…"); Internal when libsodium fails
  // (out of memory).
  Result<std::string> Hash(const Secret& password);

  // True when `password` matches `encoded_hash`. An empty or malformed hash, or one that
  // asks for more memory or passes than these options, never matches, but still costs one
  // hash, as does Verify on a user without a password.
  bool Verify(const Secret& password, std::string_view encoded_hash);

  // The same work as a Verify that fails, for a sign-in with an unknown email.
  void VerifyDummy(const Secret& password);

  // The most hashes that have run at once since construction; never above max_concurrent
  // (tests check the limit through it).
  int peak_concurrent() const;

  // Runs `job` (a request's handling that hashes) on one of max_concurrent threads of the
  // hasher's own, so that no HTTP thread ever waits for a hash or a slot; false, `job` unrun,
  // when kMaxQueuedJobs already wait (the caller answers 503) or StopWorkers was called.
  bool Submit(std::function<void()> job);
  // Before what the submitted jobs use goes: waits for those running, drops the rest.
  void StopWorkers();

  static constexpr size_t kMaxQueuedJobs = 32;

 private:
  class Slot;  // RAII over the concurrency limit
  void Acquire();
  void Release();

  PasswordHashingOptions options_;
  std::string dummy_hash_;
  mutable std::mutex mutex_;
  std::condition_variable slot_free_;
  int in_use_ = 0;
  int peak_in_use_ = 0;
  BoundedWorkers workers_;
};

}  // namespace uplink::console
