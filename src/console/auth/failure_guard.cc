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
constexpr const char* kReplicaChargesRecoveredTotal =
    "uplink_console_auth_replica_charges_recovered_total";
constexpr const char* kReplicaChargesDuplicatesTotal =
    "uplink_console_auth_replica_charges_duplicates_total";
constexpr const char* kReplicaMessagesInvalidTotal =
    "uplink_console_auth_replica_messages_invalid_total";
// One charge as it is made; several sent again (unsent during an outage, or asked for); a
// replica asking for the others' charges, having missed some.
constexpr std::string_view kChargeTopic = "auth_failure";
constexpr std::string_view kChargesTopic = "auth_failures";
constexpr std::string_view kAskTopic = "auth_resync";
constexpr std::chrono::seconds kRememberedMargin{60};

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
  metrics_.DeclareCounter(kReplicaChargesRecoveredTotal,
                          "Other replicas' charges this one missed and charged when they were "
                          "sent again after a bus outage.");
  metrics_.DeclareCounter(kReplicaChargesDuplicatesTotal,
                          "Other replicas' charges heard again and not charged twice.");
  metrics_.DeclareCounter(kReplicaMessagesInvalidTotal,
                          "Failed-authentication messages from the replica bus that were not "
                          "what a replica sends; nothing was charged for them.");
  bus_ = &bus;
  replica_charge_ = bus.Subscribe(std::string(kChargeTopic), [this](const json::object& message) {
    ChargeFromReplica(message);
  });
  replica_charges_ = bus.Subscribe(std::string(kChargesTopic),
                                   [this](const json::object& message) {
                                     ChargesFromReplica(message);
                                   });
  charges_asked_ = bus.Subscribe(std::string(kAskTopic), [this](const json::object& message) {
    SendKeptChargesAgain(message);
  });
  bus_back_ = bus.OnResync([this] {
    AskForCharges();
    SendUnsentCharges();
  });
  // The bus's first connection does not resync; a replica that just started has missed the
  // charges made before it did all the same.
  AskForCharges();
}

size_t FailureGuard::kept_charges() const {
  std::lock_guard lock(kept_mutex_);
  return kept_.size();
}

size_t FailureGuard::remembered_charges() const {
  std::lock_guard lock(remembered_mutex_);
  return remembered_.size();
}

void FailureGuard::SendCharge(json::object keys) {
  json::object message = keys;
  std::uint64_t sequence = 0;
  {
    std::lock_guard lock(kept_mutex_);
    sequence = next_sequence_++;
    if (kept_.size() >= kMaxKeptCharges) DropOldestKeptLocked();
    kept_.push_back(KeptCharge{sequence, clock_.SteadyNow(), std::move(keys)});
    ++unsent_;
  }
  message["seq"] = sequence;
  message["age_ms"] = 0;
  Status sent = bus_->Publish(kChargeTopic, message);
  if (sent.code() == StatusCode::kUnavailable) return;  // sent once the bus is back
  if (!sent.ok()) {
    log_.Warn("could not send a failed authentication to the other replicas", {{"error", sent}});
  }
  MarkSent({sequence});
  if (sent.ok()) SendUnsentCharges();
}

void FailureGuard::DropOldestKeptLocked() {
  if (!kept_.front().sent) --unsent_;
  kept_.pop_front();
}

void FailureGuard::MarkSent(const std::vector<std::uint64_t>& sequences) {
  std::lock_guard lock(kept_mutex_);
  auto it = kept_.begin();
  for (std::uint64_t sequence : sequences) {  // both ascending
    while (it != kept_.end() && it->sequence < sequence) ++it;
    if (it != kept_.end() && it->sequence == sequence && !it->sent) {
      it->sent = true;
      --unsent_;
    }
  }
}

std::vector<FailureGuard::KeptCharge> FailureGuard::KeptChargesToSend(bool unsent_only) {
  const SteadyTime stale_before = clock_.SteadyNow() - charge_weighs_for_;
  std::lock_guard lock(kept_mutex_);
  while (!kept_.empty() && kept_.front().at < stale_before) DropOldestKeptLocked();
  std::vector<KeptCharge> sending;
  if (unsent_only && unsent_ == 0) return sending;  // the usual case, after every charge
  for (const KeptCharge& charge : kept_) {
    if (!unsent_only || !charge.sent) sending.push_back(charge);
  }
  return sending;
}

void FailureGuard::SendUnsentCharges() { SendInBatches(KeptChargesToSend(true)); }

