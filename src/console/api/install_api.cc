#include "console/api/install_api.h"

#include "console/api/api_objects.h"
#include "console/api/chart_repository.h"
#include "console/api/install_plan.h"
#include "console/api/json_fields.h"
#include "console/replies.h"

namespace uplink::console {
namespace {

net::Response ChartFileResponse(const net::Request& request, std::string_view content_type,
                                std::string body) {
  net::Response response;
  response.headers.Set("Content-Type", content_type);
  // A new console build may carry another chart under the same name: revalidate.
  response.headers.Set("Cache-Control", "no-cache");
  response.headers.Set("X-Content-Type-Options", "nosniff");
  if (request.method != "HEAD") response.body = std::move(body);
  return response;
}

}  // namespace

InstallApi::InstallApi(const ApiContext& context)
    : ApiArea(context), started_at_(context.clock.Now()) {}

void InstallApi::Register(Routes& routes) {
  routes.UserRoute("POST", "/api/v1/connections/{id}/install", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return GenerateInstall(params.at("id"), request, caller);
                   });
  routes.Route("GET", std::string(kChartRepositoryPath) + "/{file}",
               [this](const net::Request& request, const net::PathParams& params) {
                 return ServeChart(request, params.at("file"));
               });
}

net::Response InstallApi::ServeChart(const net::Request& request, std::string_view file) {
  const Result<ChartPackage>& chart = AgentChart();
  if (!chart.ok()) {
    log_.Error("the embedded agent chart cannot be read", {{"error", chart.status()}});
    return ErrorResponse(InternalError("the agent chart is missing from this console build"));
  }
  if (file == "index.yaml") {
    return ChartFileResponse(request, "application/yaml; charset=utf-8",
                             RepositoryIndex(*chart, started_at_));
  }
  if (file == chart->FileName()) {
    return ChartFileResponse(request, "application/gzip", std::string(chart->archive));
  }
  return ErrorResponse(404, "not_found",
                       "this chart repository holds " + chart->FileName() + " only; its index is " +
                           std::string(kChartRepositoryPath) + "/index.yaml");
}

Result<net::Response> InstallApi::GenerateInstall(const std::string& id,
                                                  const net::Request& request,
                                                  const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OwnedConnection(id, caller));
  if (connection.revoked_at) {
    return FailedPreconditionError(
        "this connection was revoked: its agent cannot be installed; create a new connection");
  }
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  UPLINK_ASSIGN_OR_RETURN(InstallRequest install, ParseInstallRequest(body));
  const Result<ChartPackage>& chart = AgentChart();
  UPLINK_RETURN_IF_ERROR(chart.status());

  // The plan is kept (and audited) when it changes, so that the connection shows the selector
  // the install asked for beside the one its agent reports.
  UPLINK_ASSIGN_OR_RETURN(std::optional<InstallPlan> previous,
                          store_.GetInstallPlan(connection.id));
  InstallPlan& plan = install.plan;
  std::optional<WallTime> kept_at;  // when the plan replied with was kept; none for a preview
  if (previous && previous->SameChoice(plan)) {
    kept_at = plan.updated_at = previous->updated_at;
  } else if (!install.preview) {
    plan.updated_at = clock_.Now();
    json::object detail = InstallPlanJson(plan);
    detail.erase("updated_at");
    if (previous) detail["previous_selector"] = previous->selector;
    UPLINK_RETURN_IF_ERROR(store_.SetInstallPlan(
        connection.id, plan,
        CallerEvent(caller, plan.updated_at, "connection.install_plan", "connection", connection.id,
                    connection.owner_id, detail)));
    log_.Info("install plan set", {{"connection_id", connection.id},
                                   {"user_id", caller.user.id},
                                   {"kubernetes", plan.kubernetes}});
    kept_at = plan.updated_at;
  }
  json::object plan_json = InstallPlanJson(plan);
  plan_json["updated_at"] = kept_at ? json::value(FormatRfc3339(*kept_at)) : json::value(nullptr);

  InstallCommands commands = RenderInstallCommands(install, *chart, options_.agent_images);
  json::array helm(commands.helm.begin(), commands.helm.end());
  json::array warnings;
  for (const InstallWarning& warning : commands.warnings) {
    warnings.push_back(json::object{{"code", warning.code}, {"message", warning.message}});
  }
  auto image = [](const std::optional<ImageReference>& reference) {
    return reference ? json::value(reference->ToString()) : json::value(nullptr);
  };
  return JsonResponse(200,
                      {{"connection_id", connection.id},
                       {"install", std::move(plan_json)},
                       {"namespace", install.target.namespace_name},
                       {"secret_name", install.target.secret_name},
                       {"console_url", install.target.console_url},
                       {"chart", json::object{{"name", chart->name},
                                              {"version", chart->version},
                                              {"app_version", chart->app_version},
                                              {"repository", commands.repository_url},
                                              {"digest", "sha256:" + chart->digest}}},
                       {"images", json::object{{"agent", image(options_.agent_images.agent)},
                                               {"cluster", image(options_.agent_images.cluster)}}},
                       {"helm_commands", std::move(helm)},
                       {"warnings", std::move(warnings)}});
}

}  // namespace uplink::console
