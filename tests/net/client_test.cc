#include "net/client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "net/certs.h"
#include "net/server.h"
#include "test_sockets.h"

namespace uplink::net {
namespace {

using namespace std::chrono_literals;
using testing::AcceptWithin;
using testing::CloseFd;
using testing::ReadRequestHead;
using testing::ScriptedServer;
using testing::WaitForPeerClose;
using testing::WriteAll;

std::unique_ptr<HttpClient> NewClient(std::string base_url, ClientOptions options = {}) {
  options.base_url = std::move(base_url);
  auto client = HttpClient::Create(std::move(options));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

Request Get(std::string target) {
  Request request;
  request.target = std::move(target);
  return request;
}

// --- plain HTTP against scripted servers ------------------------------------------------------

TEST(HttpClient, ReusesOneKeptAliveConnection) {
  std::atomic<int> served{0};
  ScriptedServer server([&](int listen_fd) {
    int fd = AcceptWithin(listen_fd);
    while (ReadRequestHead(fd, 2'000ms)) {
      ++served;  // before answering, so the count is final once the client has its reply
      WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    }
    CloseFd(fd);
  });
  auto client = NewClient(server.url());
  for (int i = 0; i < 3; ++i) {
    auto response = client->Send(Get("/"));
    ASSERT_TRUE(response.ok()) << "request " << i << ": " << response.status().ToString();
    EXPECT_EQ(response->body, "ok");
  }
  client.reset();  // closes the connection so the script's loop ends
  EXPECT_EQ(served.load(), 3) << "all three requests should share the single accepted connection";
}

TEST(HttpClient, ReconnectsWhenTheServerClosedTheIdleConnection) {
  ScriptedServer server([](int listen_fd) {
    for (int i = 0; i < 2; ++i) {
      int fd = AcceptWithin(listen_fd);
      if (ReadRequestHead(fd)) {
        WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n" + std::to_string(i));
      }
      CloseFd(fd);  // without announcing it: the client still thinks it is kept alive
    }
  });
  auto client = NewClient(server.url());
  auto first = client->Send(Get("/"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->body, "0");
  std::this_thread::sleep_for(100ms);  // let the close arrive
  auto second = client->Send(Get("/"));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->body, "1");
}

TEST(HttpClient, ExtraBytesAfterAResponseMakeTheConnectionStaleSoTheNextRequestReconnects) {
  ScriptedServer server([](int listen_fd) {
    int first = AcceptWithin(listen_fd);
    if (ReadRequestHead(first)) {
      // One response plus bytes nobody asked for: reusing this connection would hand them to
      // the next request as its reply.
      WriteAll(first, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n0"
                      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale");
    }
    int second = AcceptWithin(listen_fd);
    if (second >= 0 && ReadRequestHead(second)) {
      WriteAll(second, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1");
    }
    CloseFd(second);
    CloseFd(first);
  });
  auto client = NewClient(server.url());
  auto first = client->Send(Get("/"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->body, "0");
  auto second = client->Send(Get("/"));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->body, "1") << "the leftover bytes were taken as the second reply";
}

TEST(HttpClient, InterimResponsesAreSkippedUntilTheFinalOne) {
  ScriptedServer server([](int listen_fd) {
    int fd = AcceptWithin(listen_fd);
    if (ReadRequestHead(fd)) {
      WriteAll(fd, "HTTP/1.1 100 Continue\r\n\r\n"
                   "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                   "HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\ndone");
    }
    WaitForPeerClose(fd, 2'000ms);
    CloseFd(fd);
  });
  auto client = NewClient(server.url());
  auto response = client->Send(Get("/"));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 201);
  EXPECT_EQ(response->body, "done");
}

TEST(HttpClient, ServerThatNeverAnswersGivesDeadlineExceeded) {
  ScriptedServer server([](int listen_fd) {
    int fd = AcceptWithin(listen_fd);
    ReadRequestHead(fd);
    WaitForPeerClose(fd);
    CloseFd(fd);
  });
  ClientOptions options;
  options.request_timeout = 300ms;
  auto client = NewClient(server.url(), options);
  auto response = client->Send(Get("/"));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kDeadlineExceeded)
      << response.status().ToString();
  client.reset();
}

TEST(HttpClient, RedirectIsReturnedAndNotFollowed) {
  std::atomic<int> requests{0};
  ScriptedServer server([&](int listen_fd) {
    int fd = AcceptWithin(listen_fd);
    while (ReadRequestHead(fd, 1'000ms)) {
      ++requests;
      WriteAll(fd,
               "HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere\r\n"
               "Content-Length: 0\r\n\r\n");
    }
    CloseFd(fd);
  });
  auto client = NewClient(server.url());
  auto response = client->Send(Get("/start"));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 307);
  EXPECT_EQ(response->headers.Get("Location"), "/elsewhere");
  client.reset();
  EXPECT_EQ(requests.load(), 1);
}

TEST(HttpClient, ResponseLargerThanTheLimitIsResourceExhausted) {
  ScriptedServer server([](int listen_fd) {
    int fd = AcceptWithin(listen_fd);
    if (ReadRequestHead(fd)) {
      WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'z'));
    }
    WaitForPeerClose(fd, 2'000ms);
    CloseFd(fd);
  });
  ClientOptions options;
  options.max_response_bytes = 1000;
  auto response = NewClient(server.url(), options)->Send(Get("/"));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kResourceExhausted)
      << response.status().ToString();
}

TEST(HttpClient, ChunkedResponseLargerThanTheLimitIsResourceExhausted) {
  ScriptedServer server([](int listen_fd) {
    int fd = AcceptWithin(listen_fd);
    if (ReadRequestHead(fd)) {
      WriteAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
      for (int i = 0; i < 10; ++i) WriteAll(fd, "200\r\n" + std::string(512, 'z') + "\r\n");
      WriteAll(fd, "0\r\n\r\n");
    }
    WaitForPeerClose(fd, 2'000ms);
    CloseFd(fd);
  });
  ClientOptions options;
  options.max_response_bytes = 1000;
  auto response = NewClient(server.url(), options)->Send(Get("/"));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kResourceExhausted)
      << response.status().ToString();
}

TEST(HttpClient, ServerClosingMidBodyIsAnErrorNotATruncatedSuccess) {
  ScriptedServer server([](int listen_fd) {
    int fd = AcceptWithin(listen_fd);
    if (ReadRequestHead(fd)) {
      WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part of it");
    }
    CloseFd(fd);
  });
  auto response = NewClient(server.url())->Send(Get("/"));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable) << response.status().ToString();
}

TEST(HttpClient, ConnectionRefusedIsUnavailableAndNamesTheAddress) {
  std::uint16_t port = testing::UnusedPort();
  auto response = NewClient("http://127.0.0.1:" + std::to_string(port))->Send(Get("/"));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(response.status().message().find("127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << response.status().ToString();
}

TEST(HttpClient, BasePathIsPrefixedToTheTarget) {
  std::string head;
  ScriptedServer server([&](int listen_fd) {
    int fd = AcceptWithin(listen_fd);
    if (auto request = ReadRequestHead(fd)) {
      head = *request;
      WriteAll(fd, "HTTP/1.1 204 No Content\r\n\r\n");
    }
    WaitForPeerClose(fd, 2'000ms);
    CloseFd(fd);
  });
  auto client = NewClient(server.url() + "/console/");
  auto response = client->Send(Get("/api/v1/ping?x=1"));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 204);
  client.reset();
  EXPECT_TRUE(head.starts_with("GET /console/api/v1/ping?x=1 HTTP/1.1\r\n")) << head;
}

TEST(HttpClient, CreateRejectsBadOptions) {
  ClientOptions options;
  options.base_url = "ftp://example.com/";
  EXPECT_EQ(HttpClient::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.base_url = "https://example.com";
  options.client_cert_pem = "-----BEGIN CERTIFICATE-----\n";
  EXPECT_EQ(HttpClient::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.client_cert_pem.clear();
  options.ca_pem = "not a certificate";
  EXPECT_EQ(HttpClient::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.ca_pem.clear();
  options.ca_file = "/nonexistent/ca.pem";
  auto missing_file = HttpClient::Create(options);
  EXPECT_EQ(missing_file.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing_file.status().message().find("/nonexistent/ca.pem"), std::string::npos);
}

TEST(HttpClient, RequestsThatWouldCorruptTheWireAreRefusedBeforeConnecting) {
  auto client = NewClient("http://127.0.0.1:" + std::to_string(testing::UnusedPort()));
  Request bad_method;
  bad_method.method = "GET /x HTTP/1.1\r\n";
  Request bad_target = Get("/a b");
  Request relative_target = Get("a");
  Request bad_header = Get("/");
  bad_header.headers.Set("X-Injected", "1\r\nHost: elsewhere");
  for (const Request& request : {bad_method, bad_target, relative_target, bad_header}) {
    EXPECT_EQ(client->Send(request).status().code(), StatusCode::kInvalidArgument);
  }
}

// --- ParseBaseUrl -------------------------------------------------------------------------------

TEST(ParseBaseUrl, FillsDefaultPortsAndTrimsThePath) {
  auto https = ParseBaseUrl("https://Console.Example.com/");
  ASSERT_TRUE(https.ok()) << https.status().ToString();
  EXPECT_EQ(https->scheme, "https");
  EXPECT_EQ(https->host, "console.example.com");
  EXPECT_EQ(https->port, 443);
  EXPECT_EQ(https->path, "");

  auto http = ParseBaseUrl("http://10.0.0.5:8080/prefix/api/");
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  EXPECT_EQ(http->port, 8080);
  EXPECT_EQ(http->host, "10.0.0.5");
  EXPECT_EQ(http->path, "/prefix/api");

  auto plain = ParseBaseUrl("http://kube");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->port, 80);
}

TEST(ParseBaseUrl, AcceptsIpv6LiteralsWithoutBrackets) {
  auto url = ParseBaseUrl("https://[::1]:6443");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 6443);
}

TEST(ParseBaseUrl, RejectsWhatItCannotSafelyUse) {
  for (const char* bad :
       {"", "console.example.com", "/relative", "ftp://host/", "https://user:pw@host/",
        "https://host/?q=1", "https://host/#frag", "https://host:0/", "https://host:70000/",
        "https://:443/", "https://host:x/"}) {
    auto url = ParseBaseUrl(bad);
    EXPECT_EQ(url.status().code(), StatusCode::kInvalidArgument) << "accepted " << bad;
  }
}

TEST(ParseBaseUrl, ErrorsNameTheProblemAndAtMostTheOriginNeverTheCredential) {
  for (const char* bad : {"https://user:pw-secret@host.example:8443/", "https://host.example/?token=agt_secret",
                          "https://host.example/#agt_secret", "https://host.example:0/agt_secret",
                          "ftp://user:pw-secret@host.example/", "agt_secret", "https://ho%73t/agt_secret"}) {
    auto url = ParseBaseUrl(bad);
    ASSERT_FALSE(url.ok()) << bad;
    for (const char* secret : {"pw-secret", "user:", "agt_secret", "token="}) {
      EXPECT_EQ(url.status().message().find(secret), std::string::npos) << url.status().message();
    }
  }
  auto userinfo = ParseBaseUrl("https://user:pw-secret@host.example:8443/");
  EXPECT_NE(userinfo.status().message().find("https://host.example:8443"), std::string::npos)
      << userinfo.status().message();
  EXPECT_NE(userinfo.status().message().find("user info"), std::string::npos);
}

TEST(ParseBaseUrl, HostsArePlainNamesOrIpLiteralsNeverPercentEncoded) {
  for (const char* bad : {"https://ho%73t.example/", "https://host%00.example/",
                          "https://host%2fevil.example/", "https://a_b.example/",
                          "https://host!.example/", "https://h$st.example/"}) {
    auto url = ParseBaseUrl(bad);
    EXPECT_EQ(url.status().code(), StatusCode::kInvalidArgument) << "accepted " << bad;
  }
  for (const char* good : {"https://console-1.example.com:8443", "https://10.0.0.1",
                           "https://[fd00::1]:6443", "https://[::ffff:10.0.0.1]"}) {
    EXPECT_TRUE(ParseBaseUrl(good).ok()) << good << ": " << ParseBaseUrl(good).status().ToString();
  }
}

TEST(HttpClient, ARefusedRequestTargetIsNotQuotedBack) {
  auto client = NewClient("http://127.0.0.1:" + std::to_string(testing::UnusedPort()));
  auto response = client->Send(Get("/x?token=agt_secret y"));
  ASSERT_EQ(response.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(response.status().message().find("agt_secret"), std::string::npos)
      << response.status().message();
}

// --- TLS ----------------------------------------------------------------------------------------

class TlsRoundTrip : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = CreateCertificateAuthority("uplink test CA", 1);
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    ca_ = *ca;
  }

  // A TLS server with a certificate for `names`.
  std::unique_ptr<HttpServer> StartTlsServer(const std::vector<std::string>& names) {
    auto issued = IssueServerCertificate(ca_, names, 1);
    EXPECT_TRUE(issued.ok()) << issued.status().ToString();
    if (!issued.ok()) return nullptr;
    ServerOptions options;
    options.tls = TlsServerConfig{issued->cert_pem, issued->key_pem};
    auto server = HttpServer::Start(options, [](Request request, Reply reply) {
      reply(Response::Text(200, "secure " + request.target));
    });
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return server.ok() ? std::move(server).value() : nullptr;
  }

  CertificateAuthority ca_;
};

// A long poll held by the server ends at once when the client is aborted from another
// thread, and the client refuses to send again.
TEST(ClientAbort, EndsTheHeldExchangeAndEveryLaterOne) {
  std::mutex mutex;
  std::vector<Reply> held;
  auto server = HttpServer::Start(ServerOptions{}, [&](Request, Reply reply) {
    std::lock_guard lock(mutex);
    held.push_back(std::move(reply));  // never answered while the test runs
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto client = HttpClient::Create(
      {.base_url = "http://127.0.0.1:" + std::to_string((*server)->port()),
       .request_timeout = std::chrono::minutes(5)});
  ASSERT_TRUE(client.ok());
  Result<Response> sent = InternalError("not sent");
  std::thread poller([&] {
    Request request;
    request.target = "/poll";
    sent = (*client)->Send(request);
  });
  for (int i = 0; i < 1000; ++i) {  // up to 10 s
    {
      std::lock_guard lock(mutex);
      if (!held.empty()) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  (*client)->Abort();
  poller.join();  // a hang here is the failure: the server never answers
  EXPECT_EQ(sent.status().code(), StatusCode::kUnavailable) << sent.status().ToString();
  Request again;
  again.target = "/again";
  EXPECT_EQ((*client)->Send(again).status().code(), StatusCode::kUnavailable);
  (*server)->Stop();
}

TEST_F(TlsRoundTrip, SucceedsWhenTheClientTrustsTheIssuingCa) {
  auto server = StartTlsServer({"localhost", "127.0.0.1"});
  ASSERT_TRUE(server);
  ClientOptions options;
  options.ca_pem = ca_.cert_pem;
  for (std::string host : {"127.0.0.1", "localhost"}) {
    auto client = NewClient("https://" + host + ":" + std::to_string(server->port()), options);
    ASSERT_TRUE(client);
    for (int i = 0; i < 2; ++i) {  // the second request rides the kept-alive TLS connection
      auto response = client->Send(Get("/x"));
      ASSERT_TRUE(response.ok()) << host << ": " << response.status().ToString();
      EXPECT_EQ(response->body, "secure /x");
    }
  }
}

TEST_F(TlsRoundTrip, FailsWhenTheClientDoesNotTrustTheCa) {
  auto server = StartTlsServer({"127.0.0.1"});
  ASSERT_TRUE(server);
  auto other_ca = CreateCertificateAuthority("someone else", 1);
  ASSERT_TRUE(other_ca.ok());
  ClientOptions with_other_ca;
  with_other_ca.ca_pem = other_ca->cert_pem;
  const std::string url = "https://127.0.0.1:" + std::to_string(server->port());
  for (const ClientOptions& options : {ClientOptions{}, with_other_ca}) {
    auto response = NewClient(url, options)->Send(Get("/"));
    ASSERT_FALSE(response.ok());
    EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(response.status().message().find("certificate"), std::string::npos)
        << response.status().ToString();
  }
}

TEST_F(TlsRoundTrip, FailsWhenTheCertificateIsForAnotherHost) {
  auto server = StartTlsServer({"console.example.com", "10.1.2.3"});
  ASSERT_TRUE(server);
  ClientOptions options;
  options.ca_pem = ca_.cert_pem;
  for (std::string host : {"127.0.0.1", "localhost"}) {
    auto response = NewClient("https://" + host + ":" + std::to_string(server->port()), options)
                        ->Send(Get("/"));
    ASSERT_FALSE(response.ok()) << host;
    EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(response.status().message().find("mismatch"), std::string::npos)
        << response.status().ToString();
  }
}

TEST_F(TlsRoundTrip, PlainHttpClientAgainstTlsServerFailsCleanly) {
  auto server = StartTlsServer({"127.0.0.1"});
  ASSERT_TRUE(server);
  ClientOptions options;
  options.request_timeout = 2'000ms;
  auto response =
      NewClient("http://127.0.0.1:" + std::to_string(server->port()), options)->Send(Get("/"));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable) << response.status().ToString();
}

}  // namespace
}  // namespace uplink::net
