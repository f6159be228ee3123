// Which commands an approval rule matches (console/api/approvals.h): a table of rules and the
// argv they match and do not match, each argv parsed by the real guard.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/json.h"
#include "console/api/approvals.h"
#include "kubectl/guard.h"

namespace uplink::console {
namespace {

ApprovalRule Rule(const std::string& verb, const std::string& resource,
                  const std::string& namespace_name) {
  return ApprovalRule{.id = "r1", .verb = verb, .resource = resource,
                      .namespace_name = namespace_name};
}

kubectl::KubectlCommand Parsed(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"kubectl"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto command = kubectl::CheckKubectlArgv(argv);
  EXPECT_TRUE(command.ok()) << command.status().ToString();
  return command.value_or(kubectl::KubectlCommand{});
}

std::string Line(const std::vector<std::string>& args) {
  std::string line;
  for (const std::string& arg : args) line += " " + arg;
  return line;
}

struct Case {
  ApprovalRule rule;
  std::vector<std::vector<std::string>> matches;
  std::vector<std::vector<std::string>> misses;
};

TEST(ApprovalRules, EachFieldIsAValueOrAStarAndEveryFieldMustMatch) {
  const std::vector<Case> cases = {
      {Rule("*", "*", "*"),
       {{"get", "nodes"}, {"version"}, {"logs", "p"}, {"explain", "pods", "--recursive"}},
       {}},
      {Rule("get", "pods", "ml"),
       {{"get", "pods", "-n", "ml"},
        {"get", "po", "--namespace=ml"},
        {"-nml", "get", "pod/x"},
        {"get", "pods,nodes", "-n", "ml"},
        {"get", "pods", "-A"},
        {"get", "all", "-n", "ml"}},
       {{"get", "pods", "-n", "dev"},
        {"get", "pods"},
        {"describe", "pods", "-n", "ml"},
        {"get", "deployments", "-n", "ml"},
        {"get", "nodes"}}},
      // Pods' usage read as objects too, as `top pods` reads it.
      {Rule("*", "pods", "*"),
       {{"top", "pods", "-n", "x"},
        {"logs", "p"},
        {"describe", "node", "n1"},
        {"get", "po"},
        {"get", "podmetrics", "-n", "x"}},
       {{"top", "nodes"}, {"get", "svc"}, {"api-resources"}}},
      {Rule("logs", "*", "default"),
       {{"logs", "p"}, {"logs", "deploy/web", "-n", "default"}},
       {{"logs", "p", "-n", "kube-system"}, {"get", "pods"}}},
      {Rule("*", "*", "kube-system"),
       {{"get", "pods", "-n", "kube-system"}, {"describe", "nodes"}, {"top", "pods", "-A"}},
       {{"get", "nodes"}, {"cluster-info"}, {"version"}, {"get", "pods"}}},
      {Rule("*", "nodes", "*"),
       {{"get", "nodes"},
        {"get", "no", "-o", "wide"},
        {"top", "node"},
        {"describe", "node", "x"},
        {"get", "nodes.metrics.k8s.io"}},
       {{"get", "pods", "-A"}}},
      {Rule("get", "deployments.apps", "*"),
       {{"get", "deploy"}, {"get", "Deployment.v1.apps", "-A"}, {"get", "all"}},
       {{"logs", "deploy/web"}, {"get", "rs"}}},
      {Rule("top", "*", "*"), {{"top", "nodes"}, {"top", "pods"}}, {{"get", "pods"}}},
      {Rule("explain", "*", "*"), {{"explain", "pods"}}, {{"get", "pods"}}},
  };
  for (const Case& c : cases) {
    const std::string rule = DescribeRule(c.rule);
    for (const auto& args : c.matches) {
      EXPECT_TRUE(RuleMatches(c.rule, Parsed(args))) << rule << " should match" << Line(args);
    }
    for (const auto& args : c.misses) {
      EXPECT_FALSE(RuleMatches(c.rule, Parsed(args))) << rule << " should not match" << Line(args);
    }
  }
}

TEST(ApprovalRules, TheFirstMatchingRuleIsNamed) {
  std::vector<ApprovalRule> rules = {Rule("logs", "*", "*"), Rule("*", "pods", "*")};
  rules[1].id = "r2";
  EXPECT_EQ(FirstMatchingRule(rules, Parsed({"logs", "p"}))->id, "r1");
  EXPECT_EQ(FirstMatchingRule(rules, Parsed({"get", "pods"}))->id, "r2");
  EXPECT_EQ(FirstMatchingRule(rules, Parsed({"get", "nodes"})), nullptr);
  EXPECT_EQ(FirstMatchingRule({}, Parsed({"get", "pods"})), nullptr);
}

TEST(ApprovalRules, ARuleIsReadWithDefaultsAndItsResourceCanonicalised) {
  auto everything = ParseApprovalRule(json::object{});
  ASSERT_TRUE(everything.ok());
  EXPECT_EQ(everything->verb, "*");
  EXPECT_EQ(everything->resource, "*");
  EXPECT_EQ(everything->namespace_name, "*");
  auto pods = ParseApprovalRule(json::object{{"resource", "PO"}, {"namespace", "ml"}});
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  EXPECT_EQ(pods->resource, "pods");
  EXPECT_EQ(DescribeRule(*pods), "any command on pods in namespace ml");
  auto hpa = ParseApprovalRule(json::object{{"verb", "describe"}, {"resource", "hpa"}});
  ASSERT_TRUE(hpa.ok());
  EXPECT_EQ(hpa->resource, "horizontalpodautoscalers.autoscaling");
}

}  // namespace
}  // namespace uplink::console
