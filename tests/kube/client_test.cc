#include "kube/client.h"

#include <gtest/gtest.h>

#include <atomic>

#include "support/fake_http.h"
#include "support/process.h"

namespace uplink::kube {
namespace {

using testing::FakeHttp;
using testing::Fixture;

KubeCredentials CredentialsFor(const FakeHttp& server, const std::string& token_file = "") {
  KubeCredentials creds;
  creds.server = server.url();
  creds.origin = "test";
  if (token_file.empty()) {
    creds.token = KubeBearerToken(Secret("static-kube-token"));
  } else {
    creds.token_file = token_file;
  }
  return creds;
}

std::unique_ptr<KubeClient> ClientFor(const FakeHttp& server, KubeClientOptions options = {},
                                      const std::string& token_file = "") {
  auto client = KubeClient::Create(CredentialsFor(server, token_file), options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

net::Response Json(int status, std::string body) { return net::Response::Json(status, std::move(body)); }

TEST(KubeClient, GetsTheKubeSystemNamespace) {
  FakeHttp server([](const net::Request& request) {
    EXPECT_EQ(request.Path(), "/api/v1/namespaces/kube-system");
    return Json(200, Fixture("kube-graffiti/namespace-kube-system.json"));
  });
  auto ns = ClientFor(server)->GetNamespace("kube-system");
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  EXPECT_EQ(ns->at("metadata").at("name"), "kube-system");
  EXPECT_FALSE(ns->at("metadata").at("uid").as_string().empty());
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].headers.Get("Authorization").value_or(""), "Bearer static-kube-token");
}

TEST(KubeClient, ListsNodesAcrossPagesFollowingContinueTokens) {
  std::string page1 = Fixture("derived/nodelist-limit2-page1.json");
  std::string page2 = Fixture("derived/nodelist-limit2-page2.json");
  std::string token = ParseJson(page1)->at("metadata").at("continue").as_string().c_str();
  FakeHttp server([&](const net::Request& request) {
    EXPECT_EQ(request.Path(), "/api/v1/nodes");
    EXPECT_EQ(request.Query("labelSelector").value_or(""), "nvidia.com/gpu.present=true");
    EXPECT_EQ(request.Query("limit").value_or(""), "2");
    auto cont = request.Query("continue");
    if (!cont) return Json(200, page1);
    EXPECT_EQ(*cont, token);
    return Json(200, page2);
  });
  auto list = ClientFor(server, {.page_size = 2})->ListNodes("nvidia.com/gpu.present=true");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->items.size(), 3u);
  EXPECT_EQ(list->items[0].at("metadata").at("name"), "kind-control-plane");
  EXPECT_EQ(list->items[2].at("metadata").at("name"), "kind-worker2");
  EXPECT_EQ(list->pages, 2);
  EXPECT_EQ(list->resource_version, "1579");
  EXPECT_FALSE(list->restarted);
}

TEST(KubeClient, TheDefaultPageSizeIsFiveHundred) {
  FakeHttp server([](const net::Request& request) {
    EXPECT_EQ(request.Query("limit").value_or(""), "500");
    return Json(200, R"({"kind":"NodeList","metadata":{"resourceVersion":"1"},"items":[]})");
  });
  auto list = ClientFor(server)->ListNodes("a=b");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(list->items.empty());
}

TEST(KubeClient, AChangedResourceVersionBetweenPagesRestartsTheListingOnce) {
  std::string page1 = Fixture("derived/nodelist-limit2-page1.json");
  std::string page2 = Fixture("derived/nodelist-limit2-page2.json");
  std::atomic<int> second_pages{0};
  FakeHttp server([&](const net::Request& request) {
    if (!request.Query("continue")) return Json(200, page1);
    if (second_pages++ == 0) {
      auto moved = ParseJson(page2).value();
      moved.at("metadata").as_object()["resourceVersion"] = "1600";
      return Json(200, ToJson(moved));
    }
    return Json(200, page2);
  });
  auto list = ClientFor(server, {.page_size = 2})->ListNodes("x=y");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->items.size(), 3u);
  EXPECT_TRUE(list->restarted);
  EXPECT_EQ(server.request_count(), 4u);
}

