#include "common/secret.h"

#include <openssl/crypto.h>

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
  if (!value_.empty()) OPENSSL_cleanse(value_.data(), value_.size());
  value_.clear();
}

bool Secret::Equals(const Secret& other) const { return ConstantTimeEquals(value_, other.value_); }

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace uplink
