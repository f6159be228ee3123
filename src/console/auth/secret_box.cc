#include "console/auth/secret_box.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/crypto.h"

namespace uplink::console {
namespace {

constexpr std::string_view kVersionPrefix = "v1.";
constexpr size_t kNonceBytes = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
constexpr size_t kTagBytes = crypto_aead_xchacha20poly1305_ietf_ABYTES;
static_assert(SecretBox::kKeyBytes == crypto_aead_xchacha20poly1305_ietf_KEYBYTES);

// Idempotent and thread-safe; a libsodium that cannot start leaves nothing safe to do.
void InitSodium() {
  if (sodium_init() < 0) std::abort();
}

const unsigned char* Bytes(std::string_view text) {
  return reinterpret_cast<const unsigned char*>(text.data());
}

// Creates `path` with a fresh key; AlreadyExists when it is there.
Result<Secret> CreateKeyFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return AlreadyExistsError(path + " exists");
    return ErrnoError("creating the key file " + path, errno);
  }
  Secret key(RandomBytes(SecretBox::kKeyBytes));
  bool written = ::write(fd, key.Reveal().data(), key.Reveal().size()) ==
                     static_cast<ssize_t>(key.Reveal().size()) &&
                 ::fsync(fd) == 0;
  int error = errno;
  ::close(fd);
  if (!written) {
    ::unlink(path.c_str());
    return ErrnoError("writing the key file " + path, error);
  }
  // The file's name must survive a crash too, or a restart would make a second key.
  std::string dir = std::filesystem::path(path).parent_path().string();
  int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return key;
}

Result<Secret> ReadKeyFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoError("opening the key file " + path, errno);
  struct stat info;
  std::string problem;
  if (::fstat(fd, &info) != 0) {
    problem = "cannot be examined";
  } else if (!S_ISREG(info.st_mode)) {
    problem = "is not a regular file";
  } else if (info.st_uid != ::geteuid()) {
    problem = "belongs to another user";
  } else if ((info.st_mode & 077) != 0) {
    problem = "may be read or written by others; run chmod 600 " + path;
  } else if (info.st_size != static_cast<off_t>(SecretBox::kKeyBytes)) {
    problem = "does not hold a key (it must be exactly 32 bytes); restore it from a backup";
  }
  std::string bytes(SecretBox::kKeyBytes, '\0');
  if (problem.empty() &&
      ::read(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    problem = "could not be read";
  }
  ::close(fd);
  Secret key(std::move(bytes));
  if (!problem.empty()) return FailedPreconditionError("the key file " + path + " " + problem);
  return key;
}

}  // namespace

SecretBox::SecretBox(const Secret& key)
    : key_(key.empty() ? Secret(RandomBytes(kKeyBytes)) : key) {
  if (key_.Reveal().size() != kKeyBytes) {
    std::fprintf(stderr, "fatal: a sealing key must be %zu bytes\n", kKeyBytes);
    std::abort();
  }
  InitSodium();
}

std::string SecretBox::Seal(const Secret& plaintext, std::string_view context) const {
  std::string nonce = RandomBytes(kNonceBytes);
  std::string sealed(kNonceBytes + plaintext.Reveal().size() + kTagBytes, '\0');
  auto* out = reinterpret_cast<unsigned char*>(sealed.data());
  std::copy(nonce.begin(), nonce.end(), sealed.begin());
  unsigned long long sealed_size = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(
      out + kNonceBytes, &sealed_size, Bytes(plaintext.Reveal()), plaintext.Reveal().size(),
      Bytes(context), context.size(), nullptr, Bytes(nonce), Bytes(key_.Reveal()));
  return std::string(kVersionPrefix) + Base64UrlEncode(sealed);
}

Result<Secret> SecretBox::Open(std::string_view sealed, std::string_view context) const {
  auto unreadable = [] {
    return DataLossError(
        "a sealed two-factor secret does not open: it was sealed under another key (is this "
        "the data directory's own two-factor.key?) or was altered");
  };
  if (!sealed.starts_with(kVersionPrefix)) return unreadable();
  auto raw = Base64UrlDecode(sealed.substr(kVersionPrefix.size()));
  if (!raw.ok() || raw->size() < kNonceBytes + kTagBytes) return unreadable();
  std::string_view nonce = std::string_view(*raw).substr(0, kNonceBytes);
  std::string_view box = std::string_view(*raw).substr(kNonceBytes);
  std::string plain(box.size() - kTagBytes, '\0');
  unsigned long long plain_size = 0;
  int opened = crypto_aead_xchacha20poly1305_ietf_decrypt(
      reinterpret_cast<unsigned char*>(plain.data()), &plain_size, nullptr, Bytes(box),
      box.size(), Bytes(context), context.size(), Bytes(nonce), Bytes(key_.Reveal()));
  Secret secret(std::move(plain));
  if (opened != 0) return unreadable();
  return secret;
}

Result<Secret> LoadKeyFile(const std::string& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) {
    return FailedPreconditionError(
        "no two-factor key at " + path + "; every replica of a console on PostgreSQL needs a "
        "copy of the two-factor.key that \"uplink-console init --store …\" made in its "
        "--data-dir (mode 0600)");
  }
  return ReadKeyFile(path);
}

Result<Secret> LoadOrCreateKeyFile(const std::string& path) {
  auto created = CreateKeyFile(path);
  if (created.ok() || created.status().code() != StatusCode::kAlreadyExists) return created;
  return ReadKeyFile(path);
}

}  // namespace uplink::console
