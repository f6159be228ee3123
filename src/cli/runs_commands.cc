// `uplink runs list|show`: a connection's experiment runs (docs/cli.md, docs/api.md
// "Experiment runs").
#include <algorithm>
#include <charconv>
#include <cmath>

#include "cli/commands.h"
#include "cli/connections.h"
#include "cli/render.h"
#include "common/text.h"
#include "net/http.h"

namespace uplink::cli {
namespace {

Result<std::string> NumberFlag(const Invocation& inv, std::string_view flag, int min, int max) {
  std::string value = inv.line.Get(flag);
  if (!ParseDecimalInt(value, min, max)) {
    return InvalidArgumentError("--" + std::string(flag) + " takes a number from " +
                                std::to_string(min) + " to " + std::to_string(max));
  }
  return value;
}

// A metric value as people write it ("0.2490137943429832", "NaN"): the shortest text that
// reads back as the same number, not JSON's exponent form.
std::string MetricValue(const json::object& metric) {
  const json::value* value = metric.if_contains("value");
  if (value == nullptr || !value->is_number()) return Display(metric, "value", 16);
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof text, value->to_number<double>());
  return ec == std::errc() ? std::string(text, end) : Display(metric, "value");
}

// "1h 02m", "45s": a run's duration for people.
std::string Duration(const json::object& run) {
  const json::value* seconds = run.if_contains("duration_seconds");
  if (seconds == nullptr || !seconds->is_number()) return "-";
  double total = seconds->to_number<double>();
  if (!std::isfinite(total) || total < 0) return "-";
  auto whole = static_cast<std::int64_t>(total);
  char text[32];
  if (whole >= 3600) {
    std::snprintf(text, sizeof text, "%lldh %02lldm", static_cast<long long>(whole / 3600),
                  static_cast<long long>(whole / 60 % 60));
  } else if (whole >= 60) {
    std::snprintf(text, sizeof text, "%lldm %02llds", static_cast<long long>(whole / 60),
                  static_cast<long long>(whole % 60));
  } else {
    std::snprintf(text, sizeof text, total < 10 ? "%.2fs" : "%.0fs", total);
  }
  return text;
}

// The status, with what a person needs to read it right: "offline" for a W&B offline run,
// and the exit code of a failed one.
std::string StatusText(const json::object& run) {
  std::string text = Display(run, "status", 16);
  const json::value* code = run.if_contains("exit_code");
  if (code != nullptr && code->is_int64() && code->get_int64() != 0) {
    text += " (exit " + std::to_string(code->get_int64()) + ")";
  }
  const json::value* offline = run.if_contains("offline");
  if (offline != nullptr && offline->is_bool() && offline->get_bool()) text += ", offline";
  return text;
}

void PrintMap(std::ostream& out, const json::object& run, std::string_view field,
              std::string_view title) {
  const json::object* map = ObjectField(run, field);
  out << "\n" << title << ":";
  if (map == nullptr || map->empty()) {
    out << " none\n";
    return;
  }
  out << "\n";
  Table table({"KEY", "VALUE"});
  for (const auto& entry : *map) {
    const json::value key(entry.key());
    table.AddRow({Display(&key, 60), Display(&entry.value(), 100)});
  }
  table.Render(out);
}

}  // namespace

