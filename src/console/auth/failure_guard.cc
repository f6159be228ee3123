#include "console/auth/failure_guard.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/json.h"
#include "console/replies.h"

namespace uplink::console {
namespace {

constexpr const char* kAuthFailuresTotal = "uplink_console_auth_failures_total";
constexpr const char* kAuthRateLimitedTotal = "uplink_console_auth_rate_limited_total";
constexpr const char* kReplicaChargesTotal = "uplink_console_auth_replica_charges_total";
constexpr std::string_view kChargeTopic = "auth_failure";

// The address bucket's key: an IPv4 address as it is, an IPv6 address by its /64 (one host
// usually holds a whole /64, so keying by address would let it spread its guesses), and an
// IPv4-mapped IPv6 address by its IPv4 address.
std::string AddressBucketKey(std::string_view address) {
  std::string text(address);
  in6_addr v6{};
  if (text.find(':') == std::string::npos || ::inet_pton(AF_INET6, text.c_str(), &v6) != 1) {
    return text;
  }
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    char v4[INET_ADDRSTRLEN];
    return ::inet_ntop(AF_INET, &v6.s6_addr[12], v4, sizeof v4) != nullptr ? v4 : text;
  }
  std::memset(&v6.s6_addr[8], 0, 8);
  char prefix[INET6_ADDRSTRLEN];
  if (::inet_ntop(AF_INET6, &v6, prefix, sizeof prefix) == nullptr) return text;
  return std::string(prefix) + "/64";
}

}  // namespace

FailureGuard::FailureGuard(const Clock& clock, const AuthRateLimits& limits,
                           metrics::Registry& metrics)
    : metrics_(metrics),
      by_address_(clock, limits.per_address),
      by_prefix_(clock, limits.per_prefix),
      by_email_(clock, limits.per_email),
      clock_(clock),
      charge_weighs_for_(0) {
  for (const RateLimit& limit : {limits.per_address, limits.per_prefix, limits.per_email}) {
    if (limit.refill_per_second <= 0) continue;
    charge_weighs_for_ = std::max(
        charge_weighs_for_,
        std::chrono::seconds(static_cast<std::int64_t>(std::ceil(limit.burst / limit.refill_per_second))));
  }
  metrics_.DeclareCounter(kAuthFailuresTotal,
                          "Refused credentials and sign-ins by kind and reason.");
  metrics_.DeclareCounter(kAuthRateLimitedTotal,
                          "Requests refused with 429 after too many failures, by bucket scope.");
}

std::optional<net::Response> FailureGuard::Limited(std::string_view scope,
                                                   std::optional<std::chrono::seconds> wait,
                                                   std::string_view what, std::string_view then) {
  if (!wait) return std::nullopt;
  metrics_.Increment(kAuthRateLimitedTotal, {{"scope", scope}});
  return RateLimitedResponse(*wait, std::string(what) + "; wait " + std::to_string(wait->count()) +
                                        " seconds, then " + std::string(then));
}

// 429s are counted, and logged only at debug level: the failures that led to them were
// logged, and a client hammering a closed bucket must not flood the log.
std::optional<net::Response> FailureGuard::CheckAddress(std::string_view address) {
  auto limited = Limited("address", by_address_.Check(AddressBucketKey(address)),
                         "too many failed sign-ins or credentials came from your address",
                         "try again with a valid credential");
  if (limited) log_.Debug("refused: address rate-limited", {{"remote_address", address}});
  return limited;
}

std::optional<net::Response> FailureGuard::CheckEmail(std::string_view email) {
  auto limited = Limited("email", by_email_.Check(std::string(email)),
                         "too many failed sign-ins for this email",
                         "try again, or ask an admin to set a new password");
  if (limited) log_.Debug("refused: email rate-limited", {{"email", email}});
  return limited;
}