TEST(KubeClient, AnExpiredContinueTokenRestartsOnceThenGivesUp) {
  std::string page1 = Fixture("derived/nodelist-limit2-page1.json");
  const char kGone[] =
      R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"The provided continue parameter is too old","reason":"Expired","code":410})";
  FakeHttp server([&](const net::Request& request) {
    if (!request.Query("continue")) return Json(200, page1);
    return Json(410, kGone);
  });
  auto list = ClientFor(server, {.page_size = 2})->ListNodes("x=y");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("410"), std::string::npos);
  EXPECT_NE(list.status().message().find("Expired"), std::string::npos);
  EXPECT_EQ(server.request_count(), 4u) << "one listing, one restart, no more";
}

TEST(KubeClient, ThePageCountIsBounded) {
  std::atomic<int> served{0};
  FakeHttp server([&](const net::Request&) {
    int n = served++;
    return Json(200, R"({"metadata":{"resourceVersion":"7","continue":"c)" + std::to_string(n) +
                         R"("},"items":[]})");
  });
  auto list = ClientFor(server, {.page_size = 2, .max_nodes = 10})->ListNodes("x=y");
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(list.status().message().find("more than 10 nodes match the selector; narrow it"),
            std::string::npos) << list.status().message();
  EXPECT_EQ(served.load(), 5) << "10 nodes in pages of 2";
}

TEST(KubeClient, TheDefaultPageCapFollowsFromTheTwentyThousandNodeReportLimit) {
  std::atomic<int> served{0};
  FakeHttp server([&](const net::Request&) {
    int n = served++;
    return Json(200, R"({"metadata":{"resourceVersion":"7","continue":"c)" + std::to_string(n) +
                         R"("},"items":[]})");
  });
  auto list = ClientFor(server)->ListNodes("x=y");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("more than 20,000 nodes match the selector; narrow it"),
            std::string::npos) << list.status().message();
  EXPECT_EQ(served.load(), 40) << "20,000 nodes at limit=500";
}

TEST(KubeClient, MoreNodesThanAReportCarriesFailTheListingBeforeTheyAreHandedOn) {
  std::atomic<int> served{0};
  FakeHttp server([&](const net::Request&) {
    int n = served++;
    return Json(200, R"({"metadata":{"resourceVersion":"7","continue":"c)" + std::to_string(n) +
                         R"("},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]})");
  });
  int handed_on = 0;
  auto list = ClientFor(server, {.page_size = 2, .max_nodes = 5})
                  ->ListNodes("x=y", [&](json::array& page) { handed_on += page.size(); }, [] {});
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(list.status().message().find("more than 5 nodes match the selector; narrow it"),
            std::string::npos) << list.status().message();
  EXPECT_EQ(handed_on, 4);
}

TEST(KubeClient, AnEmptySelectorIsRefusedBeforeAnyRequest) {
  FakeHttp server;
  auto list = ClientFor(server)->ListNodes("");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("selector is empty"), std::string::npos);
  EXPECT_EQ(server.request_count(), 0u);
}

TEST(KubeClient, TheTokenFileIsReReadForEveryRequest) {
  testing::TempDir dir;
  std::string token_file = dir.File("token");
  testing::WriteFileOrDie(token_file, "first-token\n");
  FakeHttp server([](const net::Request&) { return Json(200, R"({"metadata":{"uid":"u"}})"); });
  auto client = ClientFor(server, {}, token_file);
  ASSERT_TRUE(client->GetNamespace("kube-system").ok());
  testing::WriteFileOrDie(token_file, "rotated-token");
  ASSERT_TRUE(client->GetNamespace("kube-system").ok());
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].headers.Get("Authorization").value_or(""), "Bearer first-token");
  EXPECT_EQ(requests[1].headers.Get("Authorization").value_or(""), "Bearer rotated-token");

  testing::WriteFileOrDie(token_file, "");
  auto empty = client->GetNamespace("kube-system");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos);
  EXPECT_EQ(server.request_count(), 2u) << "no request without a token";
}

TEST(KubeClient, StatusErrorsBecomeShortMessagesWithoutTheRawBody) {
  std::string long_message(5000, 'x');
  FakeHttp server([&](const net::Request&) {
    return Json(403, R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes is forbidden: )" +
                         long_message +
                         R"(","reason":"Forbidden","details":{"kind":"nodes","secretish":"DETAILS-MARKER"},"code":403})");
  });
  auto list = ClientFor(server)->ListNodes("x=y");
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), StatusCode::kPermissionDenied);
  const std::string& message = list.status().message();
  EXPECT_NE(message.find("403"), std::string::npos);
  EXPECT_NE(message.find("reason Forbidden"), std::string::npos);
  EXPECT_NE(message.find("nodes is forbidden"), std::string::npos);
  EXPECT_EQ(message.find("DETAILS-MARKER"), std::string::npos);
  EXPECT_LT(message.size(), 400u);
}