Status RunRunsList(Invocation& inv) {
  std::string query = "?limit=";
  if (inv.line.Has("limit")) {
    UPLINK_ASSIGN_OR_RETURN(std::string limit, NumberFlag(inv, "limit", 1, 500));
    query += limit;
  } else {
    query += "50";
  }
  for (auto [flag, param] : {std::pair{"experiment", "experiment"}, std::pair{"status", "status"},
                             std::pair{"user", "user"}, std::pair{"since", "started_after"}}) {
    if (inv.line.Has(flag)) query += "&" + std::string(param) + "=" + net::PercentEncode(inv.line.Get(flag));
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveConnection(*session.api, inv.operand(0)));
  UPLINK_ASSIGN_OR_RETURN(json::object reply,
                          session.api->Get("/api/v1/connections/" + id + "/runs" + query));
  const json::array* runs = ArrayField(reply, "runs");
  if (runs == nullptr) {
    return InternalError("the console's reply is not the JSON object uplink expects (no \"runs\" "
                         "list)");
  }
  if (inv.json()) {
    PrintJson(inv.out, reply);
    return Status::Ok();
  }
  Table table({"RUN", "EXPERIMENT", "NAME", "STATUS", "USER", "STARTED", "DURATION", "METRICS",
               "SOURCE"});
  const json::object empty;
  for (const json::value& item : *runs) {
    const json::object& run = item.is_object() ? item.get_object() : empty;
    table.AddRow({Display(run, "run_id", 40), Display(run, "experiment", 40),
                  Display(run, "name", 40), StatusText(run), Display(run, "user", 24),
                  Display(run, "started_at", 24), Duration(run), Display(run, "metric_count"),
                  Display(run, "source", 8)});
  }
  if (table.rows() == 0) {
    inv.out << "No runs" << (query.find('&') != std::string::npos ? " match" : " yet")
            << ": the experiments agent reports MLflow and W&B runs once it is installed "
               "(helm value config.enableMlflow / config.enableWandb).\n";
  } else {
    table.Render(inv.out);
  }
  if (Display(reply, "next_after") != "-") {
    inv.out << "More runs: narrow the list (--experiment, --status, --user, --since) or raise "
               "--limit.\n";
  }
  const json::array* problems = ArrayField(reply, "problems");
  if (problems != nullptr && !problems->empty()) {
    inv.out << "\nProblems the agent reported (" << problems->size()
            << "): these were skipped until they change\n";
    Table list({"SOURCE", "WHERE", "ERROR", "REPORTED"});
    for (const json::value& item : *problems) {
      const json::object& problem = item.is_object() ? item.get_object() : empty;
      list.AddRow({Display(problem, "source", 8), Display(problem, "location", 60),
                   Display(problem, "error", 100), Display(problem, "reported_at", 24)});
    }
    list.Render(inv.out);
  }
  return Status::Ok();
}

Status RunRunsShow(Invocation& inv) {
  std::string query = inv.json() ? "?points=" : "?history=false";
  if (inv.json()) {
    if (inv.line.Has("points")) {
      UPLINK_ASSIGN_OR_RETURN(std::string points, NumberFlag(inv, "points", 2, 10'000));
      query += points;
    } else {
      query += "500";
    }
    if (inv.line.Has("metric")) query += "&metrics=" + net::PercentEncode(inv.line.Get("metric"));
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveConnection(*session.api, inv.operand(0)));
  UPLINK_ASSIGN_OR_RETURN(json::object run,
                          session.api->Get("/api/v1/connections/" + id + "/runs/" +
                                           net::PercentEncode(inv.operand(1)) + query));
  if (inv.json()) {
    PrintJson(inv.out, run);
    return Status::Ok();
  }
  Fields fields;
  fields.Add("run", Display(run, "run_id"));
  fields.Add("name", Display(run, "name"));
  fields.Add("experiment", Display(run, "experiment") + " (id " + Display(run, "experiment_id") + ")");
  fields.Add("status", StatusText(run));
  fields.Add("user", Display(run, "user"));
  fields.Add("started", Display(run, "started_at"));
  fields.Add("ended", Display(run, "ended_at"));
  fields.Add("duration", Duration(run));
  fields.Add("source", Display(run, "source") + " " + Display(run, "location", 200));
  fields.Add("last update", Display(run, "updated_at"));
  const json::array* redacted = ArrayField(run, "redacted");
  if (redacted != nullptr && !redacted->empty()) {
    std::string names;
    for (const json::value& name : *redacted) {
      if (!names.empty()) names += ", ";
      names += Display(&name, 80);
    }
    fields.Add("redacted", names + " (removed by the agent: they look like credentials)");
  }
  fields.Render(inv.out);
  PrintMap(inv.out, run, "params", "Params");
  PrintMap(inv.out, run, "tags", "Tags");
  const json::array* metrics = ArrayField(run, "metrics");
  inv.out << "\nMetrics (latest):";
  if (metrics == nullptr || metrics->empty()) {
    inv.out << " none\n";
    return Status::Ok();
  }
  inv.out << "\n";
  Table table({"KEY", "STEP", "VALUE", "POINTS"});
  const json::object empty;
  for (const json::value& item : *metrics) {
    const json::object& metric = item.is_object() ? item.get_object() : empty;
    table.AddRow({Display(metric, "key", 60), Display(metric, "step"), MetricValue(metric),
                  Display(metric, "points")});
  }
  table.Render(inv.out);
  return Status::Ok();
}

}  // namespace uplink::cli
