// The read-only kubectl guard against two tables (allowed_argv.jsonl, refused_argv.jsonl:
// one {"argv": [...], "why": "..."} per line), plus the parsed command, the namespace scope,
// the refusal text and hostile input.
#include "kubectl/guard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/json.h"

namespace uplink::kubectl {
namespace {

using ::testing::HasSubstr;
using Argv = std::vector<std::string>;

struct Case {
  int line = 0;
  Argv argv;
  std::string why;
  std::string reason;   // refused: a part of the reason
  json::object expect;  // allowed: fields of the parsed command
};

std::string Describe(const Case& c) {
  std::string text = "line " + std::to_string(c.line) + " (" + c.why + "):";
  for (const std::string& arg : c.argv) text += " [" + arg.substr(0, 80) + "]";
  return text;
}

std::vector<Case> LoadTable(const std::string& name) {
  std::ifstream in(std::string(UPLINK_SOURCE_DIR) + "/tests/kubectl/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::vector<Case> cases;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    auto parsed = ParseJson(line);
    if (!parsed.ok() || !parsed->is_object()) {
      ADD_FAILURE() << name << " line " << number << " is not a JSON object";
      continue;
    }
    const json::object& object = parsed->as_object();
    Case c;
    c.line = number;
    for (const json::value& arg : object.at("argv").as_array()) {
      c.argv.emplace_back(arg.as_string());
    }
    c.why = std::string(object.at("why").as_string());
    if (const json::value* reason = object.if_contains("reason")) {
      c.reason = std::string(reason->as_string());
    }
    if (const json::value* expect = object.if_contains("expect")) c.expect = expect->as_object();
    EXPECT_FALSE(c.why.empty()) << name << " line " << number << " says not why";
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<std::string> Strings(const json::value& array) {
  std::vector<std::string> strings;
  for (const json::value& item : array.as_array()) strings.emplace_back(item.as_string());
  return strings;
}

TEST(GuardTable, EveryAllowedArgvIsAllowedAndParsedAsExpected) {
  std::vector<Case> cases = LoadTable("allowed_argv.jsonl");
  EXPECT_GE(cases.size(), 80u);
  for (const Case& c : cases) {
    auto command = CheckKubectlArgv(c.argv);
    ASSERT_TRUE(command.ok()) << Describe(c) << "\n  " << command.status().ToString();
    for (const auto& [key, value] : c.expect) {
      if (key == "verb") {
        EXPECT_EQ(command->verb, value.as_string()) << Describe(c);
      } else if (key == "resources") {
        EXPECT_EQ(command->resources, Strings(value)) << Describe(c);
      } else if (key == "namespace") {
        EXPECT_EQ(command->namespace_name, std::string(value.as_string())) << Describe(c);
      } else if (key == "all_namespaces") {
        EXPECT_EQ(command->all_namespaces, value.as_bool()) << Describe(c);
      } else if (key == "cluster_scoped") {
        EXPECT_EQ(command->cluster_scoped, value.as_bool()) << Describe(c);
      } else {
        ADD_FAILURE() << Describe(c) << ": unknown expectation " << key;
      }
    }
  }
}

TEST(GuardTable, EveryRefusedArgvIsRefusedForItsReasonOnOneShortLine) {
  std::vector<Case> cases = LoadTable("refused_argv.jsonl");
  EXPECT_GE(cases.size(), 150u);
  for (const Case& c : cases) {
    auto command = CheckKubectlArgv(c.argv);
    ASSERT_FALSE(command.ok()) << Describe(c) << " was allowed";
    EXPECT_EQ(command.status().code(), StatusCode::kPermissionDenied) << Describe(c);
    const std::string& reason = command.status().message();
    EXPECT_THAT(reason, HasSubstr(c.reason)) << Describe(c);
    EXPECT_EQ(reason.find('\n'), std::string::npos) << Describe(c);
    EXPECT_LE(reason.size(), 240u) << Describe(c) << ": " << reason;
  }
}

// Whatever an allowed command looks like, adding one refused flag anywhere refuses it: as a
// flag, as the value of another flag, or after `--`.
TEST(GuardTable, ARefusedFlagInsertedAnywhereIsRefused) {
  const std::vector<std::string> refused = {"--as=admin",   "--as_group=system:masters",
                                            "-sevil:6443",  "--raw=/api",
                                            "-w",           "--kubeconfig=/tmp/k",
                                            "--token=abc",  "-f",
                                            "--watch",      "--insecure-skip-tls-verify",
                                            "-v=9",         "-o=go-template={{.}}"};
  for (const Case& c : LoadTable("allowed_argv.jsonl")) {
    for (const std::string& flag : refused) {
      for (size_t at = 1; at <= c.argv.size(); ++at) {
        Argv argv = c.argv;
        argv.insert(argv.begin() + static_cast<std::ptrdiff_t>(at), flag);
        EXPECT_FALSE(CheckKubectlArgv(argv).ok())
            << Describe(c) << " with " << flag << " at " << at;
      }
    }
  }
}

TEST(Guard, TheParsedCommandSaysWhatItReads) {
  auto command = CheckKubectlArgv({"kubectl", "-n", "ml", "get", "pods,nodes", "-A"});
  ASSERT_TRUE(command.ok());
  EXPECT_EQ(*command, (KubectlCommand{.verb = "get",
                                      .resources = {"pods", "nodes"},
                                      .namespace_name = "ml",
                                      .all_namespaces = true,
                                      .cluster_scoped = false}));

  auto nodes = CheckKubectlArgv({"kubectl", "get", "no,ns", "-o", "name"});
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ(*nodes, (KubectlCommand{.verb = "get",
                                    .resources = {"nodes", "namespaces"},
                                    .cluster_scoped = true}));

  auto repeated = CheckKubectlArgv({"kubectl", "get", "pods,po,pod", "pod/x"});
  ASSERT_FALSE(repeated.ok()) << "a TYPE/NAME after a type";
  auto unique = CheckKubectlArgv({"kubectl", "get", "pods,po,Pod,pods.v1."});
  ASSERT_TRUE(unique.ok());
  EXPECT_EQ(unique->resources, std::vector<std::string>{"pods"});

  auto logs = CheckKubectlArgv({"kubectl", "logs", "sts/db", "-n", "data"});
  ASSERT_TRUE(logs.ok());
  EXPECT_EQ(*logs, (KubectlCommand{.verb = "logs",
                                   .resources = {"pods", "pods/log", "statefulsets.apps"},
                                   .namespace_name = "data"}));

  auto version = CheckKubectlArgv({"kubectl", "version", "--client"});
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, (KubectlCommand{.verb = "version", .cluster_scoped = true}));

  auto top = CheckKubectlArgv({"kubectl", "top", "pod", "-A"});
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->verb, "top");
  EXPECT_EQ(top->resources, (std::vector<std::string>{"pods", "pods.metrics.k8s.io"}));
  EXPECT_TRUE(top->all_namespaces);
  EXPECT_FALSE(top->cluster_scoped);

  auto top_nodes = CheckKubectlArgv({"kubectl", "top", "no"});
  ASSERT_TRUE(top_nodes.ok());
  EXPECT_EQ(top_nodes->resources, (std::vector<std::string>{"nodes", "nodes.metrics.k8s.io"}));
  EXPECT_TRUE(top_nodes->cluster_scoped);
}

// explain --recursive prints every field of a schema; -R/--recursive of get and describe
// walks the directories of -f. The same word is a read for one and refused for the others.
TEST(Guard, FlagsMeanWhatTheyMeanForTheirVerb) {
  for (const Argv& argv : std::vector<Argv>{{"kubectl", "explain", "pods", "--recursive"},
                                            {"kubectl", "explain", "pods.spec", "--recursive=true"},
                                            {"kubectl", "explain", "--recursive", "deploy"},
                                            {"kubectl", "explain", "pods", "--recursive=false"}}) {
    auto explained = CheckKubectlArgv(argv);
    ASSERT_TRUE(explained.ok()) << argv[3] << ": " << explained.status().ToString();
    EXPECT_EQ(explained->verb, "explain");
  }
  for (const Argv& argv : std::vector<Argv>{{"kubectl", "get", "pods", "--recursive"},
                                            {"kubectl", "describe", "pods", "--recursive"},
                                            {"kubectl", "get", "pods", "-R"},
                                            {"kubectl", "explain", "pods", "-R"},
                                            {"kubectl", "--recursive", "explain", "pods"},
                                            {"kubectl", "logs", "p", "--recursive"}}) {
    auto refused = CheckKubectlArgv(argv);
    EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << argv[1] << argv[2];
  }
}

// Whatever program an argv names, a refusal carries the read-only text: helm, a shell and an
// empty word are not kubectl.
TEST(Guard, AnotherProgramIsRefusedAsNotReadOnlyKubectl) {
  for (const Argv& argv : std::vector<Argv>{{"helm", "list"},
                                            {"bash", "-c", "kubectl delete pod x"},
                                            {"/usr/local/bin/kubectl", "get", "pods"},
                                            {"", "get", "pods"},
                                            {"Kubectl", "get", "pods"}}) {
    auto refused = CheckKubectlArgv(argv);
    ASSERT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << argv[0];
    EXPECT_THAT(refused.status().message(), HasSubstr("is not kubectl"));
    EXPECT_THAT(refused.status().message(), HasSubstr("only read-only kubectl"));
  }
  EXPECT_THAT(CheckKubectlArgv({"helm", "list"}).status().message(), HasSubstr("'helm'"));
}

TEST(Guard, EverySpellingOfATypeHasOneCanonicalName) {
  for (const char* spelling : {"po", "pod", "pods", "Pod", "PODS", "pods.v1.", "pod."}) {
    auto resource = CanonicalResourceOf(spelling);
    ASSERT_TRUE(resource.ok()) << spelling << ": " << resource.status().ToString();
    EXPECT_EQ(resource->name, "pods") << spelling;
    EXPECT_TRUE(resource->namespaced);
  }
  for (const char* spelling : {"deploy", "deployment", "deployments.apps", "Deployment.v1.apps"}) {
    auto resource = CanonicalResourceOf(spelling);
    ASSERT_TRUE(resource.ok()) << spelling;
    EXPECT_EQ(resource->name, "deployments.apps") << spelling;
  }
  auto nodes = CanonicalResourceOf("no");
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ(nodes->name, "nodes");
  EXPECT_FALSE(nodes->namespaced);
  EXPECT_EQ(CanonicalResourceOf("nodes.metrics.k8s.io")->name, "nodes.metrics.k8s.io");
  // What the guard never lets through has no canonical name.
  for (const char* refused : {"secrets", "Secret", "cm", "sa", "all", "widgets.example.com", "",
                              "pods/log", "pods,nodes"}) {
    EXPECT_EQ(CanonicalResourceOf(refused).status().code(), StatusCode::kPermissionDenied)
        << refused;
  }
}

TEST(Guard, RefusalTextIsTheHeadlineAndTheReasonOnTheNextLine) {
  EXPECT_EQ(RefusalText("--raw sends a request to any API path"),
            "This cluster is connected through the in-cluster uplink agent, which is read-only.\n"
            "--raw sends a request to any API path");
  auto refused = CheckKubectlArgv({"kubectl", "delete", "pod", "x"});
  ASSERT_FALSE(refused.ok());
  std::string text = RefusalText(refused.status().message());
  EXPECT_EQ(text.substr(0, text.find('\n')), kRefusalHeadline);
  EXPECT_THAT(text, HasSubstr("'delete' is not allowed"));
}

using Scope = std::optional<std::vector<std::string>>;

KubectlCommand Command(const Argv& argv) {
  auto command = CheckKubectlArgv(argv);
  EXPECT_TRUE(command.ok()) << command.status().ToString();
  return command.value_or(KubectlCommand{});
}

// The obvious first commands work before the owner has chosen namespaces; what reads inside
// a namespace waits for the choice, and the refusal says how to make it.
TEST(NamespaceScope, BeforeNamespacesAreChosenOnlyClusterScopedReadsRun) {
  for (const Argv& argv : std::vector<Argv>{{"kubectl", "get", "nodes"},
                                            {"kubectl", "get", "namespaces"},
                                            {"kubectl", "get", "nodes", "-o", "wide"},
                                            {"kubectl", "top", "nodes"},
                                            {"kubectl", "api-resources"},
                                            {"kubectl", "api-versions"},
                                            {"kubectl", "version"},
                                            {"kubectl", "cluster-info"},
                                            {"kubectl", "explain", "pods"},
                                            {"kubectl", "explain", "pods", "--recursive"},
                                            {"kubectl", "get", "storageclasses"}}) {
    Status status = CheckNamespaceScope(Command(argv), std::nullopt);
    EXPECT_TRUE(status.ok()) << argv[1] << " " << argv[2] << ": " << status.ToString();
  }
  for (const Argv& argv : std::vector<Argv>{{"kubectl", "get", "pods"},
                                            {"kubectl", "get", "pods", "-A"},
                                            {"kubectl", "top", "pods", "-n", "ml"},
                                            {"kubectl", "get", "nodes,pods"},
                                            {"kubectl", "describe", "node", "n1"},
                                            {"kubectl", "logs", "p"}}) {
    Status status = CheckNamespaceScope(Command(argv), std::nullopt);
    EXPECT_EQ(status.code(), StatusCode::kPermissionDenied) << argv[1] << " " << argv[2];
    EXPECT_THAT(status.message(), HasSubstr("no namespaces have been chosen"));
    EXPECT_THAT(status.message(), HasSubstr("uplink connections namespaces"));
  }
}

TEST(NamespaceScope, AStarAllowsEveryNamespaceAndMinusA) {
  Scope all = std::vector<std::string>{"*"};
  EXPECT_TRUE(CheckNamespaceScope(Command({"kubectl", "get", "pods", "-A"}), all).ok());
  EXPECT_TRUE(CheckNamespaceScope(Command({"kubectl", "get", "pods", "-n", "x"}), all).ok());
  EXPECT_TRUE(CheckNamespaceScope(Command({"kubectl", "describe", "nodes"}), all).ok());
  EXPECT_TRUE(CheckNamespaceScope(Command({"kubectl", "cluster-info"}), all).ok());
}

TEST(NamespaceScope, ListedNamespacesAllowOnlyThemselves) {
  Scope scope = std::vector<std::string>{"team-a", "default"};
  EXPECT_TRUE(CheckNamespaceScope(Command({"kubectl", "get", "pods", "-n", "team-a"}), scope).ok());
  EXPECT_TRUE(CheckNamespaceScope(Command({"kubectl", "-nteam-a", "logs", "p"}), scope).ok());
  EXPECT_TRUE(CheckNamespaceScope(Command({"kubectl", "get", "pods"}), scope).ok())
      << "no -n reads default";

  Status other = CheckNamespaceScope(Command({"kubectl", "get", "pods", "-n", "team-b"}), scope);
  EXPECT_EQ(other.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(other.message(), HasSubstr("'team-b' is outside"));
  EXPECT_THAT(other.message(), HasSubstr("team-a, default"));

  Status every = CheckNamespaceScope(Command({"kubectl", "get", "pods", "-A"}), scope);
  EXPECT_EQ(every.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(every.message(), HasSubstr("every namespace"));
  EXPECT_FALSE(CheckNamespaceScope(Command({"kubectl", "top", "pod", "-A"}), scope).ok());
  EXPECT_FALSE(CheckNamespaceScope(Command({"kubectl", "get", "pods,nodes", "-A"}), scope).ok());
  EXPECT_FALSE(CheckNamespaceScope(Command({"kubectl", "describe", "node", "n1"}), scope).ok())
      << "describe node lists the pods of every namespace";
  EXPECT_TRUE(CheckNamespaceScope(Command({"kubectl", "get", "pods", "-A=false", "-n", "team-a"}),
                                  scope)
                  .ok());

  Scope without_default = std::vector<std::string>{"team-a"};
  EXPECT_FALSE(CheckNamespaceScope(Command({"kubectl", "get", "pods"}), without_default).ok());
}

TEST(NamespaceScope, ClusterScopedReadsNeedOnlyAChosenScope) {
  Scope none = std::vector<std::string>{};
  Scope one = std::vector<std::string>{"team-a"};
  for (const Argv& argv : std::vector<Argv>{{"kubectl", "get", "nodes"},
                                            {"kubectl", "get", "nodes", "-A"},
                                            {"kubectl", "get", "namespaces", "-n", "elsewhere"},
                                            {"kubectl", "top", "node"},
                                            {"kubectl", "api-resources"},
                                            {"kubectl", "api-versions"},
                                            {"kubectl", "version"},
                                            {"kubectl", "explain", "pods.spec"}}) {
    EXPECT_TRUE(CheckNamespaceScope(Command(argv), one).ok()) << argv[1];
    EXPECT_TRUE(CheckNamespaceScope(Command(argv), none).ok()) << argv[1];
  }
  EXPECT_FALSE(CheckNamespaceScope(Command({"kubectl", "get", "pods", "-n", "team-a"}), none).ok());
}

// describe namespace lists the ResourceQuotas and LimitRanges inside the namespace it
// describes: until 2026-12-04 it passed as cluster-scoped, so a connection scoped to team-a
// read kube-system's quotas.
TEST(NamespaceScope, DescribingANamespaceReadsWithinIt) {
  Scope team_a = std::vector<std::string>{"team-a"};
  EXPECT_TRUE(CheckNamespaceScope(Command({"kubectl", "describe", "ns", "team-a"}), team_a).ok());
  EXPECT_TRUE(CheckNamespaceScope(
                  Command({"kubectl", "describe", "namespace/team-a", "-n", "kube-system"}), team_a)
                  .ok());
  for (const Argv& argv :
       std::vector<Argv>{{"kubectl", "describe", "ns", "kube-system"},
                         {"kubectl", "describe", "namespaces"},
                         {"kubectl", "describe", "ns", "team-a", "kube-system"},
                         {"kubectl", "describe", "ns/kube-system", "-n", "team-a"},
                         {"kubectl", "describe", "ns,pods", "team-a", "-n", "kube-system"}}) {
    EXPECT_FALSE(CheckNamespaceScope(Command(argv), team_a).ok()) << argv[2] << " " << argv[3];
    EXPECT_FALSE(CheckNamespaceScope(Command(argv), std::nullopt).ok())
        << "before namespaces are chosen: " << argv[2] << " " << argv[3];
  }
  EXPECT_TRUE(CheckNamespaceScope(Command({"kubectl", "describe", "namespaces"}),
                                  Scope(std::vector<std::string>{"*"}))
                  .ok());
}

// cluster-info prints the API server's address and the cluster's own add-on Services: a
// fact about the cluster, allowed whatever the scope.
TEST(NamespaceScope, ClusterInfoIsAClusterScopedRead) {
  for (const Scope& scope : {Scope(), Scope(std::vector<std::string>{}),
                             Scope(std::vector<std::string>{"default"})}) {
    EXPECT_TRUE(CheckNamespaceScope(Command({"kubectl", "cluster-info"}), scope).ok());
    EXPECT_TRUE(
        CheckNamespaceScope(Command({"kubectl", "cluster-info", "-n", "ml"}), scope).ok());
  }
}

TEST(NamespaceScope, ALongScopeIsListedShortly) {
  Scope many = std::vector<std::string>(40, std::string(63, 'n'));
  Status status = CheckNamespaceScope(Command({"kubectl", "get", "pods", "-n", "x"}), many);
  EXPECT_THAT(status.message(), HasSubstr("and 35 more"));
  EXPECT_LT(status.message().size(), 400u);
}

TEST(GuardHostileInput, BoundsAreExactlyAtTheLimits) {
  Argv longest = {"kubectl", "get", "pods", "-l", "a=" + std::string(kMaxArgumentBytes - 2, 'b')};
  EXPECT_TRUE(CheckKubectlArgv(longest).ok());
  longest.back() += "b";
  EXPECT_THAT(CheckKubectlArgv(longest).status().message(), HasSubstr("longer than 4096"));

  Argv widest = {"kubectl", "get", "pods"};
  while (widest.size() < kMaxArguments) widest.push_back("name-" + std::to_string(widest.size()));
  EXPECT_TRUE(CheckKubectlArgv(widest).ok());
  widest.push_back("one-more");
  EXPECT_THAT(CheckKubectlArgv(widest).status().message(), HasSubstr("more than 64"));
}

TEST(GuardHostileInput, EveryByteOutsidePrintableAsciiIsRefusedWherever) {
  for (int byte = 0; byte < 256; ++byte) {
    const bool printable = byte >= 0x20 && byte < 0x7f;
    if (printable) continue;
    for (size_t at = 0; at < 4; ++at) {
      Argv argv = {"kubectl", "get", "pods", "-lapp=web"};
      argv[at].insert(argv[at].size() / 2, 1, static_cast<char>(byte));
      auto command = CheckKubectlArgv(argv);
      EXPECT_EQ(command.status().code(), StatusCode::kPermissionDenied) << byte << " at " << at;
      EXPECT_THAT(command.status().message(), HasSubstr("argument " + std::to_string(at)));
    }
  }
}

TEST(GuardHostileInput, LookalikeSpellingsAreRefused) {
  for (const Argv& argv : std::vector<Argv>{
           {"kubectl", "g\xd0\xb5t", "pods"},                  // Cyrillic e
           {"kubectl", "get", "s\xd0\xb5\x63rets"},            // Cyrillic e in secrets
           {"kubectl", "get", "pods", "\xe2\x80\x90\xe2\x80\x90raw=/api"},  // U+2010 hyphens
           {"kubectl", "get", "pods", "\xef\xbc\x8d\xef\xbc\x8d" "as=admin"},  // fullwidth minus
           {"kubectl", "get", "pods", "--as\xc2\xa0"},         // no-break space
           {"kubectl", "get", "pods", "--\xc0\xad"},           // overlong '-'
           {"kubectl\xe2\x80\x8b", "get", "pods"},             // zero-width space
       }) {
    auto command = CheckKubectlArgv(argv);
    EXPECT_EQ(command.status().code(), StatusCode::kPermissionDenied);
    EXPECT_THAT(command.status().message(), HasSubstr("non-ASCII"));
  }
}

TEST(GuardHostileInput, EmptyAndForeignArgvAreRefused) {
  EXPECT_THAT(CheckKubectlArgv({}).status().message(), HasSubstr("empty"));
  EXPECT_THAT(CheckKubectlArgv({""}).status().message(), HasSubstr("is not kubectl"));
  EXPECT_THAT(CheckKubectlArgv({"kubectl"}).status().message(), HasSubstr("no kubectl command"));
  EXPECT_FALSE(CheckKubectlArgv({"kubectl", ""}).ok());
  EXPECT_FALSE(CheckKubectlArgv({"kubectl", "get", ""}).ok());
  EXPECT_FALSE(CheckKubectlArgv({"kubectl", "-"}).ok());
  EXPECT_FALSE(CheckKubectlArgv({"kubectl", "get", "-"}).ok());
  EXPECT_FALSE(CheckKubectlArgv({"kubectl", "get", "pods", "-"}).ok());
}

TEST(GuardHostileInput, ReasonsQuoteUserTextShortly) {
  auto command = CheckKubectlArgv({"kubectl", std::string(4000, 'z')});
  ASSERT_FALSE(command.ok());
  EXPECT_LT(command.status().message().size(), 240u);
  auto flag = CheckKubectlArgv({"kubectl", "get", "pods", "--" + std::string(4000, 'q')});
  ASSERT_FALSE(flag.ok());
  EXPECT_LT(flag.status().message().size(), 200u);
  for (const std::string& output : {std::string(2000, 't') + "template" + std::string(2000, 't'),
                                    std::string(4000, 'f') + "file=x",
                                    std::string(4000, 'o')}) {
    auto refused = CheckKubectlArgv({"kubectl", "get", "pods", "-o", output});
    ASSERT_FALSE(refused.ok());
    EXPECT_LT(refused.status().message().size(), 240u) << refused.status().message();
  }
}

}  // namespace
}  // namespace uplink::kubectl