void FailureGuard::SendKeptChargesAgain(const json::object& request) {
  for (const auto& [field, value] : request) {
    if (field != "topic" && field != "from") {
      Ignore(request, InvalidArgumentError("unknown field \"" + std::string(field) + "\""));
      return;
    }
  }
  if (StringAt(request, "from").empty()) {
    Ignore(request, InvalidArgumentError("no \"from\": not sent by a replica"));
    return;
  }
  SendInBatches(KeptChargesToSend(false));
}

void FailureGuard::SendInBatches(const std::vector<KeptCharge>& charges) {
  if (charges.empty()) return;
  const SteadyTime now = clock_.SteadyNow();
  const size_t envelope = ToJson(json::object{{"charges", json::array{}},
                                              {"topic", kChargesTopic},
                                              {"from", bus_->replica_id()}})
                              .size();
  std::vector<std::uint64_t> sent;
  json::array batch;
  std::vector<std::uint64_t> in_batch;
  size_t bytes = envelope;
  // False when the bus is away; a batch it refuses for good is dropped, so that it does not
  // hold back every charge after it.
  auto flush = [&] {
    if (batch.empty()) return true;
    Status published = bus_->Publish(kChargesTopic, json::object{{"charges", batch}});
    if (published.code() == StatusCode::kUnavailable) return false;
    if (!published.ok()) {
      log_.Warn("could not send failed authentications to the other replicas",
                {{"error", published}, {"charges", batch.size()}});
    }
    sent.insert(sent.end(), in_batch.begin(), in_batch.end());
    batch.clear();
    in_batch.clear();
    bytes = envelope;
    return true;
  };
  for (const KeptCharge& charge : charges) {
    json::object item = charge.keys;
    item["seq"] = charge.sequence;
    item["age_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(now - charge.at).count();
    const size_t item_bytes = ToJson(item).size() + 1;  // and a comma
    if (bytes + item_bytes > kMaxReplicaMessageBytes || batch.size() == kMaxChargesPerMessage) {
      if (!flush()) break;
    }
    batch.push_back(std::move(item));
    in_batch.push_back(charge.sequence);
    bytes += item_bytes;
  }
  flush();
  MarkSent(sent);
}

void FailureGuard::AskForCharges() {
  Status asked = bus_->Publish(kAskTopic, json::object{});
  // Unavailable: asked again when the bus is back, which resyncs.
  if (!asked.ok() && asked.code() != StatusCode::kUnavailable) {
    log_.Warn("could not ask the other replicas for their failed authentications",
              {{"error", asked}});
  }
}

namespace {

// A non-negative integer field; `minimum` bounds it from below.
Result<std::uint64_t> CountAt(const json::object& object, std::string_view field,
                              std::uint64_t minimum) {
  const json::value* value = object.if_contains(field);
  if (value == nullptr) return InvalidArgumentError("no \"" + std::string(field) + "\"");
  std::uint64_t count = 0;
  if (value->is_uint64()) {
    count = value->as_uint64();
  } else if (value->is_int64() && value->as_int64() >= 0) {
    count = static_cast<std::uint64_t>(value->as_int64());
  } else {
    return InvalidArgumentError("\"" + std::string(field) + "\" is not a whole number >= " +
                                std::to_string(minimum));
  }
  if (count < minimum) {
    return InvalidArgumentError("\"" + std::string(field) + "\" is below " +
                                std::to_string(minimum));
  }
  return count;
}

}  // namespace

Result<FailureGuard::HeardCharge> FailureGuard::ReadCharge(const json::object& object,
                                                           bool envelope_fields) {
  HeardCharge charge;
  for (const auto& [field, value] : object) {
    std::string* key = field == "address" ? &charge.address
                       : field == "email" ? &charge.email
                       : field == "prefix" ? &charge.prefix
                                           : nullptr;
    if (key != nullptr) {
      if (!value.is_string() || value.as_string().empty()) {
        return InvalidArgumentError("\"" + std::string(field) + "\" is not a non-empty string");
      }
      *key = std::string(value.as_string());
    } else if (field != "seq" && field != "age_ms" &&
               !(envelope_fields && (field == "topic" || field == "from"))) {
      return InvalidArgumentError("unknown field \"" + std::string(field) + "\"");
    }
  }
  if (charge.address.empty() && charge.email.empty() && charge.prefix.empty()) {
    return InvalidArgumentError("no bucket key (address, email, prefix)");
  }
  if (envelope_fields && !object.contains("seq") && !object.contains("age_ms")) {
    // From a replica of the version before charges had identities, during a rolling upgrade:
    // charged when heard, as that version charges, with nothing to know a repeat by.
    return charge;
  }
  UPLINK_ASSIGN_OR_RETURN(charge.sequence, CountAt(object, "seq", 1));
  UPLINK_ASSIGN_OR_RETURN(std::uint64_t age, CountAt(object, "age_ms", 0));
  // Anything older than a day is stale anyway; capping it keeps the arithmetic in range.
  charge.age = std::chrono::milliseconds(std::min<std::uint64_t>(age, 86'400'000));
  return charge;
}

void FailureGuard::Ignore(const json::object& message, const Status& why) {
  metrics_.Increment(kReplicaMessagesInvalidTotal);
  log_.Warn("ignored a failed-authentication message from the replica bus that no replica sends; "
            "nothing was charged for it",
            {{"topic", StringAt(message, "topic")}, {"error", why}});
}

void FailureGuard::ChargeFromReplica(const json::object& message) {
  std::string from = StringAt(message, "from");
  if (from.empty()) return Ignore(message, InvalidArgumentError("no \"from\""));
  auto charge = ReadCharge(message, true);
  if (!charge.ok()) return Ignore(message, charge.status());
  Charge(from, {std::move(*charge)}, false);
}

void FailureGuard::ChargesFromReplica(const json::object& message) {
  std::string from = StringAt(message, "from");
  if (from.empty()) return Ignore(message, InvalidArgumentError("no \"from\""));
  for (const auto& [field, value] : message) {
    if (field != "topic" && field != "from" && field != "charges") {
      return Ignore(message, InvalidArgumentError("unknown field \"" + std::string(field) + "\""));
    }
  }
  const json::value* items = message.if_contains("charges");
  if (items == nullptr || !items->is_array() || items->as_array().empty()) {
    return Ignore(message, InvalidArgumentError("\"charges\" is not a non-empty array"));
  }
  if (items->as_array().size() > kMaxChargesPerMessage) {
    return Ignore(message, InvalidArgumentError(
                               std::to_string(items->as_array().size()) + " charges, over the " +
                               std::to_string(kMaxChargesPerMessage) + " a replica sends at once"));
  }
  // All or nothing: a message with one bad charge is not a replica's.
  std::vector<HeardCharge> charges;
  for (const json::value& item : items->as_array()) {
    if (!item.is_object()) {
      return Ignore(message, InvalidArgumentError("a charge is not a JSON object"));
    }
    auto charge = ReadCharge(item.as_object(), false);
    if (!charge.ok()) return Ignore(message, charge.status());
    charges.push_back(std::move(*charge));
  }
  Charge(from, std::move(charges), true);
}

void FailureGuard::Charge(const std::string& from, std::vector<HeardCharge> charges,
                          bool sent_again) {
  const SteadyTime now = clock_.SteadyNow();
  // Oldest first: a bucket's charges in time order weigh exactly as they did where they were
  // made.
  std::stable_sort(charges.begin(), charges.end(),
                   [](const HeardCharge& a, const HeardCharge& b) { return a.age > b.age; });
  for (const HeardCharge& charge : charges) {
    if (charge.age > charge_weighs_for_) continue;  // weighs on no bucket any more
    std::string identity = from + "/" + std::to_string(charge.sequence);
    if (charge.sequence != 0) {
      std::lock_guard lock(remembered_mutex_);
      // Remembered a while longer than any replica sends a charge again, so that one delayed
      // on its way is still known.
      const SteadyTime forget_before = now - charge_weighs_for_ - kRememberedMargin;
      while (!remembered_order_.empty() && remembered_order_.front().first < forget_before) {
        remembered_.erase(remembered_order_.front().second);
        remembered_order_.pop_front();
      }
      if (remembered_.contains(identity)) {
        metrics_.Increment(kReplicaChargesDuplicatesTotal);
        continue;
      }
      if (remembered_order_.size() >= kMaxRememberedCharges) {
        remembered_.erase(remembered_order_.front().second);
        remembered_order_.pop_front();
      }
      remembered_.insert(identity);
      remembered_order_.emplace_back(now, std::move(identity));
    }
    const SteadyTime at = now - charge.age;
    if (!charge.address.empty()) by_address_.RecordFailureAt(charge.address, at);
    if (!charge.email.empty()) by_email_.RecordFailureAt(charge.email, at);
    if (!charge.prefix.empty()) by_prefix_.RecordFailureAt(charge.prefix, at);
    metrics_.Increment(kReplicaChargesTotal);
    if (sent_again) metrics_.Increment(kReplicaChargesRecoveredTotal);
  }
}

}  // namespace uplink::console
