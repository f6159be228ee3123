// Redaction of credentials in run params, config and tags, before anything is stored or sent.
//
// A value is removed when its key names a secret (password, token, secret, api_key,
// authorization, credential, private key, ...) and the value could be one (a number, a
// boolean, null or an empty value cannot), or when the value itself looks like a credential
// whatever its key (a bearer or basic header, a URL with a password, a private key block, a
// JWT, or a token with a well-known prefix: OpenAI, Hugging Face, GitHub, GitLab, Slack, AWS,
// Google, uplink's own). Words are matched whole, so "max_tokens" and "tokenizer" stay.
#pragma once

#include <string>
#include <string_view>

namespace uplink::agent::experiments {

inline constexpr std::string_view kRedactedValue = "[redacted]";

// True when `key` names a secret ("db_password", "HF_TOKEN", "apiKey", "Authorization").
bool IsSecretKey(std::string_view key);

// True when `value` looks like a credential on its own.
bool LooksLikeCredential(std::string_view value);

// True when the value of `key` must not leave the agent.
bool MustRedact(std::string_view key, std::string_view value);

}  // namespace uplink::agent::experiments
