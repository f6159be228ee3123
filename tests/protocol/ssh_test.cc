// Contract tests of the SSH relay (protocol/ssh.h): each control message through its encoder
// and the decoder the other end uses, and hostile input to both decoders.
#include "protocol/ssh.h"

#include <gtest/gtest.h>

#include <variant>

#include "common/crypto.h"
#include "common/json.h"
#include "protocol/credentials.h"

namespace uplink::protocol {
namespace {

constexpr std::string_view kReservation = "res_0123456789abcdef";
constexpr std::string_view kChannel = "sch_0123456789abcdef";
constexpr std::string_view kGrant = "ssg_0123456789abcdef";
// ssh-keygen -t ed25519 -C '' writes the key with a trailing space.
constexpr std::string_view kHostKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEhw0aQDLMFehMBBfgSUSM0uXPEuj3+c6Nnd9l2ljxsQ";
constexpr std::string_view kEcdsaKey =
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBOYQ6sBW1DovlZlPbizn5"
    "L+KFUEmFio6RnrS48MQ5Xu7A7/8ig4KK9KCaenbE1HFrH48nlmmn7D7qIoOsDplg98=";

std::string Credential() { return std::string(NewToken(kChannelCredentialPrefix).Reveal()); }

std::string KeyLine(std::string_view key, std::string_view grant) {
  return std::string(key) + " " + std::string(grant);
}

SshOpen FullOpen() {
  SshOpen open;
  open.channel = std::string(kChannel);
  open.reservation_id = std::string(kReservation);
  open.grant_id = std::string(kGrant);
  open.credential = Credential();
  for (size_t i = 0; i < kMaxAuthorizedKeys; ++i) {
    open.authorized_keys.push_back(KeyLine(i % 2 ? kHostKey : kEcdsaKey, NewSshGrantId()));
  }
  return open;
}

// `text` (an object) with `field` set to `value` (JSON text), or removed when `value` is empty.
std::string With(const std::string& text, std::string_view field, std::string_view value) {
  json::object object = ParseJson(text)->get_object();
  if (value.empty()) {
    object.erase(field);
  } else {
    object[field] = *ParseJson(value);
  }
  return ToJson(object);
}

template <typename Decode>
void ExpectRefused(Decode decode, const std::string& text, std::string_view names) {
  auto read = decode(text);
  ASSERT_FALSE(read.ok()) << text.substr(0, 300);
  EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(read.status().message().find(names), std::string::npos)
      << read.status().message() << " should name " << names;
}

TEST(SshNames, IdsCredentialsPathsAndSubprotocols) {
  EXPECT_TRUE(IsSshChannelId(kChannel));
  EXPECT_TRUE(IsSshGrantId(kGrant));
  for (std::string_view bad : {"", "sch_", "sch_0123456789abcde", "sch_0123456789abcdef0",
                               "sch_0123456789ABCDEF", "sch_../../../etc/pas", "ssg_0123456789abcdef",
                               "sch_0123456789abcde\n"}) {
    EXPECT_FALSE(IsSshChannelId(bad)) << bad;
  }
  EXPECT_FALSE(IsSshGrantId(kChannel));
  EXPECT_TRUE(IsSshChannelId(NewSshChannelId()));
  EXPECT_NE(NewSshChannelId(), NewSshChannelId());
  EXPECT_TRUE(IsSshGrantId(NewSshGrantId()));

  EXPECT_EQ(kChannelCredentialPrefix, "chn_");
  EXPECT_TRUE(IsChannelCredentialShape(Credential()));
  EXPECT_FALSE(IsChannelCredentialShape(std::string(NewToken(kExecutionCredentialPrefix).Reveal())));
  EXPECT_FALSE(IsChannelCredentialShape(Credential() + "A"));
  EXPECT_FALSE(IsChannelCredentialShape("chn_" + std::string(42, 'A') + "+"));

  EXPECT_EQ(SshChannelPath(kChannel), "/api/v1/agent/workspace/channels/sch_0123456789abcdef");
  EXPECT_EQ(SshConnectPath(kReservation, kGrant),
            "/api/v1/reservations/res_0123456789abcdef/ssh/connect?grant=ssg_0123456789abcdef");
  EXPECT_EQ(SshReadinessPath(kReservation), "/api/v1/reservations/res_0123456789abcdef/ssh");
  EXPECT_EQ(kSshTunnelPath, "/api/v1/agent/workspace/tunnel");
  EXPECT_EQ(kSshTunnelSubprotocol, "uplink.ssh-tunnel.v1");
  EXPECT_EQ(kSshChannelSubprotocol, "uplink.ssh-channel.v1");
  EXPECT_EQ(kSshClientSubprotocol, "uplink.ssh-client.v1");
  EXPECT_EQ(kSshDataMessageMaxBytes, 65536u);
  EXPECT_EQ(TransferBudgetCloseReason(100, 100, kReservation),
            "transfer budget used up: 100 of 100 bytes for res_0123456789abcdef");
  EXPECT_EQ(IdleCloseReason(std::chrono::seconds(1800)), "idle for 1800 s");
  EXPECT_EQ(SshdExitedReason(255), "sshd exited (code 255)");
}

TEST(SshKeyLines, OnlyPlainEd25519AndEcdsaLines) {
  EXPECT_TRUE(IsAuthorizedKeyLine(KeyLine(kHostKey, kGrant)));
  EXPECT_TRUE(IsAuthorizedKeyLine(kEcdsaKey));
  for (const std::string& bad :
       {std::string(), std::string("ssh-rsa AAAAB3NzaC1yc2E ssg_x"),
        "command=\"/bin/sh\" " + std::string(kHostKey), std::string(kHostKey) + "\nssh-ed25519 AAAA",
        std::string(kHostKey) + "\r", std::string("ssh-ed25519"), std::string("ssh-ed25519 "),
        std::string("ssh-ed25519 AAAA$$"), std::string(kHostKey) + " " + std::string(1024, 'c'),
        std::string(kHostKey) + std::string(1, '\0')}) {
    EXPECT_FALSE(IsAuthorizedKeyLine(bad)) << bad.substr(0, 80);
  }
}

TEST(SshCapabilityContract, WhatTheAgentReportsTheConsoleReads) {
  SshCapability sent{std::string(kReservation), std::string(kHostKey) + " ", "OpenSSH_9.2p1"};
  auto read = DecodeSshAgentMessage(EncodeSshCapability(sent));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const auto* capability = std::get_if<SshCapability>(&*read);
  ASSERT_NE(capability, nullptr);
  EXPECT_EQ(capability->reservation_id, kReservation);
  EXPECT_EQ(capability->host_key, kHostKey);  // the empty comment's space dropped
  EXPECT_EQ(capability->sshd, "OpenSSH_9.2p1");

  // sshd is optional.
  auto bare = DecodeSshAgentMessage(EncodeSshCapability({std::string(kReservation),
                                                         std::string(kEcdsaKey), ""}));
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(std::get<SshCapability>(*bare).sshd, "");
}

TEST(SshCapabilityContract, HostileCapabilitiesAreRefusedNamingTheField) {
  const std::string good =
      EncodeSshCapability({std::string(kReservation), std::string(kHostKey), "OpenSSH_9.2p1"});
  const std::vector<std::pair<std::string, std::string_view>> cases = {
      {With(good, "reservation_id", ""), "reservation_id"},
      {With(good, "reservation_id", "\"res_0123\""), "reservation_id"},
      {With(good, "reservation_id", "42"), "reservation_id"},
      {With(good, "host_key", ""), "host_key"},
      {With(good, "host_key", "\"ssh-rsa AAAAB3NzaC1yc2E\""), "host_key"},
      {With(good, "host_key", "\"ssh-ed25519 AAAA\\nssh-ed25519 BBBB\""), "host_key"},
      {With(good, "host_key", "[\"ssh-ed25519 AAAA\"]"), "host_key"},
      {With(good, "host_key", "\"ssh-ed25519 " + std::string(1100, 'A') + "\""), "host_key"},
      {With(good, "sshd", "\"" + std::string(129, 'v') + "\""), "sshd"},
      {With(good, "sshd", "\"OpenSSH\\u0007\""), "sshd"},
      {With(good, "sshd", "9"), "sshd"},
      {With(good, "extra", "1"), "extra"},
      {With(good, "type", "7"), "type"},
      {With(good, "type", ""), "type"},
      {"[1,2]", "object"},
      {"not json", "JSON"},
      {"{\"type\":\"capability\",\"x\":" + std::string(70 * 1024, '1') + "}", "65536"},
      {"{\"type\":\"capability\",\"x\":[[[[[[1]]]]]]}", "JSON"},
  };
  for (const auto& [text, names] : cases) ExpectRefused(DecodeSshAgentMessage, text, names);
}

TEST(SshOpenFailedContract, RoundTripAndHostileInput) {
  auto read = DecodeSshAgentMessage(
      EncodeSshOpenFailed({std::string(kChannel), "the workspace pod is not running"}));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const auto& failed = std::get<SshOpenFailed>(*read);
  EXPECT_EQ(failed.channel, kChannel);
  EXPECT_EQ(failed.message, "the workspace pod is not running");

  const std::string good = EncodeSshOpenFailed({std::string(kChannel), "x"});
  ExpectRefused(DecodeSshAgentMessage, With(good, "channel", "\"sch_../x\""), "channel");
  ExpectRefused(DecodeSshAgentMessage, With(good, "channel", "\"" + std::string(kReservation) + "\""),
                "channel");
  ExpectRefused(DecodeSshAgentMessage, With(good, "message", ""), "message");
  ExpectRefused(DecodeSshAgentMessage, With(good, "message", "\"" + std::string(1025, 'm') + "\""),
                "message");
}

TEST(SshOpenContract, WhatTheConsoleAsksTheAgentReads) {
  const SshOpen sent = FullOpen();
  const std::string text = EncodeSshOpen(sent);
  EXPECT_LE(text.size(), kMaxSshControlMessageBytes);
  auto read = DecodeSshConsoleMessage(text);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const auto& open = std::get<SshOpen>(*read);
  EXPECT_EQ(open.channel, sent.channel);
  EXPECT_EQ(open.reservation_id, sent.reservation_id);
  EXPECT_EQ(open.grant_id, sent.grant_id);
  EXPECT_EQ(open.credential, sent.credential);
  EXPECT_EQ(open.authorized_keys, sent.authorized_keys);
  EXPECT_EQ(open.purpose, kSshPurposeSession);

  // The console's handover probe names no grant and may come with no keys at all.
  SshOpen probe = sent;
  probe.purpose = std::string(kSshPurposeHandover);
  probe.grant_id.clear();
  probe.authorized_keys.clear();
  auto probe_read = DecodeSshConsoleMessage(EncodeSshOpen(probe));
  ASSERT_TRUE(probe_read.ok()) << probe_read.status().ToString();
  EXPECT_EQ(std::get<SshOpen>(*probe_read).purpose, kSshPurposeHandover);
  EXPECT_EQ(std::get<SshOpen>(*probe_read).grant_id, "");
}

TEST(SshOpenContract, HostileOpensAreRefusedNamingTheField) {
  SshOpen base = FullOpen();
  base.authorized_keys.resize(1);
  const std::string good = EncodeSshOpen(base);
  json::array seventeen;
  for (size_t i = 0; i <= kMaxAuthorizedKeys; ++i) seventeen.push_back(json::string(kHostKey));
  const std::string exe = std::string(NewToken(kExecutionCredentialPrefix).Reveal());
  const std::vector<std::pair<std::string, std::string_view>> cases = {
      {With(good, "channel", "\"sch_0123\""), "channel"},
      {With(good, "channel", ""), "channel"},
      {With(good, "reservation_id", "\"res_zz\""), "reservation_id"},
      {With(good, "grant_id", "\"\""), "grant_id"},  // only a handover may name no grant
      {With(good, "grant_id", "\"ssg_../../etc\""), "grant_id"},
      {With(good, "credential", "\"" + exe + "\""), "credential"},
      {With(good, "credential", "\"chn_short\""), "credential"},
      {With(good, "credential", "null"), "credential"},
      {With(good, "purpose", "\"shell\""), "purpose"},
      {With(good, "purpose", ""), "purpose"},
      {With(good, "authorized_keys", ""), "authorized_keys"},
      {With(good, "authorized_keys", "\"ssh-ed25519 AAAA\""), "authorized_keys"},
      {With(good, "authorized_keys", ToJson(seventeen)), "authorized_keys"},
      {With(good, "authorized_keys", "[\"command=\\\"sh\\\" ssh-ed25519 AAAA\"]"),
       "authorized_keys[0]"},
      {With(good, "authorized_keys", "[\"ssh-ed25519 AAAA x\\nssh-ed25519 BBBB\"]"),
       "authorized_keys[0]"},
      {With(good, "authorized_keys", "[7]"), "authorized_keys[0]"},
      {With(good, "extra", "true"), "extra"},
  };
  for (const auto& [text, names] : cases) ExpectRefused(DecodeSshConsoleMessage, text, names);
}

TEST(SshKeysContract, RoundTripAndHostileInput) {
  SshKeys sent{std::string(kReservation), {KeyLine(kHostKey, kGrant)}};
  auto read = DecodeSshConsoleMessage(EncodeSshKeys(sent));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(std::get<SshKeys>(*read).reservation_id, kReservation);
  EXPECT_EQ(std::get<SshKeys>(*read).authorized_keys, sent.authorized_keys);
  // No grant valid now: an empty list, which empties the file.
  auto none = DecodeSshConsoleMessage(EncodeSshKeys({std::string(kReservation), {}}));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(std::get<SshKeys>(*none).authorized_keys.empty());

  const std::string good = EncodeSshKeys(sent);
  ExpectRefused(DecodeSshConsoleMessage, With(good, "reservation_id", "\"x\""), "reservation_id");
  ExpectRefused(DecodeSshConsoleMessage, With(good, "authorized_keys", "{}"), "authorized_keys");
  ExpectRefused(DecodeSshConsoleMessage, With(good, "channel", "\"" + std::string(kChannel) + "\""),
                "channel");
}

TEST(SshMessages, UnknownTypesDecodeToBeSkippedAndEachSideRefusesTheOthersTypes) {
  auto future = DecodeSshConsoleMessage("{\"type\":\"resize\",\"cols\":80}");
  ASSERT_TRUE(future.ok()) << future.status().ToString();
  EXPECT_EQ(std::get<SshUnknownMessage>(*future).type, "resize");
  auto agent_future = DecodeSshAgentMessage("{\"type\":\"stats\"}");
  ASSERT_TRUE(agent_future.ok());
  EXPECT_EQ(std::get<SshUnknownMessage>(*agent_future).type, "stats");
  // A console message sent to the console is not one it acts on, and the reverse.
  auto crossed = DecodeSshAgentMessage(EncodeSshKeys({std::string(kReservation), {}}));
  ASSERT_TRUE(crossed.ok());
  EXPECT_TRUE(std::holds_alternative<SshUnknownMessage>(*crossed));
  ExpectRefused(DecodeSshConsoleMessage, "{\"type\":\"" + std::string(65, 't') + "\"}", "type");
}

}  // namespace
}  // namespace uplink::protocol
