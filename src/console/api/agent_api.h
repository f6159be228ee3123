// The agent's calls (docs/protocol.md): the inventory report, spool uploads and whoami. The
// connection token and cluster binding are checked by Routes::AgentRoute before these run; the
// cluster role's command poll and results are the kubectl area's (kubectl_api.h).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>

#include "console/api/api_context.h"
#include "console/api/kubectl_api.h"
#include "console/api/nodes_api.h"
#include "console/api/routes.h"
#include "console/api/runs_api.h"

namespace uplink::console {

class AgentApi : private ApiArea {
 public:
  // An upload's node samples, cluster snapshot and runs are counted by their areas, which
  // also give the plans of the upload replies; all must outlive this object.
  AgentApi(const ApiContext& context, NodesApi& nodes, KubectlApi& kubectl, RunsApi& runs);

  // Waits for the reports and uploads handed to the store (FinishStoreWrites).
  ~AgentApi();
  AgentApi(const AgentApi&) = delete;
  AgentApi& operator=(const AgentApi&) = delete;

  void Register(Routes& routes);
  // Returns once every report and upload handed to the store has been answered: after the
  // server has stopped, so that what the answers use (the remote-write forwarder) can stop
  // next.
  void FinishStoreWrites();

 private:
  using Answer = std::function<void(Result<net::Response>)>;
  // Answers through `reply` once the report is stored or refused; counts the outcome.
  void ReportInventory(const net::Request& request, const Connection& connection,
                       net::Reply reply);
  Result<net::Response> CountReport(const std::string& connection_id,
                                    const std::string& remote_address,
                                    const std::optional<std::string>& bound_cluster_uid,
                                    Result<net::Response> accepted);
  // Decodes the report on the calling thread and hands it to the store, whose writer thread
  // calls `answer`.
  void AcceptInventory(const net::Request& request, const Connection& connection,
                       Answer answer);
  Result<net::Response> WhoAmI(const Connection& connection);
  // Answers through `reply` once the upload is stored or refused; counts the outcome.
  void ReceiveUpload(const net::Request& request, const Connection& connection, net::Reply reply);
  Result<net::Response> CountUpload(const std::string& connection_id, Result<net::Response> reply);
  // Decodes the upload on the calling thread and hands it to the store, whose writer thread
  // calls `answer`, so that no HTTP thread waits for a commit.
  void AcceptUpload(const net::Request& request, const Connection& connection,
                    Answer answer);
  // The reply to a stored upload, after counting and forwarding it.
  net::Response UploadStored(const Connection& connection, const UploadBatch& batch,
                             const UploadOutcome& outcome, WallTime now);

  // Around each report and upload handed to the store, for FinishStoreWrites.
  void StartStoreWrite();
  void StoreWriteAnswered();
  // On the store's writer thread: answers a handed-over report or upload with what `build`
  // makes of its outcome, or 500 if `build` throws, and counts it answered whatever happens,
  // so that neither the agent nor FinishStoreWrites waits for an answer that never comes.
  void AnswerStoreWrite(const Answer& answer, const std::function<Result<net::Response>()>& build);

  NodesApi& nodes_;
  KubectlApi& kubectl_;
  RunsApi& runs_;
  std::mutex writes_mutex_;
  std::condition_variable writes_answered_;
  int writes_in_store_ = 0;  // handed to the store, not yet answered; under writes_mutex_
};

}  // namespace uplink::console
