#include "protocol/ssh_public_key.h"

#include <openssl/ec.h>
#include <openssl/obj_mac.h>
#include <openssl/sha.h>
#include <sodium.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "common/crypto.h"
#include "common/text.h"

namespace uplink::protocol {
namespace {

constexpr size_t kEd25519KeyBytes = 32;

struct Curve {
  std::string_view type;
  std::string_view name;  // inside the blob
  int nid;
  size_t coordinate_bytes;
};
constexpr std::array<Curve, 3> kCurves = {{
    {"ecdsa-sha2-nistp256", "nistp256", NID_X9_62_prime256v1, 32},
    {"ecdsa-sha2-nistp384", "nistp384", NID_secp384r1, 48},
    {"ecdsa-sha2-nistp521", "nistp521", NID_secp521r1, 66},
}};

Status Invalid(const std::string& what) {
  return InvalidArgumentError("public_key: " + what +
                              "; paste one line of an Ed25519 or ECDSA public key file as "
                              "ssh-keygen wrote it (e.g. ~/.ssh/id_ed25519.pub)");
}

// SSH wire strings: a 4-byte big-endian length, then that many bytes.
class BlobReader {
 public:
  explicit BlobReader(std::string_view blob) : rest_(blob) {}
  std::optional<std::string_view> String() {
    if (rest_.size() < 4) return std::nullopt;
    std::uint32_t length = 0;
    for (int k = 0; k < 4; ++k) length = (length << 8) | static_cast<unsigned char>(rest_[k]);
    rest_.remove_prefix(4);
    if (length > rest_.size()) return std::nullopt;
    std::string_view out = rest_.substr(0, length);
    rest_.remove_prefix(length);
    return out;
  }
  bool done() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

bool OnCurve(int nid, std::string_view point) {
  std::unique_ptr<EC_GROUP, decltype(&EC_GROUP_free)> group(EC_GROUP_new_by_curve_name(nid),
                                                            &EC_GROUP_free);
  if (!group) return false;
  std::unique_ptr<EC_POINT, decltype(&EC_POINT_free)> decoded(EC_POINT_new(group.get()),
                                                              &EC_POINT_free);
  // oct2point refuses a point off the curve; the point at infinity is no key either.
  return decoded &&
         EC_POINT_oct2point(group.get(), decoded.get(),
                            reinterpret_cast<const unsigned char*>(point.data()), point.size(),
                            nullptr) == 1 &&
         EC_POINT_is_at_infinity(group.get(), decoded.get()) == 0;
}

Status CheckBlob(std::string_view type, std::string_view blob) {
  BlobReader reader(blob);
  auto inner = reader.String();
  if (!inner) return Invalid("the key data is cut short");
  if (*inner != type) {
    return Invalid("the key data is a " + std::string(inner->substr(0, 40)) + " key, not " +
                   std::string(type));
  }
  if (type == "ssh-ed25519") {
    auto key = reader.String();
    if (!key || key->size() != kEd25519KeyBytes || !reader.done()) {
      return Invalid("an Ed25519 key is 32 bytes, and this one's data is not");
    }
    // A point of the curve in the main subgroup, not of small order (libsodium's check).
    if (crypto_core_ed25519_is_valid_point(reinterpret_cast<const unsigned char*>(key->data())) !=
        1) {
      return Invalid("the key is not a valid Ed25519 point");
    }
    return Status::Ok();
  }
  for (const Curve& curve : kCurves) {
    if (curve.type != type) continue;
    auto name = reader.String();
    auto point = reader.String();
    if (!name || *name != curve.name || !point || !reader.done()) {
      return Invalid("the key data is not an ECDSA " + std::string(curve.name) + " key");
    }
    // Uncompressed, as OpenSSH writes it: 0x04, then both coordinates.
    if (point->size() != 1 + 2 * curve.coordinate_bytes || (*point)[0] != 0x04 ||
        !OnCurve(curve.nid, *point)) {
      return Invalid("the key's point is not a point of " + std::string(curve.name));
    }
    return Status::Ok();
  }
  return Invalid("unsupported key type");
}

bool IsAllowedType(std::string_view type) {
  if (type == "ssh-ed25519") return true;
  for (const Curve& curve : kCurves) {
    if (curve.type == type) return true;
  }
  return false;
}

}  // namespace

std::string SshPublicKey::Authorized() const { return type + " " + Base64Encode(blob); }

Result<SshPublicKey> ParseSshPublicKey(std::string_view line) {
  // One line, as a .pub file holds it, with its line ending.
  if (line.ends_with("\r\n")) {
    line.remove_suffix(2);
  } else if (line.ends_with('\n')) {
    line.remove_suffix(1);
  }
  if (line.empty()) return Invalid("it is empty");
  // Fields are separated by runs of spaces or tabs, as OpenSSH reads them.
  constexpr std::string_view kBlank = " \t";
  // RSA and DSA first: a usual RSA key is longer than the limit, and saying so would not help.
  const std::string_view first = line.substr(0, std::min(line.find_first_of(kBlank), line.size()));
  if (first == "ssh-rsa" || first == "ssh-dss" || first.starts_with("rsa-sha2")) {
    return Invalid(std::string(first) + " keys are not accepted (RSA and DSA); make an Ed25519 "
                   "key with `ssh-keygen -t ed25519` and paste its .pub file");
  }
  if (line.size() > kMaxSshPublicKeyLineBytes) {
    return Invalid("it is longer than " + std::to_string(kMaxSshPublicKeyLineBytes) +
                   " bytes, more than any accepted key with its comment");
  }
  for (char c : line) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte == 0x7f) {
      return Invalid("it has a control character or more than one line");
    }
  }
  const auto next_field = [&](std::string_view& rest) {
    const size_t end = std::min(rest.find_first_of(kBlank), rest.size());
    std::string_view field = rest.substr(0, end);
    rest.remove_prefix(end);
    rest.remove_prefix(std::min(rest.find_first_not_of(kBlank), rest.size()));
    return field;
  };
  std::string_view rest = line;
  const std::string_view type = next_field(rest);
  if (!IsAllowedType(type)) {
    return Invalid("it does not start with a key type this console accepts (ssh-ed25519, "
                   "ecdsa-sha2-nistp256, ecdsa-sha2-nistp384, ecdsa-sha2-nistp521); options "
                   "and certificates are not accepted");
  }
  const std::string_view data = next_field(rest);
  if (data.empty()) return Invalid("the key data is missing");
  std::string_view comment = rest;
  comment.remove_suffix(comment.size() - (comment.find_last_not_of(kBlank) + 1));
  auto blob = Base64Decode(data);
  // Only the canonical encoding: one key has one text, so a duplicate is seen as one.
  if (!blob.ok() || Base64Encode(*blob) != data) {
    return Invalid("the key data is not base64 as ssh-keygen writes it");
  }
  UPLINK_RETURN_IF_ERROR(CheckBlob(type, *blob));
  if (comment.size() > kMaxSshKeyCommentBytes) {
    return Invalid("its comment is longer than " + std::to_string(kMaxSshKeyCommentBytes) +
                   " bytes");
  }
  for (size_t i = 0; i < comment.size();) {
    const size_t length = Utf8SequenceLength(comment, i);
    if (length == 0) return Invalid("its comment is not valid UTF-8");
    i += length;
  }
  SshPublicKey key;
  key.type = std::string(type);
  key.blob = std::move(*blob);
  key.comment = std::string(comment);
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(key.blob.data()), key.blob.size(), digest.data());
  std::string encoded =
      Base64Encode(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
  while (!encoded.empty() && encoded.back() == '=') encoded.pop_back();
  key.fingerprint = "SHA256:" + encoded;
  return key;
}

}  // namespace uplink::protocol
