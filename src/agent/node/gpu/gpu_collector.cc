#include "agent/node/gpu/gpu_collector.h"

#include <cstdlib>
#include <utility>

#include "common/log.h"
#include "common/subprocess.h"
#include "common/thread_name.h"
#include "common/time.h"

namespace uplink::agent::node {
namespace {

const log::Logger& Log() {
  static const log::Logger logger("agent.node.gpu");
  return logger;
}

// `first`, then each of `rest`, separated by `separator`; empty parts are skipped.
std::string Join(std::string first, const std::vector<std::string>& rest,
                 std::string_view separator = "; ") {
  for (const std::string& item : rest) {
    if (!first.empty() && !item.empty()) first += separator;
    first += item;
  }
  return first;
}

}  // namespace

// What the collector thread and the NVML thread share. The NVML thread holds it too, so a
// thread left behind on a hung call never outlives what it touches.
class NvmlWorker final : public NvmlCallObserver {
 public:
  using SteadyClock = std::chrono::steady_clock;

  bool BeforeCall(const char* function, std::optional<unsigned> gpu) override {
    std::lock_guard lock(mutex);
    if (abandoned || stop) return false;
    call = function;
    call_gpu = gpu;
    in_call = true;
    progress_at = SteadyClock::now();
    changed.notify_all();
    return true;
  }

  void AfterCall() override {
    std::lock_guard lock(mutex);
    in_call = false;
    progress_at = SteadyClock::now();
  }

  std::mutex mutex;
  std::condition_variable changed;
  bool read_requested = false;
  bool stop = false;       // the collector is gone: end the thread
  bool abandoned = false;  // the watchdog gave up on the current read
  bool busy = false;       // a read was requested and has not ended
  bool exited = false;
  bool in_call = false;
  const char* call = nullptr;
  std::optional<unsigned> call_gpu;
  SteadyClock::time_point progress_at;
  std::optional<Result<GpuReading>> outcome;
};

namespace {

// Opens the library on the first read. One that could not be opened is tried again on the
// next: the driver may be installed or loaded after the agent started.
Result<GpuReading> ReadNvml(std::unique_ptr<NvmlLibrary>& library, const std::string& path,
                            NvmlWorker& worker) {
  if (library == nullptr) {
    UPLINK_ASSIGN_OR_RETURN(library, NvmlLibrary::Open(path, worker));
    if (!library->missing_functions().empty()) {
      Log().Info("NVML lacks some functions; their figures stay absent",
                 {{"missing", Join("", library->missing_functions(), ", ")}});
    }
  }
  return library->Read(worker);
}

// The NVML thread: one read per request, until told to stop. The library is opened here
// and closed here, so every NVML call, nvmlInit_v2 and nvmlShutdown included, runs on
// this thread.
void RunNvmlThread(std::shared_ptr<NvmlWorker> worker, std::string path) {
  NameThisThread("nvml");
  std::unique_ptr<NvmlLibrary> library;
  while (true) {
    {
      std::unique_lock lock(worker->mutex);
      worker->changed.wait(lock, [&] { return worker->read_requested || worker->stop; });
      if (worker->stop) break;
      worker->read_requested = false;
    }
    Result<GpuReading> outcome = ReadNvml(library, path, *worker);
    std::lock_guard lock(worker->mutex);
    worker->outcome = std::move(outcome);
    worker->busy = false;
    worker->in_call = false;
    worker->changed.notify_all();
  }
  library.reset();
  std::lock_guard lock(worker->mutex);
  worker->exited = true;
  worker->changed.notify_all();
}

}  // namespace

GpuCollector::GpuCollector(GpuCollectorOptions options)
    : options_(std::move(options)),
      path_env_(std::getenv("PATH") != nullptr ? std::getenv("PATH") : ""),
      worker_(std::make_shared<NvmlWorker>()) {
  report_.healthy = false;
  report_.error = "GPU data not read yet";
  worker_thread_ = std::thread(RunNvmlThread, worker_, options_.nvml_path);
  thread_ = std::thread([this] {
    NameThisThread("gpu-reader");
    Run();
  });
}

GpuCollector::~GpuCollector() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  // Bounded: a read in flight ends or is given up on within call_timeout, and nvidia-smi
  // is killed when stopping_ is seen.
  thread_.join();

  std::unique_lock lock(worker_->mutex);
  worker_->stop = true;
  worker_->changed.notify_all();
  // An idle NVML thread ends at once (after nvmlShutdown, itself given call_timeout); a hung
  // one is left behind.
  bool ended = !worker_->busy && worker_->changed.wait_for(lock, options_.call_timeout,
                                                           [&] { return worker_->exited; });
  lock.unlock();
  if (ended) {
    worker_thread_.join();
  } else {
    // Not busy means it was in nvmlShutdown, the one call it makes after being told to stop.
    Log().Warn("leaving the NVML thread behind: an NVML call has not returned",
               {{"call", hang_message_.empty() ? std::string("nvmlShutdown") : hang_message_}});
    worker_thread_.detach();
  }
}

