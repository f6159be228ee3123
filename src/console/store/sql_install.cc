// SqlStore's install plans (docs/api.md, "Install commands"): what each connection's
// install commands were last generated with.

#include "console/store/sql_statement.h"
#include "console/store/sql_store.h"

namespace uplink::console {

Result<std::optional<InstallPlan>> SqlStore::GetInstallPlan(const std::string& connection_id) {
  std::optional<InstallPlan> plan;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      "SELECT kubernetes, gpu_runtime_class, selector, updated_at FROM install_plans "
      "WHERE connection_id = ?",
      [&](Statement& s) { s.Bind(connection_id); },
      [&](const Statement& row) {
        plan = InstallPlan{row.Int(0) != 0, row.Text(1), row.Text(2), row.Time(3)};
      },
      "reading install plan"));
  return plan;
}

Status SqlStore::SetInstallPlan(const std::string& connection_id, const InstallPlan& plan,
                                   const AuditEvent& audit) {
  return WriteTransaction(
      [&]() -> Status {
        auto written = Change(
            "INSERT INTO install_plans (connection_id, kubernetes, gpu_runtime_class, selector, "
            "updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (connection_id) DO UPDATE SET "
            "kubernetes = excluded.kubernetes, gpu_runtime_class = excluded.gpu_runtime_class, "
            "selector = excluded.selector, updated_at = excluded.updated_at",
            [&](Statement& s) {
              s.Bind(connection_id).Bind(plan.kubernetes).Bind(plan.gpu_runtime_class);
              s.Bind(plan.selector).Bind(plan.updated_at);
            },
            "setting install plan");
        if (!written.ok() && db_->LastFailure() == sql::Failure::kForeignKey) {
          return NotFoundError("connection " + connection_id + " does not exist");
        }
        UPLINK_RETURN_IF_ERROR(written.status());
        return InsertAudit(audit);
      },
      CredentialCache::kKeep);
}

}  // namespace uplink::console
