#include "common/secret.h"

#include <string.h>

namespace uplink {

Secret& Secret::operator=(const Secret& other) {
  if (this != &other) {
    Wipe();
    value_ = other.value_;
  }
  return *this;
}

Secret& Secret::operator=(Secret&& other) noexcept {
  if (this != &other) {
    Wipe();
    value_ = std::move(other.value_);
    other.value_.clear();
  }
  return *this;
}

Secret::~Secret() { Wipe(); }

void Secret::Wipe() {
  // explicit_bzero, unlike memset, is never removed as a store to memory about to be freed.
  if (!value_.empty()) ::explicit_bzero(value_.data(), value_.size());
  value_.clear();
}

bool Secret::Equals(const Secret& other) const { return ConstantTimeEquals(value_, other.value_); }

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  // Every byte is compared whatever the earlier ones held: the volatile accumulator keeps the
  // compiler from turning the loop into an early exit (libsodium's sodium_memcmp does the
  // same). Kept free of OpenSSL so that the agent need not load libcrypto to hold a token.
  volatile unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto byte_a = static_cast<unsigned char>(a[i]);
    const auto byte_b = static_cast<unsigned char>(b[i]);
    difference = difference | (byte_a ^ byte_b);
  }
  return difference == 0;
}

}  // namespace uplink
