// WebSockets end to end: HttpServer upgrading with AcceptWebSocket, ConnectWebSocket dialling
// it (plain and TLS), and raw sockets sending the frames a hostile or broken peer would.
#include "net/websocket.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "net/certs.h"
#include "net/router.h"
#include "net/server.h"
#include "test_sockets.h"

namespace uplink::net {
namespace {

using testing::RawConnection;
using namespace std::chrono_literals;

// What the server side of a test saw: the handler's results, in order.
struct ServerLog {
  std::mutex mutex;
  std::vector<Result<WebSocketMessage>> reads;
  std::promise<void> finished;
  std::string subprotocol;
  std::string authorization;
};

// Echoes every data message back until the peer closes or the connection fails; records each
// Read result. Replies to a close with a close of its own (Beast does), then returns.
WebSocketHandler EchoHandler(std::shared_ptr<ServerLog> log) {
  return [log](std::unique_ptr<WebSocket> socket) {
    {
      std::lock_guard lock(log->mutex);
      log->subprotocol = socket->subprotocol();
    }
    for (;;) {
      Result<WebSocketMessage> message = socket->Read();
      {
        std::lock_guard lock(log->mutex);
        log->reads.push_back(message);
      }
      if (!message.ok() || message->type == WebSocketMessage::Type::kClose) break;
      if (!socket->Write(message->data, message->type == WebSocketMessage::Type::kBinary).ok()) {
        break;
      }
    }
    log->finished.set_value();
  };
}

// A router with one WebSocket route, /ws, that picks the first offered subprotocol it knows.
struct EchoServer {
  explicit EchoServer(WebSocketOptions options = {}, std::optional<TlsServerConfig> tls = {},
                      std::vector<std::string> known = {"v5.channel.k8s.io", "v4.channel.k8s.io"}) {
    router.Add("GET", "/ws", [this, options, known](const Request& request, const PathParams&) {
      if (!IsWebSocketUpgrade(request)) return Response::Text(400, "Upgrade request required");
      log->authorization = std::string(request.headers.Get("Authorization").value_or(""));
      std::string chosen;
      for (const std::string& offered : OfferedSubprotocols(request)) {
        if (std::find(known.begin(), known.end(), offered) != known.end()) {
          chosen = offered;
          break;
        }
      }
      return AcceptWebSocket(chosen, EchoHandler(log), options);
    });
    router.Add("GET", "/forbidden", [](const Request&, const PathParams&) {
      return Response::Json(403, R"({"kind":"Status","message":"pods \"x\" is forbidden"})");
    });
    router.Add("GET", "/rogue", [](const Request&, const PathParams&) {
      return AcceptWebSocket("not-offered", [](std::unique_ptr<WebSocket>) {});
    });
    ServerOptions server_options;
    server_options.tls = std::move(tls);
    auto started = HttpServer::Start(server_options, router.AsHandler());
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    if (started.ok()) server = std::move(started).value();
  }

  WebSocketConnectOptions Options(std::string target = "/ws") const {
    WebSocketConnectOptions options;
    options.client.base_url = "http://127.0.0.1:" + std::to_string(server->port());
    options.target = std::move(target);
    options.subprotocols = {"v5.channel.k8s.io", "v4.channel.k8s.io"};
    return options;
  }

