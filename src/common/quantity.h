// Kubernetes resource quantities ("8", "1500m", "16Gi", "1e3"), parsed like apimachinery's
// resource.ParseQuantity but with exact integer results: a value that cannot be expressed
// exactly in the unit asked for is an error, never a silently rounded number.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace uplink {

class Quantity {
 public:
  // Longest text accepted; real API servers emit canonical forms of a few dozen characters.
  static constexpr size_t kMaxLength = 64;

  // Grammar (apimachinery): [+-] digits[.digits] | [+-] [digits].digits, then one suffix:
  // binary Ki Mi Gi Ti Pi Ei, decimal n u m "" k M G T P E, or e/E followed by a signed
  // integer exponent. Anything else is InvalidArgument naming the text.
  static Result<Quantity> Parse(std::string_view text);

  // The value in thousandths (what apimachinery calls MilliValue), exactly. OutOfRange
  // values are ResourceExhausted; values finer than 1m are InvalidArgument.
  Result<std::int64_t> MilliValue() const;

  // The value as a non-negative whole count (devices, GPUs). "1500m" or "-1" are
  // InvalidArgument, not rounded.
  Result<std::int64_t> WholeCount() const;

  bool negative() const { return negative_; }
  const std::string& text() const { return text_; }

 private:
  Quantity() = default;

  std::string text_;
  bool negative_ = false;
  // |value| = significand * 10^decimal_exponent * 2^binary_exponent, where significand has
  // no trailing zeros (they are folded into decimal_exponent) and at most 38 digits.
  unsigned __int128 significand_ = 0;
  int decimal_exponent_ = 0;
  int binary_exponent_ = 0;
};

}  // namespace uplink
