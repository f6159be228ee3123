// Secret: a credential that cannot reach a log line, an error or a stream by accident.
//
// Printing one shows "[redacted]"; the only way to the bytes is the explicit Reveal(), so
// every place that sends a credential is easy to find with grep. The buffer is wiped on
// destruction.
#pragma once

#include <ostream>
#include <string>

namespace uplink {

class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : value_(std::move(value)) {}
  Secret(const Secret&) = default;
  Secret(Secret&& other) noexcept : value_(std::move(other.value_)) { other.value_.clear(); }
  Secret& operator=(const Secret& other);
  Secret& operator=(Secret&& other) noexcept;
  ~Secret();

  const std::string& Reveal() const { return value_; }
  bool empty() const { return value_.empty(); }

  // Constant-time equality, for comparing presented credentials.
  bool Equals(const Secret& other) const;

  friend std::ostream& operator<<(std::ostream& os, const Secret&) { return os << "[redacted]"; }

 private:
  void Wipe();
  std::string value_;
};

// Constant-time comparison of two byte strings (lengths are not secret).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace uplink
