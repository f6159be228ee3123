#include "cli/credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "common/files.h"
#include "common/json.h"

namespace uplink::cli {
namespace {

constexpr size_t kMaxCredentialsFileBytes = 64 * 1024;
constexpr size_t kMaxTokenBody = 512;

std::string OctalMode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string StringOr(const json::object& object, std::string_view key, std::string fallback = "") {
  const json::value* v = object.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : fallback;
}

Result<std::string> ReadAllBounded(int fd, const std::string& path) {
  std::string content;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("reading " + path, errno);
    if (n == 0) return content;
    if (content.size() + static_cast<size_t>(n) > kMaxCredentialsFileBytes) {
      return UnauthenticatedError("the credentials file " + path +
                                  " is far larger than a credential; remove it and run "
                                  "'uplink login'");
    }
    content.append(buf, static_cast<size_t>(n));
  }
}

// Creates `dir` and any missing parents with mode 0700, and narrows `dir` itself to 0700.
Status MakePrivateDirectory(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = slash == std::string::npos ? dir : dir.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoError("creating " + prefix, errno);
    }
    if (slash == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return ErrnoError("checking " + dir, errno);
  if (!S_ISDIR(st.st_mode)) return FailedPreconditionError(dir + " is not a directory");
  if ((st.st_mode & 077) != 0 && st.st_uid == ::geteuid() && ::chmod(dir.c_str(), 0700) != 0) {
    return ErrnoError("chmod 700 " + dir, errno);
  }
  return Status::Ok();
}

}  // namespace

std::string_view CredentialKindName(CredentialKind kind) {
  return kind == CredentialKind::kSession ? "session" : "api_key";
}

bool LooksLikeToken(std::string_view text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix) return false;
  std::string_view body = text.substr(prefix.size());
  if (body.empty() || body.size() > kMaxTokenBody) return false;
  for (char c : body) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

Result<CredentialsFile> CredentialsFile::Default(const EnvLookup& env) {
  const char* xdg = env("XDG_CONFIG_HOME");
  // The XDG base directory spec says relative paths are to be ignored.
  if (xdg != nullptr && xdg[0] == '/') {
    return CredentialsFile(std::string(xdg) + "/uplink/credentials.json");
  }
  const char* home = env("HOME");
  if (home == nullptr || home[0] != '/') {
    return FailedPreconditionError(
        "cannot tell where the credentials file goes: set HOME or XDG_CONFIG_HOME to an "
        "absolute path");
  }
  return CredentialsFile(std::string(home) + "/.config/uplink/credentials.json");
}

Result<std::optional<StoredCredential>> CredentialsFile::Load() const {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) return std::optional<StoredCredential>();
  if (fd < 0) return ErrnoError("opening the credentials file " + path_, errno);
  struct stat st {};
  Status refused = Status::Ok();
  if (::fstat(fd, &st) != 0) {
    refused = ErrnoError("checking the credentials file " + path_, errno);
  } else if (!S_ISREG(st.st_mode)) {
    refused = UnauthenticatedError("the credentials file " + path_ +
                                   " is not a regular file; remove it and run 'uplink login'");
  } else if (st.st_uid != ::geteuid()) {
    refused = UnauthenticatedError("the credentials file " + path_ +
                                   " belongs to another user; uplink uses only your own. "
                                   "Remove it and run 'uplink login'");
  } else if ((st.st_mode & 077) != 0) {
    refused = UnauthenticatedError(
        "permissions " + OctalMode(st.st_mode) + " for the credentials file " + path_ +
        " are too open: other users could read or replace your credential, so uplink will not "
        "use it. Run: chmod 600 " +
        path_);
  }
  Result<std::string> content =
      refused.ok() ? ReadAllBounded(fd, path_) : Result<std::string>(refused);
  ::close(fd);
  if (!content.ok()) return content.status();
  Secret raw(std::move(*content));

  auto corrupt = [&](std::string_view why) {
    return UnauthenticatedError("the credentials file " + path_ + " " + std::string(why) +
                                "; remove it and run 'uplink login'");
  };
  auto parsed = ParseJson(raw.Reveal());
  if (!parsed.ok() || !parsed->is_object()) return corrupt("is not a JSON object");
  const json::object& object = parsed->get_object();
  StoredCredential stored;
  stored.console = StringOr(object, "console");
  stored.expires_at = StringOr(object, "expires_at");
  stored.email = StringOr(object, "email");
  const std::string kind = StringOr(object, "kind");
  Secret credential(StringOr(object, "credential"));
  if (kind == "session" && LooksLikeToken(credential.Reveal(), kSessionPrefix)) {
    stored.kind = CredentialKind::kSession;
  } else if (kind == "api_key" && LooksLikeToken(credential.Reveal(), kApiKeyPrefix)) {
    stored.kind = CredentialKind::kApiKey;
  } else {
    return corrupt("does not hold a session (skt_) or API key (uk_) with its kind");
  }
  if (stored.console.empty()) return corrupt("does not say which console it is for");
  stored.credential = std::move(credential);
  return std::optional<StoredCredential>(std::move(stored));
}

