// The exec protocol frame by frame, with uplink's own WebSocket client against uplink-kubesim
// over TLS with a bearer token: what the workspace controller speaks. v5.channel.k8s.io (stdin
// ended by the close signal) and v4.channel.k8s.io, the final Status on channel 3, and the
// refusals of a bad request.
#include <gtest/gtest.h>

#include "common/json.h"
#include "kubesim_process.h"
#include "net/websocket.h"

namespace uplink::kubesim {
namespace {

using testing::KubesimProcess;

class ExecProtocolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = KubesimProcess::Start({"--runtime", "process", "--pod-start-delay", "0s"});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    kubesim_ = started->release();
    ASSERT_EQ(kubesim_
                  ->Kubectl({"run", "box", "--image=debian:12", "--restart=Never", "--", "sleep",
                             "3600"})
                  .exit_code,
              0);
    ASSERT_TRUE(uplink::testing::WaitFor([] {
      return kubesim_->Kubectl({"get", "pod", "box", "-o", "jsonpath={.status.phase}"}).out ==
             "Running";
    }));
  }
  static void TearDownTestSuite() {
    if (kubesim_) {
      EXPECT_EQ(kubesim_->Stop(), 0) << kubesim_->Logs();
    }
    delete kubesim_;
    kubesim_ = nullptr;
  }

  // An exec of `command` (URL-encoded already) offering `protocols`.
  static Result<std::unique_ptr<net::WebSocket>> Open(const std::string& query,
                                                      std::vector<std::string> protocols,
                                                      net::Response* refusal = nullptr) {
    UPLINK_ASSIGN_OR_RETURN(KubesimProcess::Access access, kubesim_->AdminAccess());
    net::WebSocketConnectOptions options;
    options.client.base_url = access.server_url;
    options.client.ca_pem = access.ca_pem;
    options.headers.Set("Authorization", "Bearer " + access.token);
    options.target = "/api/v1/namespaces/default/pods/box/exec?" + query;
    options.subprotocols = std::move(protocols);
    return net::ConnectWebSocket(options, refusal);
  }

  // Every message until the server closes, by channel.
  struct Session {
    std::map<int, std::string> channels;
    std::vector<int> order;  // the channel of each message, in order
    std::uint16_t close_code = 0;
  };
  static Session ReadAll(net::WebSocket& socket) {
    Session session;
    for (;;) {
      Result<net::WebSocketMessage> message = socket.Read();
      EXPECT_TRUE(message.ok()) << message.status().ToString();
      if (!message.ok()) return session;
      if (message->type == net::WebSocketMessage::Type::kClose) {
        session.close_code = message->close_code;
        return session;
      }
      EXPECT_EQ(message->type, net::WebSocketMessage::Type::kBinary);
      EXPECT_FALSE(message->data.empty());
      if (message->data.empty()) continue;
      int channel = static_cast<unsigned char>(message->data[0]);
      session.order.push_back(channel);
      session.channels[channel] += message->data.substr(1);
    }
  }

  static KubesimProcess* kubesim_;
};

KubesimProcess* ExecProtocolTest::kubesim_ = nullptr;

TEST_F(ExecProtocolTest, V5EndsStdinWithTheCloseSignalAndReportsSuccess) {
  auto socket = Open("command=cat&stdin=true&stdout=true&stderr=true",
                     {"v5.channel.k8s.io", "v4.channel.k8s.io"});
  ASSERT_TRUE(socket.ok()) << socket.status().ToString();
  EXPECT_EQ((*socket)->subprotocol(), "v5.channel.k8s.io");
  ASSERT_TRUE((*socket)->Write(std::string("\0first ", 7)).ok());
  ASSERT_TRUE((*socket)->Write(std::string("\0second", 7)).ok());
  ASSERT_TRUE((*socket)->Write(std::string("\xff\0", 2)).ok());  // stdin is done
  Session session = ReadAll(**socket);
  // The first message, empty on stdout, says the streams are ready.
  ASSERT_FALSE(session.order.empty());
  EXPECT_EQ(session.order.front(), 1);
  EXPECT_EQ(session.channels[1], "first second");
  EXPECT_EQ(session.channels[2], "");
  EXPECT_EQ(session.channels[3], R"({"metadata":{},"status":"Success"})");
  EXPECT_EQ(session.order.back(), 3);
  EXPECT_EQ(session.close_code, net::kCloseNormal);
}

TEST_F(ExecProtocolTest, V4ReportsANonZeroExitAsTheKubeletDoes) {
  auto socket = Open("command=sh&command=-c&command=echo%20out%3B%20echo%20err%20%3E%262%3B%20exit%205"
                     "&stdout=true&stderr=true",
                     {"v4.channel.k8s.io"});
  ASSERT_TRUE(socket.ok()) << socket.status().ToString();
  EXPECT_EQ((*socket)->subprotocol(), "v4.channel.k8s.io");
  Session session = ReadAll(**socket);
  EXPECT_EQ(session.channels[1], "out\n");
  EXPECT_EQ(session.channels[2], "err\n");
  EXPECT_EQ(session.channels[3],
            R"({"metadata":{},"status":"Failure","message":"command terminated with non-zero exit )"
            R"(code: error executing command [sh -c echo out; echo err >&2; exit 5], exit code 5",)"
            R"("reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"5"}]}})");
}

TEST_F(ExecProtocolTest, ASignalledProcessExitsWith128PlusTheSignal) {
  auto socket = Open("command=sh&command=-c&command=kill%20-9%20%24%24&stdout=true",
                     {"v5.channel.k8s.io"});
  ASSERT_TRUE(socket.ok()) << socket.status().ToString();
  Session session = ReadAll(**socket);
  EXPECT_NE(session.channels[3].find(R"("causes":[{"reason":"ExitCode","message":"137"}])"),
            std::string::npos)
      << session.channels[3];
}

TEST_F(ExecProtocolTest, BadRequestsAreRefusedBeforeTheUpgradeWithAStatus) {
  net::Response refusal;
  auto unknown = Open("command=id&stdout=true", {"channel.k8s.io"}, &refusal);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(refusal.status, 400);
  Result<json::value> status = ParseJson(refusal.body);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->at("message"),
            "requested protocol(s) are not supported: [channel.k8s.io]; supports "
            "[v5.channel.k8s.io v4.channel.k8s.io]");
  auto no_streams = Open("command=id", {"v5.channel.k8s.io"}, &refusal);
  ASSERT_FALSE(no_streams.ok());
  EXPECT_EQ(no_streams.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_streams.status().message().find("you must specify at least 1 of stdin, stdout, stderr"),
            std::string::npos);
}

}  // namespace
}  // namespace uplink::kubesim
