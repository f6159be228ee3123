// Workspace execution end to end with every real part: uplink-console serve, the inventory
// agent and `uplink-agent workspace` against uplink-kubesim (--runtime process: each workspace
// a local process) with the guards the chart renders from the console's own execution.json,
// and the `uplink` CLI. An offer made, reported, reviewed and given its execution credential
// as a supplier and an admin would; a reservation whose pod runs, its commands through the API
// and through `uplink run`, its stop, and the refusals a user meets on the way.
//
// What the process runtime guarantees and what it does not: the pod's spec, phase, node and
// deletion are Kubernetes' (kubesim's), and commands really run in the workspace's directory
// with their output and exit codes; but a process runs as whoever runs kubesim, so `id -u`
// prints the test's own UID here. UID 1000, the read-only root, no token and no network are
// the podman runtime's: the same flow on it is workspace_podman_e2e_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include "workspace_flow.h"

namespace uplink::e2e {
namespace {

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

class WorkspaceEndToEnd : public WorkspaceFlow {
 protected:
  // The console pins it and the chart's admission policy admits only it; the process runtime
  // runs no image, so its digest need name nothing pulled.
  void SetUp() override {
    StartWith("process", "localhost/uplink-workspace@sha256:" + std::string(64, 'c'));
  }
};

TEST_F(WorkspaceEndToEnd, OfferToReservationToCommandsToStopWithTheRealConsoleAndController) {
  Qualified qualified;
  ASSERT_NO_FATAL_FAILURE(QualifyAndStartController(&qualified));
  std::string id, pod;
  ASSERT_NO_FATAL_FAILURE(ReserveUntilRunning(qualified.offer_id, 2, &id, &pod));

  // Commands through the API: the process runtime runs them as the test's own user.
  const std::string uid = std::to_string(::getuid()) + "\n";
  json::value id_u = RunCommand(id, "shell", "id -u");
  EXPECT_EQ(String(id_u, "state"), "exited") << ToJson(id_u);
  EXPECT_EQ(id_u.at("exit_code").as_int64(), 0);
  EXPECT_EQ(String(id_u, "output"), uid);
  json::value shell = RunCommand(id, "shell", "echo out; echo err >&2; exit 3");
  EXPECT_EQ(String(shell, "state"), "exited") << ToJson(shell);
  EXPECT_EQ(shell.at("exit_code").as_int64(), 3);
  EXPECT_EQ(String(shell, "output"), "out\nerr\n");
  json::value python = RunCommand(id, "python", "import sys\nprint(6 * 7)\nsys.exit(4)\n");
  EXPECT_EQ(String(python, "state"), "exited") << ToJson(python);
  EXPECT_EQ(python.at("exit_code").as_int64(), 4);
  EXPECT_EQ(String(python, "output"), "42\n");

  // Through `uplink run`: the output streamed, the command's exit code uplink's.
  const std::map<std::string, std::string> admin{{"UPLINK_API_KEY", d_.admin_key()}};
  testing::CommandResult run_id = d_.Uplink({"run", id, "--", "id", "-u"}, admin);
  EXPECT_EQ(run_id.exit_code, 0) << run_id.err;
  EXPECT_EQ(run_id.out, uid);
  testing::CommandResult run_shell = d_.Uplink({"run", id, "--", "echo", "hi;", "exit", "7"}, admin);
  EXPECT_EQ(run_shell.exit_code, 7) << run_shell.err;
  EXPECT_EQ(run_shell.out, "hi\n");
  testing::CommandResult run_python =
      d_.Uplink({"run", id, "--python", "--", "import sys; print('py'); sys.exit(5)"}, admin);
  EXPECT_EQ(run_python.exit_code, 5) << run_python.err;
  EXPECT_EQ(run_python.out, "py\n");

  StopUntilCompleted(id, pod);
}

TEST_F(WorkspaceEndToEnd, RefusesAnUnqualifiedOfferAndMoreThanAnyApprovedNodeHasRoom) {
  auto [offer_id, token] = ConnectedOffer(8);
  ASSERT_FALSE(offer_id.empty());
  net::Response connected = Reserve(offer_id, 1);
  EXPECT_EQ(connected.status, 409) << connected.body;
  EXPECT_TRUE(Contains(connected.body, "is connected, not qualified: it cannot be reserved until "
                                       "an admin qualifies it"))
      << connected.body;

  // One check not confirmed: in review, still not reservable.
  net::Response in_review = Review(offer_id, false);
  ASSERT_EQ(in_review.status, 200) << in_review.body;
  EXPECT_EQ(String(ParseJson(in_review.body).value(), "state"), "in_review");
  net::Response refused = Reserve(offer_id, 1);
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_TRUE(Contains(refused.body, "is in_review, not qualified")) << refused.body;

  // Qualified, with one approved node of 4 GPUs under a capacity of 8.
  ASSERT_EQ(Review(offer_id, true).status, 200);
  ASSERT_EQ(d_.Api("POST", "/api/v1/offers/" + offer_id + "/execution", "{}").status, 201);
  ASSERT_EQ(Reserve(offer_id, 3).status, 201);
  net::Response too_large = Reserve(offer_id, 5);
  EXPECT_EQ(too_large.status, 409) << too_large.body;
  EXPECT_TRUE(Contains(too_large.body, "that is ready has 5 GPUs free (the most free on one node "
                                       "is 1); ask for fewer GPUs or try later"))
      << too_large.body;
  net::Response over_capacity = Reserve(offer_id, 6);
  EXPECT_EQ(over_capacity.status, 409) << over_capacity.body;
  EXPECT_TRUE(Contains(over_capacity.body, "at most 5 GPUs can be reserved now")) << over_capacity.body;
  json::value list = d_.ApiJson("GET", "/api/v1/reservations");
  EXPECT_EQ(list.at("reservations").as_array().size(), 1u) << "a refusal reserves nothing";
}

}  // namespace
}  // namespace uplink::e2e
