// Decimal numbers read from text: /proc files, nvidia-smi's CSV, YAML scalars.
#pragma once

#include <optional>
#include <string_view>

namespace uplink {

// The whole of `text` as a finite double, correctly rounded: an optional '-', digits with an
// optional fraction (or a fraction alone, ".5"), and an optional exponent ("1e-3", "2E+6").
// No leading '+', spaces, hex, "inf" or "nan"; nullopt for those, for anything else, and for
// a value beyond double's range (one too small to represent becomes a subnormal or zero).
//
// One parser for the three places that read decimals, and strtod_l rather than
// std::from_chars: libstdc++ 12's floating-point from_chars pulls in its own copy of a
// strtod fallback and calls into libm; the agent's code is resident in proportion to its size.
std::optional<double> ParseFiniteDouble(std::string_view text);

}  // namespace uplink
