// Container logs: the query parameters, their validation, and which lines the kubelet would
// send for which container instance.
#include "kubesim/logs.h"

#include <gtest/gtest.h>

#include "common/json.h"
#include "common/yaml.h"

namespace uplink::kubesim {
namespace {

using Query = std::vector<std::pair<std::string, std::string>>;

json::object Yaml(std::string_view text) {
  Result<json::value> parsed = ParseYaml(text);
  EXPECT_TRUE(parsed.ok() && parsed->is_object()) << text;
  return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object();
}

// A pod with a running sidecar-free main container that restarted once, and a waiting one.
constexpr std::string_view kPod = R"(
metadata: {name: web-0, namespace: ml}
spec:
  nodeName: gpu-node-0001
  initContainers: [{name: fetch}]
  containers: [{name: app}, {name: pending}]
status:
  initContainerStatuses:
  - name: fetch
    state: {terminated: {exitCode: 0, containerID: "containerd://init"}}
  containerStatuses:
  - name: app
    containerID: containerd://current
    state: {running: {startedAt: "2026-01-01T00:00:00Z"}}
    lastState: {terminated: {exitCode: 1, containerID: "containerd://previous"}}
  - name: pending
    state: {waiting: {reason: ContainerCreating}}
)";

class LogsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(logs_.Add(Yaml(R"(
kind: ContainerLog
metadata: {namespace: ml, name: web-0}
container: app
containerID: containerd://current
log: |
  2026-01-01T00:00:01Z one
  2026-01-01T00:00:02.5Z two
  2026-01-01T00:00:03.000000001Z three
  2026-01-01T00:00:04Z
)")).ok());
    ASSERT_TRUE(logs_.Add(Yaml(R"(
metadata: {namespace: ml, name: web-0}
containerID: containerd://previous
log: "2025-12-31T23:59:00Z crashed\n"
)")).ok());
  }

  Result<std::string> Read(const Query& query, std::string_view pod = kPod) {
    Result<LogOptions> options = ParseLogOptions(query);
    if (!options.ok()) return options.status();
    return ReadContainerLog(Yaml(pod), *options, logs_, now_);
  }

  LogStore logs_;
  WallTime now_ = *ParseRfc3339("2026-01-01T00:00:05Z");
};

TEST_F(LogsTest, TheCurrentInstanceIsReadWholeOrInPart) {
  EXPECT_EQ(Read({{"container", "app"}}).value_or("?"), "one\ntwo\nthree\n\n");
  EXPECT_EQ(Read({{"container", "app"}, {"tailLines", "2"}}).value_or("?"), "three\n\n");
  EXPECT_EQ(Read({{"container", "app"}, {"tailLines", "0"}}).value_or("?"), "");
  EXPECT_EQ(Read({{"container", "app"}, {"tailLines", "99"}}).value_or("?"), "one\ntwo\nthree\n\n");
  EXPECT_EQ(Read({{"container", "app"}, {"sinceSeconds", "3"}}).value_or("?"), "two\nthree\n\n");
  EXPECT_EQ(Read({{"container", "app"}, {"sinceTime", "2026-01-01T00:00:03Z"}}).value_or("?"),
            "three\n\n");
  // The kubelet takes the tail first, then drops what is older than the since time.
  EXPECT_EQ(Read({{"container", "app"}, {"tailLines", "3"}, {"sinceSeconds", "2"}}).value_or("?"),
            "three\n\n");
  EXPECT_EQ(Read({{"container", "app"}, {"timestamps", "true"}, {"tailLines", "3"}}).value_or("?"),
            "2026-01-01T00:00:02.5Z two\n2026-01-01T00:00:03.000000001Z three\n"
            "2026-01-01T00:00:04Z \n");
  EXPECT_EQ(Read({{"container", "app"}, {"limitBytes", "6"}}).value_or("?"), "one\ntw");
  EXPECT_EQ(Read({{"container", "app"}, {"limitBytes", "4"}}).value_or("?"), "one\n");
  EXPECT_EQ(Read({{"container", "app"}, {"sinceSeconds", "9223372036854775807"}}).value_or("?"),
            "one\ntwo\nthree\n\n");
  // The first value of a repeated parameter wins; unknown parameters are ignored.
  EXPECT_EQ(Read({{"container", "app"}, {"tailLines", "1"}, {"tailLines", "3"}, {"pretty", "x"}})
                .value_or("?"),
            "\n");
}

TEST_F(LogsTest, PreviousReadsTheLastTerminatedInstance) {
  EXPECT_EQ(Read({{"container", "app"}, {"previous", "true"}}).value_or("?"), "crashed\n");
  EXPECT_EQ(Read({{"container", "fetch"}}).value_or("?"), "");  // wrote nothing
  EXPECT_EQ(Read({{"container", "fetch"}, {"previous", "1"}}).status().message(),
            "previous terminated container \"fetch\" in pod \"web-0\" not found");
}

TEST_F(LogsTest, ContainerChoiceAndStateErrorsAreTheRealServersMessages) {
  EXPECT_EQ(Read({}).status().message(),
            "a container name must be specified for pod web-0, choose one of: [app pending] or "
            "one of the init containers: [fetch]");
  EXPECT_EQ(Read({{"container", "nope"}}).status().message(),
            "container nope is not valid for pod web-0");
  EXPECT_EQ(Read({{"container", "pending"}}).status().message(),
            "container \"pending\" in pod \"web-0\" is waiting to start: ContainerCreating");
  EXPECT_EQ(Read({{"container", "app"}, {"follow", "true"}}).status().message(),
            "follow is not supported by uplink-kubesim: it serves logs whole and never streams "
            "them");
  // A single container is the default; an unscheduled pod has nothing to show.
  EXPECT_EQ(Read({}, "metadata: {name: one}\nspec: {nodeName: n, containers: [{name: c}]}\n"
                     "status: {containerStatuses: [{name: c, state: {waiting: {reason: ErrImagePull}}}]}")
                .status()
                .message(),
            "container \"c\" in pod \"one\" is waiting to start: image can't be pulled");
  EXPECT_EQ(Read({}, "metadata: {name: one}\nspec: {containers: [{name: c}]}").value_or("?"), "");
  EXPECT_EQ(Read({}, "metadata: {name: none}\nspec: {containers: []}").status().message(),
            "a container name must be specified for pod none");
  EXPECT_EQ(Read({}, "metadata: {name: one}\nspec: {nodeName: n, containers: [{name: c}]}")
                .status()
                .message(),
            "container \"c\" in pod \"one\" is not available");
  EXPECT_EQ(Read({}, "metadata: {name: one}\nspec: {nodeName: n, containers: [{name: c}]}\n"
                     "status: {containerStatuses: [{name: c, state: {terminated: {exitCode: 2}}}]}")
                .status()
                .message(),
            "container \"c\" in pod \"one\" is terminated");
}

TEST_F(LogsTest, ACrashLoopingContainerShowsItsLastInstance) {
  constexpr std::string_view kCrashing = R"(
metadata: {name: crash}
spec: {nodeName: n, containers: [{name: app}]}
status:
  containerStatuses:
  - name: app
    state: {waiting: {reason: CrashLoopBackOff}}
    lastState: {terminated: {exitCode: 1, containerID: "containerd://previous"}}
)";
  EXPECT_EQ(Read({}, kCrashing).value_or("?"), "crashed\n");
  EXPECT_EQ(Read({{"previous", "true"}}, kCrashing).value_or("?"), "crashed\n");
}

TEST(LogOptions, HostileParametersAreBadRequestsOrInvalid) {
  struct Bad {
    Query query;
    std::string message;
  };
  const Bad cases[] = {
      {{{"tailLines", "abc"}}, "tailLines: strconv.ParseInt: parsing \"abc\": invalid syntax"},
      {{{"tailLines", ""}}, "tailLines: strconv.ParseInt: parsing \"\": invalid syntax"},
      {{{"tailLines", "1.5"}}, "tailLines: strconv.ParseInt: parsing \"1.5\": invalid syntax"},
      {{{"tailLines", "12abc"}}, "tailLines: strconv.ParseInt: parsing \"12abc\": invalid syntax"},
      {{{"tailLines", std::string("1\0", 2)}},
       "tailLines: strconv.ParseInt: parsing \"1\\x00\": invalid syntax"},
      {{{"sinceSeconds", "99999999999999999999"}},
       "sinceSeconds: strconv.ParseInt: parsing \"99999999999999999999\": value out of range"},
      {{{"limitBytes", "-"}}, "limitBytes: strconv.ParseInt: parsing \"-\": invalid syntax"},
      {{{"previous", "maybe"}}, "previous: strconv.ParseBool: parsing \"maybe\": invalid syntax"},
      {{{"follow", "yes"}}, "follow: strconv.ParseBool: parsing \"yes\": invalid syntax"},
      {{{"timestamps", std::string(1000, 'x')}},
       "timestamps: strconv.ParseBool: parsing \"" + std::string(64, 'x') + "\": invalid syntax"},
      {{{"sinceTime", "yesterday"}},
       "sinceTime: parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": not an RFC 3339 "
       "time"},
  };
  for (const Bad& bad : cases) {
    Result<LogOptions> options = ParseLogOptions(bad.query);
    ASSERT_FALSE(options.ok()) << bad.message;
    EXPECT_EQ(options.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(options.status().message(), bad.message);
  }
  Result<LogOptions> fine = ParseLogOptions({{"tailLines", "+7"}, {"previous", "T"}, {"follow", ""}});
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(*fine->tail_lines, 7);
  EXPECT_TRUE(fine->previous);
  EXPECT_FALSE(fine->follow);
}

TEST(LogOptions, ValidationMatchesValidatePodLogOptions) {
  auto causes = [](const Query& query) {
    std::vector<std::string> texts;
    for (const FieldError& cause : ValidateLogOptions(*ParseLogOptions(query))) {
      texts.push_back(cause.field + ": " + cause.message);
    }
    return texts;
  };
  EXPECT_TRUE(causes({{"tailLines", "0"}, {"limitBytes", "1"}, {"sinceSeconds", "1"}}).empty());
  EXPECT_EQ(causes({{"tailLines", "-1"}}),
            std::vector<std::string>{"tailLines: Invalid value: -1: must be greater than or equal to 0"});
  EXPECT_EQ(causes({{"limitBytes", "0"}}),
            std::vector<std::string>{"limitBytes: Invalid value: 0: must be greater than 0"});
  EXPECT_EQ(causes({{"sinceSeconds", "-5"}}),
            std::vector<std::string>{"sinceSeconds: Invalid value: -5: must be greater than 0"});
  EXPECT_EQ(causes({{"sinceSeconds", "5"}, {"sinceTime", "2026-01-01T00:00:00Z"}}),
            std::vector<std::string>{": Forbidden: at most one of `sinceTime` or `sinceSeconds` may "
                                     "be specified"});
}

TEST(LogStore, MalformedLogsAreRefusedNamingTheLine) {
  LogStore logs;
  EXPECT_EQ(logs.Add(Yaml("metadata: {namespace: a, name: p}\ncontainer: c\nlog: x\n")).message(),
            "ContainerLog a/p c has no containerID");
  EXPECT_EQ(logs.Add(Yaml("containerID: x\nlog: [1]\n")).message(),
            "ContainerLog / : log must be a string");
  EXPECT_EQ(logs.Add(Yaml("containerID: x\nlog: \"2026-01-01T00:00:00Z ok\\nno time here\\n\"\n"))
                .message(),
            "ContainerLog / : log line 2 does not start with an RFC 3339 time and a space");
  json::object huge{{"containerID", "x"},
                    {"log", std::string(kMaxContainerLogBytes + 1, 'a')}};
  EXPECT_EQ(logs.Add(huge).message(), "ContainerLog / : log is longer than 8388608 bytes");
  EXPECT_TRUE(logs.Lines("x").empty());
}

TEST(FormatRfc3339Nano, DropsTrailingZerosOfTheFractionLikeGo) {
  WallTime base = *ParseRfc3339("2026-11-30T14:29:47Z");
  EXPECT_EQ(FormatRfc3339Nano(base), "2026-11-30T14:29:47Z");
  EXPECT_EQ(FormatRfc3339Nano(base + std::chrono::nanoseconds(4817320)),
            "2026-11-30T14:29:47.00481732Z");
  EXPECT_EQ(FormatRfc3339Nano(base + std::chrono::milliseconds(500)), "2026-11-30T14:29:47.5Z");
  EXPECT_EQ(FormatRfc3339Nano(base + std::chrono::nanoseconds(1)),
            "2026-11-30T14:29:47.000000001Z");
}

}  // namespace
}  // namespace uplink::kubesim
