// Watches through the API: the current state as ADDED, then each change as it happens,
// filtered by selectors, as Table rows for kubectl, ended by timeoutSeconds, and 410 Expired
// for a resourceVersion older than the changes kept.
#include <gtest/gtest.h>

#include <future>

#include "api_fixture.h"

namespace uplink::kubesim {
namespace {

using namespace std::chrono_literals;

class WatchTest : public testing::ApiFixture {
 protected:
  std::shared_ptr<net::BodyStream> Open(const std::string& target, const std::string& accept = "") {
    net::Response response = Call("GET", target, "", "", accept);
    EXPECT_EQ(response.status, 200) << response.body;
    EXPECT_TRUE(response.stream) << response.body;
    return response.stream;
  }

  // The next piece of the stream as its events, or nothing at its end.
  static std::optional<std::vector<json::object>> Next(net::BodyStream& stream) {
    auto piece = std::make_shared<std::promise<std::optional<std::string>>>();
    stream.Next([piece](std::optional<std::string> text) { piece->set_value(std::move(text)); });
    auto future = piece->get_future();
    EXPECT_EQ(future.wait_for(10s), std::future_status::ready);
    std::optional<std::string> text = future.get();
    if (!text) return std::nullopt;
    std::vector<json::object> events;
    size_t start = 0;
    while (start < text->size()) {
      size_t end = text->find('\n', start);
      EXPECT_NE(end, std::string::npos) << "every event ends its line";
      Result<json::value> event = ParseJson(text->substr(start, end - start));
      EXPECT_TRUE(event.ok());
      if (event.ok()) events.push_back(event->as_object());
      start = end + 1;
    }
    return events;
  }

  static std::string Summary(const std::vector<json::object>& events) {
    std::string text;
    for (const json::object& event : events) {
      text += std::string(event.at("type").as_string()) + " " +
              std::string(event.at("object").at("metadata").at("name").as_string()) + ";";
    }
    return text;
  }

  void CreateConfigMap(const std::string& name, const std::string& labels = "{}") {
    net::Response created =
        Call("POST", "/api/v1/namespaces/default/configmaps",
             R"({"metadata":{"name":")" + name + R"(","labels":)" + labels + "}}",
             "application/json");
    ASSERT_EQ(created.status, 201) << created.body;
  }
};

TEST_F(WatchTest, TheStateNowThenEachChangeAsItHappens) {
  CreateConfigMap("before");
  auto stream = Open("/api/v1/namespaces/default/configmaps?watch=true");
  ASSERT_TRUE(stream);
  EXPECT_EQ(Summary(*Next(*stream)), "ADDED before;");
  CreateConfigMap("after");
  EXPECT_EQ(Summary(*Next(*stream)), "ADDED after;");
  ASSERT_EQ(Call("PATCH", "/api/v1/namespaces/default/configmaps/after", R"({"data":{"k":"v"}})",
                 "application/merge-patch+json")
                .status,
            200);
  std::vector<json::object> modified = *Next(*stream);
  EXPECT_EQ(Summary(modified), "MODIFIED after;");
  EXPECT_EQ(modified[0].at("object").at("data").at("k"), "v");
  ASSERT_EQ(Call("DELETE", "/api/v1/namespaces/default/configmaps/before").status, 200);
  EXPECT_EQ(Summary(*Next(*stream)), "DELETED before;");
  stream->Cancel();
}

TEST_F(WatchTest, ASelectorOrAResourceVersionNarrowsWhatIsSent) {
  CreateConfigMap("red", R"({"color":"red"})");
  std::string version(Body(Call("GET", "/api/v1/namespaces/default/configmaps/red"))["metadata"]
                          .at("resourceVersion").as_string());
  auto stream = Open("/api/v1/configmaps?watch=1&labelSelector=color%3Dblue&resourceVersion=" + version);
  ASSERT_TRUE(stream);
  CreateConfigMap("green", R"({"color":"green"})");
  CreateConfigMap("blue", R"({"color":"blue"})");
  EXPECT_EQ(Summary(*Next(*stream)), "ADDED blue;");
  stream->Cancel();
}

TEST_F(WatchTest, KubectlGetWatchGetsTableRowsWithColumnsOnlyOnce) {
  CreateConfigMap("one");
  auto stream = Open("/api/v1/namespaces/default/configmaps?watch=1", testing::kTableAccept);
  ASSERT_TRUE(stream);
  std::vector<json::object> first = *Next(*stream);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].at("object").at("kind"), "Table");
  EXPECT_TRUE(first[0].at("object").as_object().contains("columnDefinitions"));
  CreateConfigMap("two");
  std::vector<json::object> second = *Next(*stream);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_FALSE(second[0].at("object").as_object().contains("columnDefinitions"));
  EXPECT_EQ(second[0].at("object").at("rows").at(0).at("cells").at(0), "two");
  stream->Cancel();
}

TEST_F(WatchTest, TimeoutSecondsEndsTheStream) {
  auto stream = Open("/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1&resourceVersion=1");
  ASSERT_TRUE(stream);
  EXPECT_FALSE(Next(*stream).has_value());
}

TEST_F(WatchTest, AResourceVersionOlderThanTheChangesKeptIsExpired) {
  for (int i = 0; i < 4200; ++i) {
    ASSERT_EQ(Call("POST", "/api/v1/namespaces/default/configmaps",
                   R"({"metadata":{"name":"c)" + std::to_string(i) + R"("}})", "application/json")
                  .status,
              201);
  }
  auto stream = Open("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=1");
  ASSERT_TRUE(stream);
  std::vector<json::object> events = *Next(*stream);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].at("type"), "ERROR");
  EXPECT_EQ(events[0].at("object").at("code"), 410);
  EXPECT_EQ(events[0].at("object").at("reason"), "Expired");
  EXPECT_TRUE(std::string(events[0].at("object").at("message").as_string())
                  .starts_with("too old resource version: 1 ("));
  EXPECT_FALSE(Next(*stream).has_value());
  ExpectStatus(Call("GET", "/apis/metrics.k8s.io/v1beta1/nodes?watch=1"), 405, "MethodNotAllowed");
}

}  // namespace
}  // namespace uplink::kubesim
