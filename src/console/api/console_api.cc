#include "console/api/console_api.h"

namespace uplink::console {

ConsoleApi::ConsoleApi(Store& store, const Clock& clock, ConsoleOptions options)
    : options_(std::move(options)),
      hasher_(options_.password_hashing),
      guard_(clock, options_.rate_limits, metrics_),
      auth_(store, clock, guard_),
      presence_(metrics_),
      context_{store, clock, options_, metrics_, guard_, hasher_, presence_},
      routes_(context_, auth_, router_),
      outcomes_(options_, metrics_),
      operations_(context_),
      two_factor_(context_),
      accounts_(context_, two_factor_),
      web_(context_, accounts_),
      connections_(context_),
      install_(context_),
      nodes_(context_),
      runs_(context_),
      approvals_(context_, commands_, outcomes_),
      kubectl_(context_, commands_, outcomes_, approvals_),
      agent_(context_, nodes_, kubectl_, runs_),
      offers_(context_, signals_),
      ssh_relay_(store, clock, metrics_,
                 LocalSshRelayOptions{
                     .channels_per_grant = options_.ssh_channels_per_grant,
                     .channels_per_reservation = options_.ssh_channels_per_reservation,
                     .idle_timeout = options_.ssh_idle_timeout}),
      reservations_(context_, signals_, ssh_relay_),
      workspace_agent_(context_, signals_, reservations_),
      ssh_(context_, workspace_agent_, reservations_, ssh_relay_),
      signals_(clock),
      commands_(clock, CommandBrokerOptions{.give_up_after = options_.command_timeout}) {
  operations_.Register(routes_);
  accounts_.Register(routes_);
  two_factor_.Register(routes_);
  web_.Register(routes_);
  connections_.Register(routes_);
  install_.Register(routes_);
  nodes_.Register(routes_);
  runs_.Register(routes_);
  approvals_.Register(routes_);
  kubectl_.Register(routes_);
  agent_.Register(routes_);
  offers_.Register(routes_);
  reservations_.Register(routes_);
  workspace_agent_.Register(routes_);
  ssh_.Register(routes_);
  routes_.SetFallbacks();
  operations_.AddToScrape([this] { return connections_.Scrape(); });
  operations_.AddToScrape([this] { return kubectl_.Scrape(); });
  operations_.AddToScrape([&store] {
    std::string text;
    store.RenderMetrics(text);
    return text;
  });
  if (options_.upload_sink != nullptr) {
    operations_.AddToScrape([this] {
      std::string text;
      options_.upload_sink->RenderMetrics(text);
      return text;
    });
  }
  if (options_.replica_bus != nullptr) {
    ReplicaBus& bus = *options_.replica_bus;
    guard_.JoinReplicas(bus);
    replica_commands_ =
        std::make_unique<ReplicaCommands>(bus, *options_.command_claims, commands_, clock);
    operations_.AddToScrape([&bus] {
      std::string text;
      bus.RenderMetrics(text);
      return text;
    });
  }
  commands_.StartReaper();
  signals_.StartReaper();
  presence_.StartFlusher(store, options_.presence_flush_interval);
  approvals_.Start();
  ssh_relay_.StartSweeper();
}

ConsoleApi::~ConsoleApi() {
  // The sign-ins under way finish, and those queued go, while the areas they call exist.
  hasher_.StopWorkers();
  // The sweeper first; then the broker (the last member) ends the commands still waiting.
  approvals_.Stop();
  ssh_relay_.StopSweeper();
  // No more messages from the other replicas before the broker ends what still waits.
  if (replica_commands_) replica_commands_->Leave();
}

}  // namespace uplink::console