  std::shared_ptr<ServerLog> log = std::make_shared<ServerLog>();
  Router router;
  std::unique_ptr<HttpServer> server;
};

std::unique_ptr<WebSocket> Connect(const WebSocketConnectOptions& options) {
  auto socket = ConnectWebSocket(options);
  EXPECT_TRUE(socket.ok()) << socket.status().ToString();
  return socket.ok() ? std::move(socket).value() : nullptr;
}

WebSocketConnectOptions PlainOptions(const HttpServer& server, std::string target) {
  WebSocketConnectOptions options;
  options.client.base_url = "http://127.0.0.1:" + std::to_string(server.port());
  options.target = std::move(target);
  return options;
}

// Waits (bounded) for the server's handler to return.
bool HandlerFinished(ServerLog& log) {
  return log.finished.get_future().wait_for(10s) == std::future_status::ready;
}

TEST(WebSocket, EchoesBinaryAndTextMessagesAndNegotiatesTheFirstKnownSubprotocol) {
  EchoServer echo;
  WebSocketConnectOptions options = echo.Options();
  options.subprotocols = {"v6.channel.k8s.io", "v4.channel.k8s.io", "v5.channel.k8s.io"};
  auto socket = Connect(options);
  ASSERT_TRUE(socket);
  EXPECT_EQ(socket->subprotocol(), "v4.channel.k8s.io");

  std::string binary("\x01\x00\xff payload", 11);
  ASSERT_TRUE(socket->Write(binary).ok());
  auto echoed = socket->Read();
  ASSERT_TRUE(echoed.ok()) << echoed.status().ToString();
  EXPECT_EQ(echoed->type, WebSocketMessage::Type::kBinary);
  EXPECT_EQ(echoed->data, binary);

  ASSERT_TRUE(socket->Write("hello", /*binary=*/false).ok());
  echoed = socket->Read();
  ASSERT_TRUE(echoed.ok());
  EXPECT_EQ(echoed->type, WebSocketMessage::Type::kText);
  EXPECT_EQ(echoed->data, "hello");

  // An empty message is a message too.
  ASSERT_TRUE(socket->Write("").ok());
  echoed = socket->Read();
  ASSERT_TRUE(echoed.ok());
  EXPECT_EQ(echoed->data, "");
  EXPECT_EQ(echo.log->subprotocol, "v4.channel.k8s.io");
}

TEST(WebSocket, NoCommonSubprotocolMeansNoneAndTheClientSeesEmpty) {
  EchoServer echo;
  WebSocketConnectOptions options = echo.Options();
  options.subprotocols = {"base64.channel.k8s.io"};
  auto socket = Connect(options);
  ASSERT_TRUE(socket);
  EXPECT_EQ(socket->subprotocol(), "");
}

TEST(WebSocket, AClientCloseReachesTheServerWithItsCodeAndReason) {
  EchoServer echo;
  auto socket = Connect(echo.Options());
  ASSERT_TRUE(socket);
  ASSERT_TRUE(socket->Close(kCloseGoingAway, "bye").ok());
  // The server answered the close: our Read sees its close frame.
  auto closed = socket->Read();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(closed->type, WebSocketMessage::Type::kClose);
  ASSERT_TRUE(HandlerFinished(*echo.log));
  std::lock_guard lock(echo.log->mutex);
  ASSERT_EQ(echo.log->reads.size(), 1u);
  ASSERT_TRUE(echo.log->reads[0].ok()) << echo.log->reads[0].status().ToString();
  EXPECT_EQ(echo.log->reads[0]->type, WebSocketMessage::Type::kClose);
  EXPECT_EQ(echo.log->reads[0]->close_code, kCloseGoingAway);
  EXPECT_EQ(echo.log->reads[0]->data, "bye");
  // After the close, reads and writes fail rather than block.
  EXPECT_EQ(socket->Read().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(socket->Write("late").ok());
}

TEST(WebSocket, ALongCloseReasonIsCutAtACharacterNotInsideOne) {
  EchoServer echo;
  auto socket = Connect(echo.Options());
  ASSERT_TRUE(socket);
  // 121 ASCII bytes, then "é" (2 bytes) and "€" (3): the 123-byte limit falls inside "€".
  const std::string reason = std::string(121, 'r') + "\xC3\xA9" + "\xE2\x82\xAC";
  ASSERT_TRUE(socket->Close(kCloseGoingAway, reason).ok());
  ASSERT_TRUE(HandlerFinished(*echo.log));
  std::lock_guard lock(echo.log->mutex);
  ASSERT_EQ(echo.log->reads.size(), 1u);
  ASSERT_TRUE(echo.log->reads[0].ok()) << echo.log->reads[0].status().ToString();
  EXPECT_EQ(echo.log->reads[0]->type, WebSocketMessage::Type::kClose);
  EXPECT_EQ(echo.log->reads[0]->data, std::string(121, 'r') + "\xC3\xA9");
}

TEST(WebSocket, AServerCloseReachesTheClientWhileItWaitsInRead) {
  Router router;
  std::promise<std::pair<Status, Result<WebSocketMessage>>> server_side;
  router.Add("GET", "/ws", [&](const Request&, const PathParams&) {
    return AcceptWebSocket("", [&](std::unique_ptr<WebSocket> socket) {
      EXPECT_TRUE(socket->Write("last words").ok());
      // Close waits for the client's answer, which its pending Read sends.
      Status close = socket->Close(kCloseNormal, "done");
      server_side.set_value({close, socket->Read()});
    });
  });
  auto server = HttpServer::Start({}, router.AsHandler());
  ASSERT_TRUE(server.ok());
  auto socket = Connect(PlainOptions(**server, "/ws"));
  ASSERT_TRUE(socket);
  auto data = socket->Read();
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->data, "last words");
  auto closed = socket->Read();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(closed->type, WebSocketMessage::Type::kClose);
  EXPECT_EQ(closed->close_code, kCloseNormal);
  EXPECT_EQ(closed->data, "done");
  // The server's Close completed with the client's answer, which its next Read returns.
  auto [close, answer] = server_side.get_future().get();
  EXPECT_TRUE(close.ok()) << close.ToString();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->type, WebSocketMessage::Type::kClose);
  EXPECT_EQ(answer->close_code, kCloseNormal);
}