TEST(KubeClient, ANonStatusErrorBodyIsNeverEchoed) {
  FakeHttp server([](const net::Request&) {
    return net::Response::Text(502, "<html>upstream proxy BODY-MARKER</html>");
  });
  auto ns = ClientFor(server)->GetNamespace("kube-system");
  ASSERT_FALSE(ns.ok());
  EXPECT_EQ(ns.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(ns.status().message().find("502"), std::string::npos);
  EXPECT_NE(ns.status().message().find("not a Kubernetes Status object"), std::string::npos);
  EXPECT_EQ(ns.status().message().find("BODY-MARKER"), std::string::npos);
}

TEST(KubeClient, MalformedJsonIsAClearError) {
  FakeHttp server([](const net::Request&) { return Json(200, R"({"items": [ {"metadata": )"); });
  auto list = ClientFor(server)->ListNodes("x=y");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("not valid JSON"), std::string::npos);

  server.SetHandler([](const net::Request&) { return Json(200, R"(["not", "an", "object"])"); });
  auto array = ClientFor(server)->ListNodes("x=y");
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.status().message().find("not a JSON object"), std::string::npos);

  server.SetHandler([](const net::Request&) { return Json(200, R"({"kind":"NodeList"})"); });
  auto no_items = ClientFor(server)->ListNodes("x=y");
  ASSERT_FALSE(no_items.ok());
  EXPECT_NE(no_items.status().message().find("no 'items' list"), std::string::npos);
}

TEST(KubeClient, AnOversizedPageIsRefused) {
  std::string big = R"({"items":[],"padding":")" + std::string(64 * 1024, 'p') + "\"}";
  FakeHttp server([&](const net::Request&) { return Json(200, big); });
  auto list = ClientFor(server, {.max_response_bytes = 16 * 1024})->ListNodes("x=y");
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), StatusCode::kResourceExhausted) << list.status().ToString();
}

TEST(KubeClient, MergePatchesAConfigMapWithTheMergePatchContentType) {
  FakeHttp server([](const net::Request&) { return Json(200, R"({"kind":"ConfigMap"})"); });
  Status patched = ClientFor(server)->MergePatchConfigMap(
      "uplink-system", "uplink-status", json::object{{"data", json::object{{"mode", "inventory"}}}});
  ASSERT_TRUE(patched.ok()) << patched.ToString();
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "PATCH");
  EXPECT_EQ(requests[0].Path(), "/api/v1/namespaces/uplink-system/configmaps/uplink-status");
  EXPECT_EQ(requests[0].headers.Get("Content-Type").value_or(""), "application/merge-patch+json");
  EXPECT_EQ(ParseJson(requests[0].body).value(),
            json::parse(R"({"data":{"mode":"inventory"}})"));
}

TEST(KubeClient, AMissingConfigMapIsNotFound) {
  FakeHttp server([](const net::Request&) {
    return Json(404, R"({"kind":"Status","status":"Failure","message":"configmaps \"s\" not found","reason":"NotFound","code":404})");
  });
  Status patched = ClientFor(server)->MergePatchConfigMap("ns", "s", json::object{});
  EXPECT_EQ(patched.code(), StatusCode::kNotFound);
  EXPECT_NE(patched.message().find("not found"), std::string::npos);
}

TEST(KubeClient, AnUnreachableServerIsUnavailableNotAHang) {
  KubeCredentials creds;
  creds.server = "http://127.0.0.1:" + std::to_string(testing::FreePort());
  creds.token = KubeBearerToken(Secret("t"));
  auto client = KubeClient::Create(creds, {.connect_timeout = std::chrono::milliseconds(500),
                                           .request_timeout = std::chrono::milliseconds(1000)});
  ASSERT_TRUE(client.ok());
  auto ns = (*client)->GetNamespace("kube-system");
  ASSERT_FALSE(ns.ok());
  EXPECT_NE(ns.status().message().find("GET /api/v1/namespaces/kube-system"), std::string::npos);
}

}  // namespace
}  // namespace uplink::kube