Status CredentialsFile::Save(const StoredCredential& credential) const {
  auto slash = path_.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    UPLINK_RETURN_IF_ERROR(MakePrivateDirectory(path_.substr(0, slash)));
  }
  json::object object{
      {"console", credential.console},
      {"credential", credential.credential.Reveal()},
      {"kind", CredentialKindName(credential.kind)},
      {"expires_at",
       credential.expires_at.empty() ? json::value(nullptr) : json::value(credential.expires_at)},
      {"email", credential.email}};
  Secret text(json::serialize(object) + "\n");
  object.clear();
  return WriteFileAtomic(path_, text.Reveal(), 0600)
      .WithContext("saving the credentials file " + path_);
}

Result<bool> CredentialsFile::Remove() const {
  if (::unlink(path_.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  return ErrnoError("removing the credentials file " + path_, errno);
}

Result<Credential> FindCredential(const std::string& api_key_file, const EnvLookup& env,
                                  const Clock& clock) {
  auto classify = [](Secret secret, std::string source) -> Result<Credential> {
    const std::string& value = secret.Reveal();
    Credential credential;
    if (LooksLikeToken(value, kApiKeyPrefix)) {
      credential.kind = CredentialKind::kApiKey;
    } else if (LooksLikeToken(value, kSessionPrefix)) {
      credential.kind = CredentialKind::kSession;
    } else {
      return UnauthenticatedError(source +
                                  " does not hold an uplink API key (uk_...) or "
                                  "session token (skt_...)");
    }
    credential.secret = std::move(secret);
    credential.source = std::move(source);
    return credential;
  };
  if (!api_key_file.empty()) {
    auto text = ReadFileBounded(api_key_file, 4096);
    if (!text.ok()) {
      return InvalidArgumentError("cannot read --api-key-file " + api_key_file + ": " +
                                  text.status().message());
    }
    Secret raw(std::move(*text));
    return classify(Secret(std::string(TrimWhitespace(raw.Reveal()))),
                    "the API key file " + api_key_file);
  }
  if (const char* key = env("UPLINK_API_KEY"); key != nullptr && *key != '\0') {
    return classify(Secret(std::string(TrimWhitespace(key))), "UPLINK_API_KEY");
  }
  auto file = CredentialsFile::Default(env);
  if (!file.ok()) return UnauthenticatedError("not signed in, and " + file.status().message());
  UPLINK_ASSIGN_OR_RETURN(std::optional<StoredCredential> stored, file->Load());
  if (!stored) {
    return UnauthenticatedError(
        "not signed in: run 'uplink login', set UPLINK_API_KEY, or pass --api-key-file F "
        "(credentials are never taken from the command line)");
  }
  if (!stored->expires_at.empty()) {
    auto expiry = ParseRfc3339(stored->expires_at);
    if (expiry.ok() && *expiry <= clock.Now()) {
      return UnauthenticatedError(
          std::string(stored->kind == CredentialKind::kSession ? "your session" : "your API key") +
          " expired at " + stored->expires_at + "; run 'uplink login'");
    }
  }
  Credential credential;
  credential.secret = std::move(stored->credential);
  credential.kind = stored->kind;
  credential.source = "the credentials file " + file->path();
  credential.from_file = true;
  credential.console = stored->console;
  return credential;
}

}  // namespace uplink::cli