TEST(WebSocket, MessagesUpToTheLimitPassAndLargerWritesAreRefusedLocally) {
  EchoServer echo;
  auto socket = Connect(echo.Options());
  ASSERT_TRUE(socket);
  std::string largest(64 * 1024, 'x');
  largest[12345] = 'y';
  ASSERT_TRUE(socket->Write(largest).ok());
  auto echoed = socket->Read();
  ASSERT_TRUE(echoed.ok()) << echoed.status().ToString();
  EXPECT_EQ(echoed->data, largest);
  Status too_big = socket->Write(largest + "z");
  EXPECT_EQ(too_big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.message().find("65536"), std::string::npos) << too_big.message();
}

TEST(WebSocket, OverTlsWithABearerTokenAndTheServersCertificateVerified) {
  auto ca = CreateCertificateAuthority("websocket test CA", 1);
  ASSERT_TRUE(ca.ok());
  auto issued = IssueServerCertificate(*ca, {"127.0.0.1"}, 1);
  ASSERT_TRUE(issued.ok());
  EchoServer echo({}, TlsServerConfig{issued->cert_pem, issued->key_pem});
  WebSocketConnectOptions options = echo.Options();
  options.client.base_url = "https://127.0.0.1:" + std::to_string(echo.server->port());
  options.client.ca_pem = ca->cert_pem;
  options.headers.Set("Authorization", "Bearer secret-token");
  auto socket = Connect(options);
  ASSERT_TRUE(socket);
  EXPECT_EQ(socket->subprotocol(), "v5.channel.k8s.io");
  ASSERT_TRUE(socket->Write("over tls").ok());
  auto echoed = socket->Read();
  ASSERT_TRUE(echoed.ok());
  EXPECT_EQ(echoed->data, "over tls");
  EXPECT_EQ(echo.log->authorization, "Bearer secret-token");

  // Another CA's client does not trust this server.
  auto other = CreateCertificateAuthority("someone else", 1);
  ASSERT_TRUE(other.ok());
  options.client.ca_pem = other->cert_pem;
  auto refused = ConnectWebSocket(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("certificate verification failed"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("secret-token"), std::string::npos);
}

TEST(WebSocket, ARefusedUpgradeIsAnErrorWithTheServersStatusAndBody) {
  EchoServer echo;
  WebSocketConnectOptions options = echo.Options("/forbidden");
  options.headers.Set("Authorization", "Bearer secret-token");
  Response refusal;
  auto refused = ConnectWebSocket(options, &refusal);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("HTTP 403"), std::string::npos);
  EXPECT_NE(refused.status().message().find("is forbidden"), std::string::npos);
  EXPECT_EQ(refused.status().message().find("secret-token"), std::string::npos);
  EXPECT_EQ(refusal.status, 403);
  EXPECT_EQ(refusal.body, R"({"kind":"Status","message":"pods \"x\" is forbidden"})");

  // A plain GET (no upgrade) is the route's 400.
  options.target = "/nope";
  auto missing = ConnectWebSocket(options, &refusal);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(refusal.status, 404);

  // No server answered: the refusal is left alone, not filled with a made-up answer.
  options.client.base_url = "http://127.0.0.1:" + std::to_string(testing::UnusedPort());
  Response untouched;
  untouched.status = 0;
  auto unreachable = ConnectWebSocket(options, &untouched);
  EXPECT_EQ(unreachable.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(untouched.status, 0);
}

