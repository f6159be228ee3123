// Bearer-token authentication: the admin token from the kubeconfig the simulator writes, and
// further identities from a token file in kube-apiserver's --token-auth-file format.
//
// The token file is CSV, one identity per line:
//
//   token,user,uid[,"group1,group2"]
//
// as kube-apiserver reads it (fields may be double-quoted, `""` inside quotes is a quote,
// leading spaces are dropped, blank lines are skipped). A user named
// system:serviceaccount:<namespace>:<name> is a service account and also gets the groups
// system:serviceaccounts and system:serviceaccounts:<namespace>, as a real service account
// token does; every identity is in system:authenticated. Unlike kube-apiserver, which warns
// and carries on, an empty or duplicate token, a token that cannot travel in an HTTP header,
// and a file over the size limits are errors: a test's identities must be exactly the ones
// it wrote.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/secret.h"
#include "common/status.h"
#include "kubesim/rbac.h"

namespace uplink::kubesim {

inline constexpr size_t kMaxTokenFileBytes = 1 << 20;
inline constexpr size_t kMaxTokenFileEntries = 10000;
inline constexpr size_t kMaxTokenBytes = 4096;

// The admin identity of the kubeconfig's token: kube-apiserver's cluster-admin equivalent.
inline constexpr std::string_view kAdminUser = "kubesim-admin";

struct TokenUser {
  Secret token;
  std::string uid;
  UserInfo user;
};

// InvalidArgument naming the line (never the token) for anything malformed.
Result<std::vector<TokenUser>> ParseTokenAuthFile(std::string_view text);

// InvalidArgument if a user's token is the admin token.
Status CheckAdminTokenUnique(const Secret& admin_token, const std::vector<TokenUser>& users);

class TokenAuthenticator {
 public:
  // The admin token authenticates kAdminUser in system:masters; `users` their own users.
  TokenAuthenticator(Secret admin_token, std::vector<TokenUser> users);

  // The user for an Authorization header value ("Bearer <token>"); nothing for a missing
  // scheme or an unknown token. Every token is compared in constant time.
  std::optional<UserInfo> Authenticate(std::string_view authorization) const;

 private:
  std::vector<TokenUser> users_;  // the admin first
};

}  // namespace uplink::kubesim