std::optional<net::Response> FailureGuard::Refused(const AuthRefusal& refusal) {
  metrics_.Increment(kAuthFailuresTotal, {{"kind", refusal.kind}, {"reason", refusal.reason}});
  if (refusal.email.empty()) {
    log_.Warn("authentication refused", {{"reason", refusal.reason},
                                         {"kind", refusal.kind},
                                         {"remote_address", refusal.remote_address},
                                         {"lookup_prefix", refusal.lookup_prefix}});
  } else {
    log_.Warn("authentication refused", {{"reason", refusal.reason},
                                         {"kind", refusal.kind},
                                         {"remote_address", refusal.remote_address},
                                         {"email", refusal.email}});
  }
  if (!refusal.is_failure) return std::nullopt;
  json::object charge;
  if (!refusal.credential_matched) {
    std::string address = AddressBucketKey(refusal.remote_address);
    by_address_.RecordFailure(address);
    charge["address"] = address;
  }
  if (!refusal.email.empty()) {
    by_email_.RecordFailure(std::string(refusal.email));
    charge["email"] = refusal.email;
  }
  std::optional<std::chrono::seconds> prefix_wait;
  if (!refusal.lookup_prefix.empty()) {
    std::string prefix(refusal.lookup_prefix);
    prefix_wait = by_prefix_.Check(prefix);
    by_prefix_.RecordFailure(prefix);
    charge["prefix"] = prefix;
  }
  if (bus_ != nullptr && !charge.empty()) SendCharge(std::move(charge));
  if (refusal.lookup_prefix.empty()) return std::nullopt;
  return Limited("prefix", prefix_wait, "too many failed attempts with credentials of this prefix",
                 "try again with the right credential");
}

void FailureGuard::JoinReplicas(ReplicaBus& bus) {
  metrics_.DeclareCounter(kReplicaChargesTotal,
                          "Failed authentications other replicas charged to this one's buckets.");
  bus_ = &bus;
  replica_charges_ = bus.Subscribe(std::string(kChargeTopic), [this](const json::object& message) {
    ChargeFromReplica(message);
  });
  bus_back_ = bus.OnResync([this] { SendUnsentCharges(); });
}

void FailureGuard::SendCharge(json::object charge) {
  Status sent = bus_->Publish(kChargeTopic, charge);
  if (sent.ok()) {
    SendUnsentCharges();
    return;
  }
  if (sent.code() != StatusCode::kUnavailable) {
    log_.Warn("could not send a failed authentication to the other replicas", {{"error", sent}});
    return;
  }
  // The bus is reconnecting: sent when it is back, so that the other replicas' budgets are
  // not larger for the outage.
  std::lock_guard lock(unsent_mutex_);
  if (unsent_.size() >= kMaxUnsentCharges) unsent_.pop_front();
  unsent_.emplace_back(clock_.SteadyNow(), std::move(charge));
}

void FailureGuard::SendUnsentCharges() {
  std::deque<std::pair<SteadyTime, json::object>> sending;
  {
    std::lock_guard lock(unsent_mutex_);
    if (unsent_.empty()) return;
    sending.swap(unsent_);
  }
  const SteadyTime stale_before = clock_.SteadyNow() - charge_weighs_for_;
  while (!sending.empty()) {
    if (sending.front().first >= stale_before) {
      if (Status sent = bus_->Publish(kChargeTopic, sending.front().second); !sent.ok()) break;
    }
    sending.pop_front();
  }
  if (sending.empty()) return;
  // Away again: what is left goes back in front of what was kept meanwhile.
  std::lock_guard lock(unsent_mutex_);
  while (!sending.empty()) {
    if (unsent_.size() < kMaxUnsentCharges) unsent_.push_front(std::move(sending.back()));
    sending.pop_back();
  }
}

void FailureGuard::ChargeFromReplica(const json::object& message) {
  // Keys are charged as sent, and only when they are strings: a malformed message charges
  // what it can and nothing else.
  std::string address = StringAt(message, "address");
  std::string email = StringAt(message, "email");
  std::string prefix = StringAt(message, "prefix");
  if (!address.empty()) by_address_.RecordFailure(address);
  if (!email.empty()) by_email_.RecordFailure(email);
  if (!prefix.empty()) by_prefix_.RecordFailure(prefix);
  if (!address.empty() || !email.empty() || !prefix.empty()) {
    metrics_.Increment(kReplicaChargesTotal);
  }
}

}  // namespace uplink::console
