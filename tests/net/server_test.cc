#include "net/server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "common/log.h"
#include "net/certs.h"
#include "net/client.h"
#include "test_sockets.h"

namespace uplink::net {
namespace {

using testing::RawConnection;
using namespace std::chrono_literals;

std::unique_ptr<HttpServer> StartServer(RequestHandler handler, ServerOptions options = {}) {
  auto server = HttpServer::Start(std::move(options), std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

std::unique_ptr<HttpClient> ClientFor(const HttpServer& server, ClientOptions options = {}) {
  options.base_url = "http://127.0.0.1:" + std::to_string(server.port());
  auto client = HttpClient::Create(std::move(options));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

RequestHandler Echo() {
  return [](Request request, Reply reply) {
    Response response =
        Response::Text(200, request.method + " " + request.target + " " + request.body);
    response.headers.Set("X-Remote", request.remote_address);
    response.headers.Set("X-Host", request.headers.Get("host").value_or(""));
    response.headers.Set("X-User-Agent", request.headers.Get("user-agent").value_or(""));
    response.headers.Set("X-Content-Length", request.headers.Get("content-length").value_or(""));
    reply(std::move(response));
  };
}

TEST(HttpServer, RoundTripCarriesMethodTargetHeadersAndBody) {
  auto server = StartServer(Echo());
  ASSERT_TRUE(server);
  ClientOptions options;
  options.user_agent = "net-test/1";
  auto client = ClientFor(*server, options);
  ASSERT_TRUE(client);
  Request request;
  request.method = "POST";
  request.target = "/api/v1/things?a=1";
  request.body = "hello";
  auto response = client->Send(request);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST /api/v1/things?a=1 hello");
  EXPECT_EQ(response->headers.Get("X-Remote"), "127.0.0.1");
  EXPECT_EQ(response->headers.Get("X-Host"), "127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(response->headers.Get("X-User-Agent"), "net-test/1");
  EXPECT_EQ(response->headers.Get("X-Content-Length"), "5");
  EXPECT_EQ(response->headers.Get("Content-Length"), std::to_string(response->body.size()));
  EXPECT_EQ(response->headers.Get("Server"), "uplink");
  EXPECT_TRUE(response->headers.Get("Date").has_value());
}

TEST(HttpServer, ServesRouterRoutesIncludingHeadWithoutBody) {
  Router router;
  router.Add("GET", "/items/{id}", [](const Request&, const PathParams& params) {
    return Response::Text(200, "item " + params.at("id"));
  });
  auto server = StartServer(router.AsHandler());
  ASSERT_TRUE(server);
  auto client = ClientFor(*server);
  Request get;
  get.target = "/items/42";
  auto got = client->Send(get);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->body, "item 42");

  Request head = get;
  head.method = "HEAD";
  auto headed = client->Send(head);
  ASSERT_TRUE(headed.ok()) << headed.status().ToString();
  EXPECT_EQ(headed->status, 200);
  EXPECT_EQ(headed->body, "");
  EXPECT_EQ(headed->headers.Get("Content-Length"), "7");

  // The connection is still in step after a bodiless HEAD reply.
  Request missing;
  missing.target = "/nothing";
  auto not_found = client->Send(missing);
  ASSERT_TRUE(not_found.ok()) << not_found.status().ToString();
  EXPECT_EQ(not_found->status, 404);
}

TEST(HttpServer, KeepsOneConnectionAliveAcrossRequests) {
  auto server = StartServer(Echo());
  ASSERT_TRUE(server);
  RawConnection connection(server->port());
  ASSERT_TRUE(connection.connected());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(connection.Send("GET /n" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto reply = connection.ReadUntil("GET /n" + std::to_string(i) + " ");
    ASSERT_TRUE(reply.has_value()) << "request " << i;
    EXPECT_TRUE(reply->starts_with("HTTP/1.1 200 OK\r\n"));
  }
}

TEST(HttpServer, AnswersWhenReplyIsCalledLaterFromAnotherThread) {
  std::vector<std::thread> workers;
  std::mutex mutex;
  auto server = StartServer([&](Request request, Reply reply) {
    std::lock_guard lock(mutex);
    workers.emplace_back([reply = std::move(reply)] {
      std::this_thread::sleep_for(20ms);
      reply(Response::Text(202, "later"));
      reply(Response::Text(500, "a second answer is ignored"));
    });
  });
  ASSERT_TRUE(server);
  auto client = ClientFor(*server);
  for (int i = 0; i < 2; ++i) {
    auto response = client->Send(Request{});
    ASSERT_TRUE(response.ok()) << response.status().ToString();
    EXPECT_EQ(response->status, 202);
    EXPECT_EQ(response->body, "later");
  }
  for (auto& worker : workers) worker.join();
}

TEST(HttpServer, HandlerExceptionGives500AndServerKeepsServing) {
  std::atomic<int> calls{0};
  auto server = StartServer([&](Request request, Reply reply) {
    if (calls++ == 0) throw std::runtime_error("boom");
    reply(Response::Text(200, "fine"));
  });
  ASSERT_TRUE(server);
  auto client = ClientFor(*server);
  auto failed = client->Send(Request{});
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_EQ(failed->status, 500);
  EXPECT_EQ(failed->body.find("boom"), std::string::npos) << "exception text must not leak";
  auto next = client->Send(Request{});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->status, 200);
}

TEST(HttpServer, ReplyDroppedWithoutAnswerGives500) {
  auto server = StartServer([](Request, Reply) {});
  ASSERT_TRUE(server);
  auto response = ClientFor(*server)->Send(Request{});
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 500);
}

TEST(HttpServer, BodyOverLimitIsRefusedWith413BeforeTheHandler) {
  std::atomic<int> calls{0};
  ServerOptions options;
  options.max_body_bytes = 1024;
  auto server = StartServer(
      [&](Request, Reply reply) {
        ++calls;
        reply(Response::Text(200, ""));
      },
      options);
  ASSERT_TRUE(server);
  Request request;
  request.method = "PUT";
  request.body = std::string(4096, 'x');
  auto response = ClientFor(*server)->Send(request);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 413);
  EXPECT_EQ(calls.load(), 0);
}

TEST(HttpServer, ChunkedBodyOverLimitIsRefusedWith413) {
  std::atomic<int> calls{0};
  ServerOptions options;
  options.max_body_bytes = 1024;
  auto server = StartServer(
      [&](Request, Reply reply) {
        ++calls;
        reply(Response::Text(200, ""));
      },
      options);
  ASSERT_TRUE(server);
  RawConnection connection(server->port());
  std::string chunk(800, 'y');
  ASSERT_TRUE(
      connection.Send("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "320\r\n" +
                      chunk + "\r\n320\r\n" + chunk + "\r\n0\r\n\r\n"));
  bool closed = false;
  std::string reply = connection.ReadUntilClosed(closed);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 413 ")) << reply;
  EXPECT_TRUE(closed);
  EXPECT_EQ(calls.load(), 0);
}

// A hook that allows 16 bytes on /small and anything up to max_body_bytes elsewhere.
ServerOptions SmallRouteOptions(std::atomic<int>& hook_calls) {
  ServerOptions options;
  options.max_body_bytes = 1024;
  options.body_limit_for = [&hook_calls](const Request& head) -> size_t {
    ++hook_calls;
    EXPECT_TRUE(head.body.empty());
    EXPECT_TRUE(head.headers.Get("Host").has_value());
    return head.Path() == "/small" ? 16 : std::numeric_limits<size_t>::max();
  };
  return options;
}

TEST(HttpServer, BodyLimitHookRefusesALargeBodyOnItsRouteWith413BeforeTheBodyArrives) {
  std::atomic<int> calls{0};
  std::atomic<int> hook_calls{0};
  auto server = StartServer(
      [&](Request, Reply reply) {
        ++calls;
        reply(Response::Text(200, ""));
      },
      SmallRouteOptions(hook_calls));
  ASSERT_TRUE(server);
  RawConnection connection(server->port());
  // Only the header is sent: the refusal must not wait for a body that never comes.
  ASSERT_TRUE(connection.Send("POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"));
  auto reply = connection.ReadUntil("\r\n\r\n");
  ASSERT_TRUE(reply.has_value());
  EXPECT_TRUE(reply->starts_with("HTTP/1.1 413 ")) << *reply;
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(hook_calls.load(), 1);
}

TEST(HttpServer, BodyLimitHookLeavesOtherRoutesTheirLimitAndNeverRaisesTheUpperBound) {
  std::atomic<int> hook_calls{0};
  auto server = StartServer(Echo(), SmallRouteOptions(hook_calls));
  ASSERT_TRUE(server);
  auto client = ClientFor(*server);
  Request small;
  small.method = "POST";
  small.target = "/small";
  small.body = std::string(16, 's');
  auto small_reply = client->Send(small);
  ASSERT_TRUE(small_reply.ok()) << small_reply.status().ToString();
  EXPECT_EQ(small_reply->status, 200);

  Request other = small;
  other.target = "/other";
  other.body = std::string(1000, 'o');
  auto other_reply = client->Send(other);
  ASSERT_TRUE(other_reply.ok()) << other_reply.status().ToString();
  EXPECT_EQ(other_reply->status, 200);
  EXPECT_EQ(other_reply->body, "POST /other " + other.body);

  // The hook allows anything on /other, but max_body_bytes stays the upper bound.
  other.body = std::string(2048, 'o');
  auto too_big = ClientFor(*server)->Send(other);
  ASSERT_TRUE(too_big.ok()) << too_big.status().ToString();
  EXPECT_EQ(too_big->status, 413);
}

TEST(HttpServer, BodyLimitHookAppliesToChunkedBodies) {
  std::atomic<int> calls{0};
  std::atomic<int> hook_calls{0};
  auto server = StartServer(
      [&](Request, Reply reply) {
        ++calls;
        reply(Response::Text(200, ""));
      },
      SmallRouteOptions(hook_calls));
  ASSERT_TRUE(server);
  RawConnection connection(server->port());
  ASSERT_TRUE(
      connection.Send("POST /small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "a\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n"));
  bool closed = false;
  std::string reply = connection.ReadUntilClosed(closed);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 413 ")) << reply;
  EXPECT_TRUE(closed);
  EXPECT_EQ(calls.load(), 0);
}

TEST(HttpServer, HeaderOverLimitIsRefusedWith431) {
  ServerOptions options;
  options.max_header_bytes = 2048;
  auto server = StartServer(Echo(), options);
  ASSERT_TRUE(server);
  Request request;
  request.headers.Set("X-Padding", std::string(4096, 'p'));
  auto response = ClientFor(*server)->Send(request);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 431);
}

TEST(HttpServer, GarbageBytesGet400AndClose) {
  auto server = StartServer(Echo());
  ASSERT_TRUE(server);
  RawConnection connection(server->port());
  ASSERT_TRUE(connection.Send(std::string("\x16\x03\x01 nonsense \x01\x02\r\n\r\n", 19)));
  bool closed = false;
  std::string reply = connection.ReadUntilClosed(closed);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 400 ")) << reply;
  EXPECT_TRUE(closed);
}

// The reasons ServerOptions::on_request_lost was told, in order.
class LostRequests {
 public:
  std::function<void(std::string_view)> Hook() {
    return [this](std::string_view reason) {
      std::lock_guard lock(mutex_);
      reasons_.emplace_back(reason);
    };
  }
  // Once `count` have come (the server tells after the client saw the close), or after a
  // patient wait.
  std::vector<std::string> Await(size_t count) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard lock(mutex_);
        if (reasons_.size() >= count) return reasons_;
      }
      std::this_thread::sleep_for(20ms);
    }
    std::lock_guard lock(mutex_);
    return reasons_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> reasons_;
};

TEST(HttpServer, ClientThatStallsMidRequestIsCutOffByTheReadTimeout) {
  LostRequests lost;
  ServerOptions options;
  options.read_timeout = 300ms;
  options.on_request_lost = lost.Hook();
  auto server = StartServer(Echo(), options);
  ASSERT_TRUE(server);
  RawConnection connection(server->port());
  ASSERT_TRUE(connection.Send("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  bool closed = false;
  std::string reply = connection.ReadUntilClosed(closed);
  EXPECT_TRUE(closed) << "the server should have dropped the stalled connection";
  EXPECT_EQ(reply.find("200"), std::string::npos);
  EXPECT_EQ(lost.Await(1), std::vector<std::string>{"read_timeout"});
}

TEST(HttpServer, AClientGoneMidRequestIsCountedAndOneGoneBetweenRequestsIsNot) {
  LostRequests lost;
  ServerOptions options;
  options.on_request_lost = lost.Hook();
  auto server = StartServer(Echo(), options);
  ASSERT_TRUE(server);
  {
    RawConnection finished(server->port());
    ASSERT_TRUE(finished.Send("GET /once HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(finished.ReadUntil("once"));
  }  // closed between requests
  {
    RawConnection halfway(server->port());
    ASSERT_TRUE(halfway.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"));
  }  // closed with 7 body bytes to come
  EXPECT_EQ(lost.Await(1), std::vector<std::string>{"client_closed"});
  // Still one after a later request is answered: the first close, made before the second
  // connection opened, was no lost request.
  RawConnection third(server->port());
  ASSERT_TRUE(third.Send("GET /again HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(third.ReadUntil("again"));
  EXPECT_EQ(lost.Await(1), std::vector<std::string>{"client_closed"});
}

TEST(HttpServer, TricklingClientIsCutOffByTheWholeRequestTimeout) {
  ServerOptions options;
  options.read_timeout = 500ms;
  auto server = StartServer(Echo(), options);
  ASSERT_TRUE(server);
  RawConnection connection(server->port());
  ASSERT_TRUE(connection.Send("GET / HTTP/1.1\r\n"));
  // One header byte every 50 ms keeps each read short but the request unfinished; bounded.
  bool peer_gone = false;
  for (int i = 0; i < 200 && !peer_gone; ++i) {
    std::this_thread::sleep_for(50ms);
    peer_gone = !connection.Send("a");
  }
  bool closed = peer_gone;
  if (!closed) connection.ReadUntilClosed(closed, 2'000ms);
  EXPECT_TRUE(closed);
}

TEST(HttpServer, IdleKeptAliveConnectionIsClosedAfterTheIdleTimeout) {
  ServerOptions options;
  options.idle_timeout = 200ms;
  auto server = StartServer(Echo(), options);
  ASSERT_TRUE(server);
  RawConnection connection(server->port());
  ASSERT_TRUE(connection.Send("GET /once HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  std::string reply = connection.ReadUntilClosed(closed);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200 OK")) << reply;
  EXPECT_TRUE(closed);
}

// And logged once per interval with their count, not a line each.
TEST(HttpServer, ConnectionsOverTheLimitAreClosedAtOnce) {
  std::mutex mutex;
  std::vector<std::string> refusal_lines;
  log::SetSinkForTesting([&](std::string_view line) {
    std::lock_guard lock(mutex);
    if (line.find("connections refused") != std::string_view::npos) {
      refusal_lines.emplace_back(line);
    }
  });
  struct RestoreSink {
    ~RestoreSink() { log::SetSinkForTesting(nullptr); }
  } restore_sink;  // also when an assertion returns early
  {
    ServerOptions options;
    options.max_connections = 1;
    auto server = StartServer(Echo(), options);
    ASSERT_TRUE(server);
    RawConnection first(server->port());
    ASSERT_TRUE(first.Send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(first.ReadUntil("GET /first").has_value());

    for (int i = 0; i < 20; ++i) {
      RawConnection over(server->port());
      bool closed = false;
      std::string reply = over.ReadUntilClosed(closed);
      EXPECT_TRUE(closed);
      EXPECT_EQ(reply, "");
    }

    ASSERT_TRUE(first.Send("GET /again HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_TRUE(first.ReadUntil("GET /again").has_value());
  }
  std::lock_guard lock(mutex);
  ASSERT_EQ(refusal_lines.size(), 1u) << "twenty refusals within the interval, one line";
  EXPECT_NE(refusal_lines[0].find("\"refused_since_last_line\":1"), std::string::npos)
      << refusal_lines[0];
}

// Handlers may block their I/O thread (the console's wait on its store); accepting must not
// wait for them, or the kernel's accept queue fills and drops connection attempts. Seen from
// here: a connection over the limit is closed at once while the only I/O thread is held.
TEST(HttpServer, AcceptsWhileEveryIoThreadIsHeldByAHandler) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> holding{false};
  ServerOptions options;
  options.threads = 1;
  options.max_connections = 2;
  auto server = StartServer(
      [&](Request request, Reply reply) {
        if (request.target == "/hold") {
          holding = true;
          released.wait();
        }
        reply(Response::Text(200, "served " + request.target));
      },
      options);
  ASSERT_TRUE(server);
  RawConnection held(server->port());
  ASSERT_TRUE(held.Send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
  for (auto deadline = std::chrono::steady_clock::now() + testing::kPatience;
       !holding && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(holding);

  RawConnection waiting(server->port());
  ASSERT_TRUE(waiting.Send("GET /waiting HTTP/1.1\r\nHost: x\r\n\r\n"));
  RawConnection over_the_limit(server->port());
  bool closed = false;
  EXPECT_EQ(over_the_limit.ReadUntilClosed(closed), "");
  EXPECT_TRUE(closed) << "the accept loop waited for the handler";

  release.set_value();
  EXPECT_TRUE(held.ReadUntil("served /hold").has_value());
  EXPECT_TRUE(waiting.ReadUntil("served /waiting").has_value());
}

TEST(HttpServer, TellsOfEachConnectionAcceptedClosedAndRefused) {
  std::mutex mutex;
  std::map<std::string, int> told;
  auto count = [&](std::string_view event) {
    std::lock_guard lock(mutex);
    return told[std::string(event)];
  };
  ServerOptions options;
  options.max_connections = 2;
  options.on_connection = [&](std::string_view event) {
    std::lock_guard lock(mutex);
    ++told[std::string(event)];
  };
  auto server = StartServer(Echo(), options);
  ASSERT_TRUE(server);
  auto first = std::make_unique<RawConnection>(server->port());
  RawConnection second(server->port());
  for (RawConnection* connection : {first.get(), &second}) {
    ASSERT_TRUE(connection->Send("GET /x HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(connection->ReadUntil("GET /x").has_value());
  }
  RawConnection third(server->port());
  bool closed = false;
  third.ReadUntilClosed(closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(count("accepted"), 2);
  EXPECT_EQ(count("refused"), 1);
  EXPECT_EQ(count("closed"), 0);

  first.reset();
  for (auto deadline = std::chrono::steady_clock::now() + testing::kPatience;
       count("closed") < 1 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(count("closed"), 1);
  server->Stop();
  EXPECT_EQ(count("closed"), 2) << "the server's own closes are told too";
  EXPECT_EQ(count("accepted"), 2);
}

TEST(HttpServer, ConnectionCloseFromTheClientIsHonoured) {
  auto server = StartServer(Echo());
  ASSERT_TRUE(server);
  RawConnection connection(server->port());
  ASSERT_TRUE(connection.Send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  std::string reply = connection.ReadUntilClosed(closed);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200 OK")) << reply;
  EXPECT_TRUE(closed);
}

TEST(HttpServer, StopIsIdempotentAndLateRepliesAreHarmless) {
  Reply held;
  std::mutex mutex;
  std::atomic<bool> received{false};
  auto server = StartServer([&](Request, Reply reply) {
    std::lock_guard lock(mutex);
    held = std::move(reply);
    received = true;
  });
  ASSERT_TRUE(server);
  RawConnection connection(server->port());
  ASSERT_TRUE(connection.Send("GET /poll HTTP/1.1\r\nHost: x\r\n\r\n"));
  for (int i = 0; i < 500 && !received; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(received.load());
  server->Stop();
  server->Stop();
  bool closed = false;
  connection.ReadUntilClosed(closed);
  EXPECT_TRUE(closed);
  server.reset();
  std::lock_guard lock(mutex);
  held(Response::Text(200, "too late"));  // must neither crash nor write anywhere
  held = nullptr;
}

TEST(HttpServer, StartFailsClearlyOnABadListenAddress) {
  ServerOptions options;
  options.listen = "127.0.0.1:99999";
  auto server = HttpServer::Start(options, Echo());
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
}

TEST(HttpServer, ListensOnIpv6Loopback) {
  ServerOptions options;
  options.listen = "[::1]:0";
  auto server = HttpServer::Start(options, Echo());
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << server.status().ToString();
  ClientOptions client_options;
  client_options.base_url = "http://[::1]:" + std::to_string((*server)->port());
  auto client = HttpClient::Create(client_options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto response = (*client)->Send(Request{});
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->headers.Get("X-Remote"), "::1");
  EXPECT_EQ(response->headers.Get("X-Host"), "[::1]:" + std::to_string((*server)->port()));
}

TEST(SplitHostPort, AcceptsHostsAndBracketedIpv6) {
  std::string host;
  std::uint16_t port = 0;
  ASSERT_TRUE(SplitHostPort("127.0.0.1:8443", host, port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 8443);
  ASSERT_TRUE(SplitHostPort("[::1]:0", host, port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 0);
  ASSERT_TRUE(SplitHostPort("console.example:65535", host, port).ok());
  EXPECT_EQ(port, 65535);
}

TEST(SplitHostPort, RejectsMalformedAddresses) {
  std::string host;
  std::uint16_t port = 0;
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:8a", ":80",
                          "::1:80", "[::1]80", "[::1]:", "host:-1"}) {
    EXPECT_EQ(SplitHostPort(bad, host, port).code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(IsLoopbackHost, RecognisesLoopbackNamesAndAddresses) {
  for (const char* host :
       {"localhost", "LOCALHOST", "127.0.0.1", "127.3.2.1", "::1", "[::1]", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"10.0.0.1", "0.0.0.0", "::", "localhost.example", "example.com", ""}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

TEST(LoadTlsServerConfig, ReadsPemFilesAndNamesAMissingFile) {
  auto ca = CreateCertificateAuthority("test CA", 1);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  auto issued = IssueServerCertificate(*ca, {"localhost"}, 1);
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  auto dir =
      std::filesystem::temp_directory_path() / ("uplink-net-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "cert.pem") << issued->cert_pem;
  std::ofstream(dir / "key.pem") << issued->key_pem;

  auto config = LoadTlsServerConfig(dir / "cert.pem", dir / "key.pem");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->cert_chain_pem, issued->cert_pem);
  EXPECT_EQ(config->private_key_pem, issued->key_pem);

  auto missing = LoadTlsServerConfig(dir / "absent.pem", dir / "key.pem");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("absent.pem"), std::string::npos)
      << missing.status().ToString();

  auto swapped = LoadTlsServerConfig(dir / "key.pem", dir / "cert.pem");
  EXPECT_EQ(swapped.status().code(), StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace uplink::net

namespace uplink::net {
namespace {

// A body of fixed pieces, each handed over from another thread as a watch's would be.
class PiecesStream final : public BodyStream {
 public:
  explicit PiecesStream(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  void Next(std::function<void(std::optional<std::string>)> deliver) override {
    std::optional<std::string> piece;
    if (next_ < pieces_.size()) piece = pieces_[next_++];
    std::thread([deliver = std::move(deliver), piece] { deliver(piece); }).detach();
  }
  void Cancel() override { cancelled = true; }
  std::atomic<bool> cancelled{false};

 private:
  std::vector<std::string> pieces_;
  size_t next_ = 0;
};

TEST(HttpServer, AStreamedBodyIsSentChunkedPieceByPieceUntilItEnds) {
  auto body = std::make_shared<PiecesStream>(std::vector<std::string>{"first\n", "second\n"});
  auto server = HttpServer::Start({}, [body](Request, Reply reply) {
    Response response;
    response.headers.Set("Content-Type", "application/json");
    response.stream = body;
    reply(std::move(response));
  });
  ASSERT_TRUE(server.ok());
  testing::RawConnection connection((*server)->port());
  ASSERT_TRUE(connection.Send("GET /watch HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  std::string reply = connection.ReadUntilClosed(closed);
  EXPECT_TRUE(closed);
  EXPECT_NE(reply.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << reply;
  EXPECT_NE(reply.find("\r\n\r\n6\r\nfirst\n\r\n7\r\nsecond\n\r\n0\r\n\r\n"), std::string::npos)
      << reply;
  EXPECT_TRUE(body->cancelled);
}

}  // namespace
}  // namespace uplink::net
