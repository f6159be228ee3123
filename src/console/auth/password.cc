#include "console/auth/password.h"

#include <sodium.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "common/crypto.h"
#include "common/text.h"

namespace uplink::console {
namespace {

constexpr std::size_t kMinPasswordBytes = 12;

// Options come from code, not from users, so a wrong one is a bug worth stopping for.
[[noreturn]] void Fatal(const char* message) {
  std::fprintf(stderr, "fatal: %s\n", message);
  std::abort();
}

void InitSodiumOnce() {
  static const bool initialised = [] {
    if (sodium_init() < 0) Fatal("libsodium failed to initialise");
    return true;
  }();
  (void)initialised;
}

// Reads the decimal number at the front of `text` and removes it.
std::optional<std::uint64_t> ConsumeNumber(std::string_view& text) {
  std::uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end == text.data()) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return value;
}

bool ConsumePrefix(std::string_view& text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// The cost an encoded argon2id hash asks for ("$argon2id$v=19$m=<KiB>,t=<passes>,p=1$…").
struct HashCost {
  std::uint64_t memory_kib;
  std::uint64_t passes;
};

std::optional<HashCost> ParseArgon2idCost(std::string_view encoded) {
  HashCost cost{};
  if (!ConsumePrefix(encoded, "$argon2id$v=19$m=")) return std::nullopt;
  auto memory = ConsumeNumber(encoded);
  if (!memory || !ConsumePrefix(encoded, ",t=")) return std::nullopt;
  auto passes = ConsumeNumber(encoded);
  if (!passes || !ConsumePrefix(encoded, ",p=1$")) return std::nullopt;
  cost.memory_kib = *memory;
  cost.passes = *passes;
  return cost;
}

}  // namespace

Status ValidateNewPassword(const Secret& password, std::string_view email) {
  // Messages name the rule, never the password (nor its length, which narrows a guess).
  std::string_view text = password.Reveal();
  if (text.size() < kMinPasswordBytes) {
    return InvalidArgumentError("password must be at least 12 bytes long; choose a longer one");
  }
  if (text.size() > kMaxPasswordBytes) {
    return InvalidArgumentError("password must be at most 256 bytes long; choose a shorter one");
  }
  if (text.find_first_not_of(text.front()) == std::string_view::npos) {
    return InvalidArgumentError(
        "password must not be one character repeated; choose one with more variety");
  }
  if (EqualsIgnoringAsciiCase(text, email)) {
    return InvalidArgumentError("password must not be the email address; choose another one");
  }
  return Status::Ok();
}

class PasswordHasher::Slot {
 public:
  explicit Slot(PasswordHasher& hasher) : hasher_(hasher) { hasher_.Acquire(); }
  ~Slot() { hasher_.Release(); }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

 private:
  PasswordHasher& hasher_;
};

PasswordHasher::PasswordHasher(PasswordHashingOptions options)
    : options_(options), workers_("pw-hash", options.max_concurrent, kMaxQueuedJobs) {
  InitSodiumOnce();
  if (options_.opslimit < crypto_pwhash_OPSLIMIT_MIN ||
      options_.opslimit > crypto_pwhash_OPSLIMIT_MAX ||
      options_.memlimit < crypto_pwhash_MEMLIMIT_MIN ||
      options_.memlimit > crypto_pwhash_MEMLIMIT_MAX || options_.max_concurrent < 1) {
    Fatal("PasswordHashingOptions are outside libsodium's limits or allow no concurrent hash");
  }
  Secret dummy_password(RandomBytes(32));
  Result<std::string> dummy = Hash(dummy_password);
  if (!dummy.ok()) Fatal("out of memory while computing the dummy password hash");
  dummy_hash_ = std::move(dummy).value();
}

Result<std::string> PasswordHasher::Hash(const Secret& password) {
  const std::string& text = password.Reveal();
  std::array<char, crypto_pwhash_STRBYTES> encoded{};
  int result;
  {
    Slot slot(*this);
    result = crypto_pwhash_str(encoded.data(), text.data(), text.size(), options_.opslimit,
                               options_.memlimit);
  }
  if (result != 0) {
    return InternalError("hashing a password failed: the console could not allocate " +
                         std::to_string(options_.memlimit >> 20) +
                         " MiB for argon2id; give it more memory");
  }
  return std::string(encoded.data());
}

bool PasswordHasher::Verify(const Secret& password, std::string_view encoded_hash) {
  // Only a well-formed argon2id hash that costs no more than this hasher's own settings is
  // verified: anything else would fail fast (telling that the user has no usable hash) or,
  // from a tampered row, cost gigabytes or minutes.
  std::optional<HashCost> cost = ParseArgon2idCost(encoded_hash);
  std::array<char, crypto_pwhash_STRBYTES> terminated{};
  bool usable = cost && cost->memory_kib <= options_.memlimit / 1024 &&
                cost->passes <= options_.opslimit && encoded_hash.size() < terminated.size() &&
                encoded_hash.find('\0') == std::string_view::npos;
  if (usable) {
    std::copy(encoded_hash.begin(), encoded_hash.end(), terminated.begin());
    // -1 when the salt or hash part does not decode, which verify would reject without work.
    usable = crypto_pwhash_str_needs_rehash(terminated.data(), options_.opslimit,
                                            options_.memlimit) != -1;
  }
  if (!usable) {
    VerifyDummy(password);
    return false;
  }
  const std::string& text = password.Reveal();
  Slot slot(*this);
  return crypto_pwhash_str_verify(terminated.data(), text.data(), text.size()) == 0;
}

void PasswordHasher::VerifyDummy(const Secret& password) {
  const std::string& text = password.Reveal();
  Slot slot(*this);
  [[maybe_unused]] int never_matches =
      crypto_pwhash_str_verify(dummy_hash_.c_str(), text.data(), text.size());
}

int PasswordHasher::peak_concurrent() const {
  std::lock_guard lock(mutex_);
  return peak_in_use_;
}

bool PasswordHasher::Submit(std::function<void()> job) { return workers_.Submit(std::move(job)); }

void PasswordHasher::StopWorkers() { workers_.Stop(); }

void PasswordHasher::Acquire() {
  std::unique_lock lock(mutex_);
  slot_free_.wait(lock, [this] { return in_use_ < options_.max_concurrent; });
  ++in_use_;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
}

void PasswordHasher::Release() {
  {
    std::lock_guard lock(mutex_);
    --in_use_;
  }
  slot_free_.notify_one();
}

}  // namespace uplink::console
