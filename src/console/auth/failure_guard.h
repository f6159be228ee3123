// The limits on failed attempts to authenticate (docs/api.md, "Rate limiting of failed
// authentication"): every refusal is counted, logged with its reason, kind, source address and
// the presented credential's non-secret lookup prefix (never the credential), and takes a token
// from the source address's bucket and from the lookup prefix's or the email's. An address
// whose bucket is empty is refused before any credential is looked at; a prefix's bucket is
// consulted only after verification failed, so knowing a token's prefix never locks its holder
// out.
//
// Replicas on one database (docs/architecture.md, "Replicas") share the budgets: each charged
// refusal is sent to the others (the bucket keys only: an address, a lookup prefix, an email;
// never a credential), which charge the same buckets, so N replicas do not give N times the
// attempts. A charge this replica could not send while its bus reconnected is sent once the
// bus is back (up to kMaxUnsentCharges of them, each while it still weighs on a bucket).
#pragma once

#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "console/auth/rate_limiter.h"
#include "console/replicas/replica_bus.h"
#include "net/http.h"

namespace uplink::console {

struct AuthRateLimits {
  RateLimit per_address{30, 30.0 / 60};  // 30 per minute
  RateLimit per_prefix{10, 10.0 / 60};   // 10 per minute
  RateLimit per_email{10, 10.0 / 900};   // 10 per 15 minutes
};

// One refused attempt to authenticate.
struct AuthRefusal {
  std::string_view kind;    // "api_key", "session", "agent_token", "handover_code", "password"
  std::string_view reason;  // the reply's error code
  std::string_view remote_address;
  std::string_view lookup_prefix;  // of a well-formed credential; empty otherwise
  std::string_view email;          // of a sign-in or password check; empty otherwise
  // False for refusals that are no guess at a credential (none presented, a deactivated
  // owner): counted and logged, but they take nothing from any bucket.
  bool is_failure = true;
  // A real credential that is revoked or expired: no guess either, so it takes nothing from
  // the address bucket (a cluster of forgotten agents behind one NAT must not lock out the
  // good ones there), only from its prefix's.
  bool credential_matched = false;
};

class FailureGuard {
 public:
  // `clock` and `metrics` must outlive this object.
  FailureGuard(const Clock& clock, const AuthRateLimits& limits, metrics::Registry& metrics);

  // The 429 reply when `address` has used up its failures; checked before any credential.
  std::optional<net::Response> CheckAddress(std::string_view address);
  // The 429 reply when `email` has used up its failures; checked before the password.
  std::optional<net::Response> CheckEmail(std::string_view email);

  // Counts, logs and charges a refusal. Returns the 429 reply to send instead of the refusal
  // when the prefix's bucket was already empty.
  std::optional<net::Response> Refused(const AuthRefusal& refusal);

  // Sends this guard's charges to the other replicas and charges theirs here. `bus` must
  // outlive this object; call once, before serving.
  void JoinReplicas(ReplicaBus& bus);

  // Charges kept for the bus at most; beyond, the oldest are dropped.
  static constexpr size_t kMaxUnsentCharges = 4096;

 private:
  // Another replica's charge, as Refused() took it there.
  void ChargeFromReplica(const json::object& message);
  // Sends `charge` to the other replicas, keeping it for later if the bus is reconnecting;
  // then what was kept, if the bus took this one.
  void SendCharge(json::object charge);
  // Sends the charges kept while the bus was away, keeping those it still cannot send.
  void SendUnsentCharges();

  // The 429 reply when `wait` is set: "<what>; wait N seconds, then <then>".
  std::optional<net::Response> Limited(std::string_view scope,
                                       std::optional<std::chrono::seconds> wait,
                                       std::string_view what, std::string_view then);

  metrics::Registry& metrics_;
  RateLimiter by_address_;
  RateLimiter by_prefix_;
  RateLimiter by_email_;
  log::Logger log_{"console.auth"};
  const Clock& clock_;
  // How long a charge weighs on the slowest bucket: one kept longer is not worth sending.
  std::chrono::seconds charge_weighs_for_;
  ReplicaBus* bus_ = nullptr;
  std::mutex unsent_mutex_;
  std::deque<std::pair<SteadyTime, json::object>> unsent_;  // oldest first; under unsent_mutex_
  // Last: end before the buckets and the queue their handlers use.
  ReplicaBus::Subscription replica_charges_;
  ReplicaBus::Subscription bus_back_;
};

}  // namespace uplink::console