GpuReport GpuCollector::Latest() const {
  std::lock_guard lock(mutex_);
  return report_;
}

std::uint64_t GpuCollector::cycles() const {
  std::lock_guard lock(mutex_);
  return cycles_;
}

bool GpuCollector::WaitForCycles(std::uint64_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return cycles_ >= count; });
}

void GpuCollector::Run() {
  auto next = std::chrono::steady_clock::now();
  while (true) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait_until(lock, next, [&] { return stopping_.load(); });
      if (stopping_) return;
    }
    Cycle();
    {
      std::lock_guard lock(mutex_);
      ++cycles_;
    }
    changed_.notify_all();
    // A fixed rhythm; a cycle that overran skips the ticks it missed instead of bunching.
    next += options_.interval;
    auto now = std::chrono::steady_clock::now();
    if (next <= now) next = now + options_.interval;
  }
}

GpuCollector::NvmlAttempt GpuCollector::ReadNvmlWithWatchdog() {
  std::unique_lock lock(worker_->mutex);
  if (worker_->busy) return {.hang = hang_message_};  // the call given up on has not returned
  if (nvml_hung_) {
    Log().Info("the hung NVML call returned; reading NVML again", {{"call", hang_message_}});
    nvml_hung_ = false;
    hang_message_.clear();
  }
  worker_->outcome.reset();
  worker_->abandoned = false;
  worker_->in_call = false;
  worker_->call = nullptr;
  worker_->busy = true;
  worker_->read_requested = true;
  worker_->progress_at = NvmlWorker::SteadyClock::now();
  worker_->changed.notify_all();
  while (worker_->busy) {
    auto deadline = worker_->progress_at + options_.call_timeout;
    if (NvmlWorker::SteadyClock::now() >= deadline) {
      worker_->abandoned = true;
      std::string gpu =
          worker_->call_gpu ? " on GPU " + std::to_string(*worker_->call_gpu) : std::string();
      if (worker_->in_call) {
        hang_message_ = "NVML call " + std::string(worker_->call) + gpu +
                        " did not return within " + DurationText(options_.call_timeout);
      } else {
        hang_message_ =
            "the NVML read made no progress within " + DurationText(options_.call_timeout);
      }
      nvml_hung_ = true;
      return {.hang = hang_message_, .newly_hung = true};
    }
    worker_->changed.wait_until(lock, deadline);
  }
  return {.outcome = std::move(worker_->outcome)};
}

void GpuCollector::Cycle() {
  NvmlAttempt nvml = ReadNvmlWithWatchdog();
  std::string nvml_error;
  if (nvml.outcome) {
    Result<GpuReading>& outcome = *nvml.outcome;
    if (outcome.ok()) return Publish(GpuSource::kNvml, std::move(outcome).value(), "", false);
    if (outcome.status().code() == StatusCode::kNotFound) return PublishNoGpus();
    nvml_error = "NVML unusable: " + outcome.status().message();
  } else {
    nvml_error = nvml.hang;
    // Said at once, before nvidia-smi takes its time.
    if (nvml.newly_hung) PublishStale(nvml_error);
  }

  std::optional<std::string> program = FindProgram(options_.nvidia_smi_path, path_env_);
  if (!program) return PublishStale(nvml_error + "; no nvidia-smi to fall back on");
  if (!smi_ || smi_->program() != *program) smi_.emplace(*program, options_.smi_timeout);
  Result<GpuReading> smi = smi_->Read(&stopping_);
  if (!smi.ok()) return PublishStale(nvml_error + "; nvidia-smi: " + smi.status().message());
  Publish(GpuSource::kNvidiaSmi, std::move(smi).value(), nvml_error + "; read with nvidia-smi",
          nvml_hung_);
}

void GpuCollector::Publish(GpuSource source, GpuReading reading, const std::string& note,
                           bool degraded) {
  GpuReport report;
  report.source = source;
  report.driver_version = std::move(reading.driver_version);
  report.gpus = std::move(reading.gpus);
  report.read_at = SystemClock().Now();
  report.healthy = !degraded && reading.problems.empty();
  report.error = Join(note, reading.problems);
  LogChange(report.error);
  {
    std::lock_guard lock(mutex_);
    report_ = std::move(report);
  }
}

void GpuCollector::PublishStale(const std::string& error) {
  LogChange(error);
  std::lock_guard lock(mutex_);
  report_.healthy = false;
  report_.error = error;
}

void GpuCollector::PublishNoGpus() {
  LogChange("");
  GpuReport report;
  report.read_at = SystemClock().Now();
  std::lock_guard lock(mutex_);
  report_ = std::move(report);
}

void GpuCollector::LogChange(const std::string& error) {
  if (error == last_logged_error_) return;
  if (error.empty()) {
    Log().Info("GPU data read again without problems");
  } else {
    Log().Warn("GPU data degraded", {{"error", error}});
  }
  last_logged_error_ = error;
}

}  // namespace uplink::agent::node
