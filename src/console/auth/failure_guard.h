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
// attempts. Each replica keeps the charges it made while they still weigh on a bucket (the
// newest kMaxKeptCharges): one it could not send while its bus reconnected is sent once the
// bus is back, and a replica whose bus was away (or that just started) asks the others to send
// theirs again, since notifications sent meanwhile never reach it. Every charge has an identity
// (its replica's id and a sequence number), so one heard twice is charged once, and keeps its
// time, so one heard late weighs what it would have weighed when it was made.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/json.h"
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

  // This replica's charges kept (to send when its bus is back, and again to a replica that
  // missed them) at most; beyond, the oldest are dropped.
  static constexpr size_t kMaxKeptCharges = 4096;
  // Other replicas' charges remembered as charged here (so that one heard again is not charged
  // twice) at most; beyond, the oldest are forgotten.
  static constexpr size_t kMaxRememberedCharges = 4 * kMaxKeptCharges;
  // Charges in one message at most (well above what fits in kMaxReplicaMessageBytes).
  static constexpr size_t kMaxChargesPerMessage = 256;

  // For tests of the bounds.
  size_t kept_charges() const;
  size_t remembered_charges() const;

 private:
  // A charge this replica made: the bucket keys it took a token from, and when.
  struct KeptCharge {
    std::uint64_t sequence;
    SteadyTime at;
    json::object keys;
    bool sent = false;
  };
  // Another replica's charge as read from a message, checked.
  struct HeardCharge {
    std::string address, email, prefix;
    std::uint64_t sequence = 0;  // 0: from an earlier version, which sends none
    std::chrono::milliseconds age{0};
  };

  // Keeps `keys` as a charge of this replica and sends it to the others; then what the bus
  // could not take earlier, if it took this one.
  void SendCharge(json::object keys);
  // Sends the kept charges the bus could not take when they were made.
  void SendUnsentCharges();
  // Sends every kept charge that still weighs, for a replica that asked (it missed them).
  void SendKeptChargesAgain(const json::object& request);
  // Sends `charges` (oldest first) in as few messages as fit, and marks those sent; stops at
  // the first the bus cannot take.
  void SendInBatches(const std::vector<KeptCharge>& charges);
  void MarkSent(const std::vector<std::uint64_t>& ascending_sequences);
  void DropOldestKeptLocked();
  // The kept charges that still weigh and (with `unsent_only`) were not sent yet.
  std::vector<KeptCharge> KeptChargesToSend(bool unsent_only);
  // Asks the other replicas for their charges: this replica may have missed some.
  void AskForCharges();

  // One charge as a replica sends it: bucket keys (non-empty strings, at least one), "seq"
  // and "age_ms"; `envelope_fields` allows the message's own ("topic", "from") when the charge
  // is the message.
  static Result<HeardCharge> ReadCharge(const json::object& object, bool envelope_fields);
  // Another replica's charge as it sent it (`auth_failure`), or several sent again
  // (`auth_failures`): each checked, then charged once, at the time it was made.
  void ChargeFromReplica(const json::object& message);
  void ChargesFromReplica(const json::object& message);
  void Charge(const std::string& from, std::vector<HeardCharge> charges, bool sent_again);
  // Counts and logs a message that is not what a replica sends; nothing is charged.
  void Ignore(const json::object& message, const Status& why);

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
  mutable std::mutex kept_mutex_;
  std::uint64_t next_sequence_ = 1;  // under kept_mutex_
  std::deque<KeptCharge> kept_;      // oldest (lowest sequence) first; under kept_mutex_
  size_t unsent_ = 0;                // of kept_; under kept_mutex_
  mutable std::mutex remembered_mutex_;
  // Other replicas' charges charged here ("<replica id>/<sequence>"), and when, oldest first.
  std::unordered_set<std::string> remembered_;                    // under remembered_mutex_
  std::deque<std::pair<SteadyTime, std::string>> remembered_order_;  // under remembered_mutex_
  // Last: end before the buckets and the queues their handlers use.
  ReplicaBus::Subscription replica_charge_;
  ReplicaBus::Subscription replica_charges_;
  ReplicaBus::Subscription charges_asked_;
  ReplicaBus::Subscription bus_back_;
};

}  // namespace uplink::console