TEST(WebSocket, ASubprotocolTheClientDidNotOfferIsRefusedByTheClient) {
  EchoServer echo;
  auto rogue = ConnectWebSocket(echo.Options("/rogue"));
  ASSERT_FALSE(rogue.ok());
  EXPECT_EQ(rogue.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rogue.status().message().find("not-offered"), std::string::npos);
}

TEST(WebSocket, BadConnectOptionsAreRefusedBeforeDialling) {
  WebSocketConnectOptions options;
  options.client.base_url = "http://127.0.0.1:" + std::to_string(testing::UnusedPort());
  options.target = "/ws";
  auto refused = ConnectWebSocket(options);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);

  options.headers.Set("Authorization", "Bearer a\r\nX-Injected: 1");
  EXPECT_EQ(ConnectWebSocket(options).status().code(), StatusCode::kInvalidArgument);
  options.headers = {};
  options.subprotocols = {"v5.channel.k8s.io, evil"};
  EXPECT_EQ(ConnectWebSocket(options).status().code(), StatusCode::kInvalidArgument);
  options.subprotocols = {};
  options.target = "/ws with space";
  EXPECT_EQ(ConnectWebSocket(options).status().code(), StatusCode::kInvalidArgument);
  options.client.base_url = "ftp://127.0.0.1:1";
  EXPECT_EQ(ConnectWebSocket(options).status().code(), StatusCode::kInvalidArgument);
}

TEST(WebSocket, ConcurrentWritersNeverInterleaveTheirMessages) {
  EchoServer echo;
  auto socket = Connect(echo.Options());
  ASSERT_TRUE(socket);
  constexpr int kWriters = 4;
  constexpr int kEach = 50;
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&socket, w] {
      for (int i = 0; i < kEach; ++i) {
        std::string message(1000 + i * 10, static_cast<char>('a' + w));
        EXPECT_TRUE(socket->Write(message).ok());
      }
    });
  }
  std::map<char, int> counts;
  for (int received = 0; received < kWriters * kEach; ++received) {
    auto echoed = socket->Read();
    ASSERT_TRUE(echoed.ok()) << echoed.status().ToString();
    ASSERT_FALSE(echoed->data.empty());
    EXPECT_EQ(echoed->data.find_first_not_of(echoed->data[0]), std::string::npos);
    ++counts[echoed->data[0]];
  }
  for (auto& writer : writers) writer.join();
  for (int w = 0; w < kWriters; ++w) EXPECT_EQ(counts[static_cast<char>('a' + w)], kEach);
}

TEST(WebSocket, AWriterWaitsForASlowReaderAndLosesNothing) {
  constexpr int kMessages = 2000;  // 128 MiB: far more than any socket buffers hold
  std::atomic<int> written{0};
  std::promise<void> all_written;
  Router router;
  router.Add("GET", "/flood", [&](const Request&, const PathParams&) {
    return AcceptWebSocket("", [&](std::unique_ptr<WebSocket> socket) {
      std::string chunk(64 * 1024, '\0');
      for (int i = 0; i < kMessages; ++i) {
        std::memcpy(chunk.data(), &i, sizeof(i));
        if (!socket->Write(chunk).ok()) return;
        ++written;
      }
      all_written.set_value();
      (void)socket->Read();  // until the client goes
    });
  });
  auto server = HttpServer::Start({}, router.AsHandler());
  ASSERT_TRUE(server.ok());
  auto socket = Connect(PlainOptions(**server, "/flood"));
  ASSERT_TRUE(socket);
  for (int i = 0; i < 1000 && written.load() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GT(written.load(), 0);
  std::this_thread::sleep_for(300ms);  // room for the writer to run ahead, if it could
  EXPECT_LT(written.load(), kMessages) << "the writer never waited for the reader";
  for (int i = 0; i < kMessages; ++i) {
    auto message = socket->Read();
    ASSERT_TRUE(message.ok()) << message.status().ToString();
    int index = -1;
    std::memcpy(&index, message->data.data(), sizeof(index));
    ASSERT_EQ(index, i);
  }
  EXPECT_EQ(all_written.get_future().wait_for(10s), std::future_status::ready);
}

TEST(WebSocket, PingsKeepAnIdleConnectionOpenPastItsIdleTimeout) {
  WebSocketOptions quick;
  quick.idle_timeout = 300ms;
  EchoServer echo(quick);
  WebSocketConnectOptions options = echo.Options();
  options.websocket.idle_timeout = 300ms;
  auto socket = Connect(options);
  ASSERT_TRUE(socket);
  std::promise<Result<WebSocketMessage>> read;
  std::thread reader([&] { read.set_value(socket->Read()); });
  // Several idle timeouts pass with no data; each side's pings are answered by the other.
  std::this_thread::sleep_for(1500ms);
  {
    std::lock_guard lock(echo.log->mutex);
    EXPECT_TRUE(echo.log->reads.empty()) << echo.log->reads[0].status().ToString();
  }
  ASSERT_TRUE(socket->Write("still here").ok());
  auto echoed = read.get_future().get();
  reader.join();
  ASSERT_TRUE(echoed.ok()) << echoed.status().ToString();
  EXPECT_EQ(echoed->data, "still here");
}

TEST(WebSocket, AbortUnblocksAReadInAnotherThread) {
  EchoServer echo;
  auto socket = Connect(echo.Options());
  ASSERT_TRUE(socket);
  std::promise<Result<WebSocketMessage>> read;
  std::thread reader([&] { read.set_value(socket->Read()); });
  std::this_thread::sleep_for(50ms);
  socket->Abort();
  auto future = read.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(future.get().status().code(), StatusCode::kUnavailable);
  reader.join();
  // The server's handler sees the connection go.
  ASSERT_TRUE(HandlerFinished(*echo.log));
  std::lock_guard lock(echo.log->mutex);
  ASSERT_EQ(echo.log->reads.size(), 1u);
  EXPECT_FALSE(echo.log->reads[0].ok());
}

TEST(WebSocket, StoppingTheServerFailsABlockedHandlerAndWaitsForIt) {
  EchoServer echo;
  auto socket = Connect(echo.Options());
  ASSERT_TRUE(socket);
  ASSERT_TRUE(socket->Write("one").ok());
  ASSERT_TRUE(socket->Read().ok());
  echo.server->Stop();
  // Stop returned only after the handler did.
  auto finished = echo.log->finished.get_future();
  EXPECT_EQ(finished.wait_for(0s), std::future_status::ready);
  std::lock_guard lock(echo.log->mutex);
  // Its next Read failed, unless the stop already failed the echo's Write.
  if (echo.log->reads.size() == 2) {
    EXPECT_EQ(echo.log->reads[1].status().code(), StatusCode::kUnavailable);
  }
}

// --- Hostile peers: raw frames on a raw socket ----------------------------------------------

constexpr std::string_view kHandshake =
    "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

// One frame as a client writes it: masked unless told otherwise.
std::string Frame(std::uint8_t first_byte, std::string_view payload, bool masked = true) {
  std::string frame(1, static_cast<char>(first_byte));
  std::uint8_t mask_bit = masked ? 0x80 : 0;
  if (payload.size() < 126) {
    frame += static_cast<char>(mask_bit | payload.size());
  } else if (payload.size() <= 0xffff) {
    frame += static_cast<char>(mask_bit | 126);
    frame += static_cast<char>(payload.size() >> 8);
    frame += static_cast<char>(payload.size() & 0xff);
  } else {
    frame += static_cast<char>(mask_bit | 127);
    for (int shift = 56; shift >= 0; shift -= 8) {
      frame += static_cast<char>((static_cast<std::uint64_t>(payload.size()) >> shift) & 0xff);
    }
  }
  const char key[4] = {0x12, 0x34, 0x56, 0x78};
  if (masked) frame.append(key, 4);
  for (size_t i = 0; i < payload.size(); ++i) {
    frame += masked ? static_cast<char>(payload[i] ^ key[i % 4]) : payload[i];
  }
  return frame;
}

// Everything the server sent after its 101 response, once it closed the connection.
std::string AfterHandshake(RawConnection& connection) {
  bool closed = false;
  std::string all = connection.ReadUntilClosed(closed);
  EXPECT_TRUE(closed) << "the server kept the connection open";
  size_t end = all.find("\r\n\r\n");
  EXPECT_NE(all.find("HTTP/1.1 101"), std::string::npos) << all;
  return end == std::string::npos ? "" : all.substr(end + 4);
}

// The close code of the first close frame in `frames` (server frames are unmasked), or 0.
int CloseCode(std::string_view frames) {
  size_t at = 0;
  while (at + 2 <= frames.size()) {
    std::uint8_t opcode = static_cast<std::uint8_t>(frames[at]) & 0x0f;
    size_t length = static_cast<std::uint8_t>(frames[at + 1]) & 0x7f;
    size_t header = 2;
    if (length == 126) {
      length = (static_cast<std::uint8_t>(frames[at + 2]) << 8) |
               static_cast<std::uint8_t>(frames[at + 3]);
      header = 4;
    }
    if (opcode == 0x8) {
      if (length < 2) return 1005;
      return (static_cast<std::uint8_t>(frames[at + header]) << 8) |
             static_cast<std::uint8_t>(frames[at + header + 1]);
    }
    at += header + length;
  }
  return 0;
}

struct HostileCase {
  std::string name;
  std::string frames;
  int close_code;
  StatusCode handler_error;
};

TEST(WebSocket, HostileFramesCloseTheConnectionWithTheRightCodeAndTheHandlerHears) {
  const std::string forty_kib(40 * 1024, 'f');
  std::vector<HostileCase> cases = {
      {"an oversized frame", Frame(0x82, std::string(70'000, 'x')), kCloseTooBig,
       StatusCode::kResourceExhausted},
      {"fragments adding up past the limit",
       Frame(0x02, forty_kib) + Frame(0x80, forty_kib), kCloseTooBig,
       StatusCode::kResourceExhausted},
      {"a reserved opcode", Frame(0x83, "x"), kCloseProtocolError, StatusCode::kInvalidArgument},
      {"an unmasked client frame", Frame(0x82, "x", /*masked=*/false), kCloseProtocolError,
       StatusCode::kInvalidArgument},
      {"a fragmented ping", Frame(0x09, "p"), kCloseProtocolError, StatusCode::kInvalidArgument},
      {"a continuation with nothing to continue", Frame(0x80, "x"), kCloseProtocolError,
       StatusCode::kInvalidArgument},
      {"reserved bits", Frame(0xc2, "x"), kCloseProtocolError, StatusCode::kInvalidArgument},
      {"invalid UTF-8 in a text frame", Frame(0x81, "\xc3\x28"), kCloseInvalidPayload,
       StatusCode::kInvalidArgument},
      {"a new message inside a fragmented one", Frame(0x02, "a") + Frame(0x82, "b"),
       kCloseProtocolError, StatusCode::kInvalidArgument},
  };
  for (const HostileCase& hostile : cases) {
    SCOPED_TRACE(hostile.name);
    EchoServer echo;
    RawConnection connection(echo.server->port());
    ASSERT_TRUE(connection.connected());
    ASSERT_TRUE(connection.Send(std::string(kHandshake) + hostile.frames));
    std::string frames = AfterHandshake(connection);
    EXPECT_EQ(CloseCode(frames), hostile.close_code);
    ASSERT_TRUE(HandlerFinished(*echo.log));
    std::lock_guard lock(echo.log->mutex);
    ASSERT_EQ(echo.log->reads.size(), 1u);
    EXPECT_EQ(echo.log->reads[0].status().code(), hostile.handler_error)
        << echo.log->reads[0].status().ToString();
  }
}

TEST(WebSocket, FragmentsWithinTheLimitAreOneMessageEvenWhenSentWithTheHandshake) {
  EchoServer echo;
  RawConnection connection(echo.server->port());
  ASSERT_TRUE(connection.connected());
  // Three fragments with a ping between them, sent in the same write as the handshake.
  ASSERT_TRUE(connection.Send(std::string(kHandshake) + Frame(0x02, "frag") + Frame(0x89, "ping") +
                              Frame(0x00, "ment") + Frame(0x80, "ed") +
                              Frame(0x88, std::string("\x03\xe8", 2))));
  std::string frames = AfterHandshake(connection);
  ASSERT_TRUE(HandlerFinished(*echo.log));
  std::lock_guard lock(echo.log->mutex);
  ASSERT_EQ(echo.log->reads.size(), 2u);
  ASSERT_TRUE(echo.log->reads[0].ok());
  EXPECT_EQ(echo.log->reads[0]->data, "fragmented");
  EXPECT_EQ(echo.log->reads[1]->type, WebSocketMessage::Type::kClose);
  // The server answered the ping, echoed the message, and answered the close.
  EXPECT_NE(frames.find(std::string("\x8a\x04ping", 6)), std::string::npos);
  EXPECT_NE(frames.find(std::string("\x82\x0a" "fragmented", 12)), std::string::npos);
  EXPECT_EQ(CloseCode(frames), kCloseNormal);
}

TEST(WebSocket, ABadHandshakeIsRefusedAndNeverReachesTheHandler) {
  EchoServer echo;
  RawConnection connection(echo.server->port());
  ASSERT_TRUE(connection.Send(
      "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Version: 8\r\n\r\n"));
  bool closed = false;
  std::string reply = connection.ReadUntilClosed(closed);
  EXPECT_NE(reply.find("HTTP/1.1 400"), std::string::npos) << reply;
  EXPECT_EQ(echo.log->finished.get_future().wait_for(100ms), std::future_status::timeout);
}

TEST(WebSocket, APeerThatStopsAnsweringPingsTimesOut) {
  WebSocketOptions quick;
  quick.idle_timeout = 300ms;
  EchoServer echo(quick);
  RawConnection connection(echo.server->port());
  ASSERT_TRUE(connection.Send(std::string(kHandshake)));
  // The raw peer never answers the server's pings.
  ASSERT_TRUE(HandlerFinished(*echo.log));
  std::lock_guard lock(echo.log->mutex);
  ASSERT_EQ(echo.log->reads.size(), 1u);
  EXPECT_EQ(echo.log->reads[0].status().code(), StatusCode::kDeadlineExceeded)
      << echo.log->reads[0].status().ToString();
}

}  // namespace
}  // namespace uplink::net
