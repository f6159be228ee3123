#include "agent/node/host/filesystems.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <numeric>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace uplink::agent::node {

Result<FilesystemSelector> FilesystemSelector::Create(std::string_view mount_points_exclude,
                                                      std::string_view fs_types_exclude) {
  auto mount_points = ExcludePattern::Compile(mount_points_exclude);
  if (!mount_points.ok()) return mount_points.status().WithContext("mount points exclude");
  auto fs_types = ExcludePattern::Compile(fs_types_exclude);
  if (!fs_types.ok()) return fs_types.status().WithContext("filesystem types exclude");
  return FilesystemSelector(std::move(mount_points).value(), std::move(fs_types).value());
}

std::vector<Filesystem> FilesystemSelector::Select(const std::vector<Mount>& mounts) const {
  std::vector<Filesystem> selected;
  for (const Mount& mount : mounts) {
    if (mount_points_.Excludes(mount.mount_point) || fs_types_.Excludes(mount.fstype)) continue;
    Filesystem filesystem;
    filesystem.device = mount.source;
    filesystem.mountpoint = mount.mount_point;
    filesystem.fstype = mount.fstype;
    filesystem.readonly = mount.readonly;
    selected.push_back(std::move(filesystem));
  }
  // Mounts stacked with the same identity would be the same series twice.
  auto identity = [&](std::uint32_t i) {
    return std::tie(selected[i].device, selected[i].mountpoint, selected[i].fstype);
  };
  std::vector<std::uint32_t> order(selected.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return identity(a) < identity(b); });
  std::vector<bool> duplicate(selected.size(), false);
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (identity(order[i]) == identity(order[i - 1])) duplicate[order[i]] = true;
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < selected.size(); ++i) {
    if (duplicate[i]) continue;
    if (kept != i) selected[kept] = std::move(selected[i]);
    ++kept;
  }
  selected.resize(kept);
  return selected;
}

StatvfsFunction RealStatvfs() {
  return [](const std::string& path, struct statvfs& out) {
    return ::statvfs(path.c_str(), &out) == 0 ? 0 : errno;
  };
}

std::string PathUnderRoot(std::string_view host_root, std::string_view mount_point) {
  while (!host_root.empty() && host_root.back() == '/') host_root.remove_suffix(1);
  std::string path(host_root);
  path += mount_point;
  return path;
}

struct FilesystemStatter::Job {
  std::string path;
  bool started = false;
  bool done = false;
  bool abandoned = false;   // overran its timeout; its path is stuck until it returns
  bool not_reached = false;  // still queued when the cycle stopped waiting
  std::chrono::steady_clock::time_point started_at;
  std::uint64_t worker_id = 0;
  int error = 0;
  struct statvfs figures {};
};

struct FilesystemStatter::State {
  explicit State(StatvfsFunction function) : statvfs(std::move(function)) {}

  const StatvfsFunction statvfs;
  std::mutex mutex;
  std::condition_variable work;      // a job was queued, or the statter is going away
  std::condition_variable finished;  // a job finished
  std::deque<std::shared_ptr<Job>> queue;
  std::set<std::string, std::less<>> stuck;
  // Jobs of the cycle between Start and Finish still waited for: the worker that finishes the
  // last one wakes Finish, once, rather than every job waking it.
  std::size_t unfinished = 0;
  std::size_t idle = 0;  // workers waiting for a job
  std::size_t threads = 0;
  std::uint64_t next_worker_id = 1;
  bool stopping = false;
};

namespace {

// How long jobs may wait in the queue before Finish wakes another worker for them.
constexpr std::chrono::milliseconds kSpreadAfter{2};

std::string DurationText(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

std::uint64_t Bytes(std::uint64_t blocks, std::uint64_t block_size) {
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks, block_size, &bytes)) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  return bytes;
}

}  // namespace

void FilesystemStatter::RunWorker(std::shared_ptr<State> state, std::uint64_t id) {
  std::unique_lock lock(state->mutex);
  while (true) {
    ++state->idle;
    state->work.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
    --state->idle;
    if (state->stopping) break;
    std::shared_ptr<Job> job = std::move(state->queue.front());
    state->queue.pop_front();
    job->started = true;
    job->started_at = std::chrono::steady_clock::now();
    job->worker_id = id;
    lock.unlock();
    struct statvfs figures {};
    const int error = state->statvfs(job->path, figures);
    lock.lock();
    job->figures = figures;
    job->error = error;
    job->done = true;
    if (job->abandoned) {
      // A replacement took this worker's place when the call overran; the mount answers
      // again, so the next cycle calls it again.
      state->stuck.erase(job->path);
      break;
    }
    if (--state->unfinished == 0) {
      // Woken with the mutex held, Finish would only block on it again.
      lock.unlock();
      state->finished.notify_one();
      lock.lock();
    }
  }
  --state->threads;
}

FilesystemStatter::FilesystemStatter(StatvfsFunction statvfs, std::chrono::milliseconds timeout,
                                     std::size_t workers)
    : state_(std::make_shared<State>(std::move(statvfs))), timeout_(timeout) {
  std::lock_guard lock(state_->mutex);
  for (std::size_t i = 0; i < std::max<std::size_t>(workers, 1); ++i) StartWorker();
}

FilesystemStatter::~FilesystemStatter() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->work.notify_all();
  // Between cycles every joinable worker is idle; the detached ones hold the state alive and
  // leave when their stuck call returns.
  for (auto& [id, thread] : workers_) thread.join();
}

void FilesystemStatter::StartWorker() {
  const std::uint64_t id = state_->next_worker_id++;
  ++state_->threads;
  workers_.emplace(id, std::thread(RunWorker, state_, id));
}

std::size_t FilesystemStatter::stuck_count() const {
  std::lock_guard lock(state_->mutex);
  return state_->stuck.size();
}

std::size_t FilesystemStatter::thread_count() const {
  std::lock_guard lock(state_->mutex);
  return state_->threads;
}

void FilesystemStatter::Start(std::string_view host_root,
                              const std::vector<Filesystem>& filesystems) {
  using Clock = std::chrono::steady_clock;
  cycle_.paths.resize(filesystems.size());
  cycle_.job_of.assign(filesystems.size(), nullptr);
  cycle_.jobs.clear();
  // One job per distinct path: two mounts on one path must not mean two calls into a hang.
  std::unordered_map<std::string_view, std::shared_ptr<Job>> job_by_path;
  job_by_path.reserve(filesystems.size());

  std::unique_lock lock(state_->mutex);
  for (std::size_t i = 0; i < filesystems.size(); ++i) {
    std::string& path = cycle_.paths[i];
    path = PathUnderRoot(host_root, filesystems[i].mountpoint);
    if (state_->stuck.contains(path)) continue;
    if (auto it = job_by_path.find(path); it != job_by_path.end()) {
      cycle_.job_of[i] = it->second;
      continue;
    }
    auto job = std::make_shared<Job>();
    job->path = path;
    state_->queue.push_back(job);
    job_by_path.emplace(job->path, job);
    cycle_.jobs.push_back(job);
    cycle_.job_of[i] = std::move(job);
  }
  state_->unfinished = cycle_.jobs.size();
  // A queued job waits at most one timeout for a worker; a started one gets its own timeout.
  cycle_.queue_deadline = Clock::now() + timeout_;
  cycle_.spread_at = Clock::now() + kSpreadAfter;
  lock.unlock();
  // One worker takes the jobs one after another: a local statvfs answers in a microsecond,
  // far less than waking a thread costs. While jobs still wait after kSpreadAfter (a slow or
  // hung mount holds that worker), Finish wakes another idle worker, and so on.
  if (!cycle_.jobs.empty()) state_->work.notify_one();
}

void FilesystemStatter::Finish(std::vector<Filesystem>& filesystems, std::vector<Gap>& gaps) {
  using Clock = std::chrono::steady_clock;
  const std::string stuck_error =
      "statvfs did not answer within " + DurationText(timeout_) + "; skipped until it does";

  std::unique_lock lock(state_->mutex);
  while (true) {
    const Clock::time_point now = Clock::now();
    Clock::time_point wake = cycle_.queue_deadline;
    bool waiting = false;
    for (const std::shared_ptr<Job>& job : cycle_.jobs) {
      if (job->done || job->abandoned || job->not_reached) continue;
      if (!job->started) {
        if (now >= cycle_.queue_deadline) {
          job->not_reached = true;
          --state_->unfinished;
          std::erase(state_->queue, job);
        } else {
          waiting = true;
        }
        continue;
      }
      const Clock::time_point deadline = job->started_at + timeout_;
      if (now < deadline) {
        waiting = true;
        wake = std::min(wake, deadline);
        continue;
      }
      job->abandoned = true;
      --state_->unfinished;
      state_->stuck.insert(job->path);
      if (auto worker = workers_.find(job->worker_id); worker != workers_.end()) {
        worker->second.detach();
        workers_.erase(worker);
      }
      StartWorker();
    }
    if (!waiting) break;
    if (!state_->queue.empty() && state_->idle > 0) {
      if (now >= cycle_.spread_at) {
        state_->work.notify_one();
        cycle_.spread_at = now + kSpreadAfter;
      }
      wake = std::min(wake, cycle_.spread_at);
    }
    state_->finished.wait_until(lock, std::max(wake, now));
  }

  // One gap per path, however many mounts share it.
  std::unordered_set<std::string_view> reported;
  for (std::size_t i = 0; i < filesystems.size() && i < cycle_.paths.size(); ++i) {
    Filesystem& filesystem = filesystems[i];
    const std::string& path = cycle_.paths[i];
    const Job* job = cycle_.job_of[i].get();
    int errno_value = 0;
    if (job == nullptr || job->abandoned) {
      filesystem.error = stuck_error;
    } else if (job->not_reached) {
      filesystem.error = "not checked this cycle: every statvfs worker was busy";
    } else if (job->error != 0) {
      errno_value = job->error;
      filesystem.error = std::strerror(job->error);
    } else {
      // node_exporter multiplies by the block size (f_bsize), not the fragment size.
      const struct statvfs& f = job->figures;
      filesystem.size_bytes = Bytes(f.f_blocks, f.f_bsize);
      filesystem.free_bytes = Bytes(f.f_bfree, f.f_bsize);
      filesystem.avail_bytes = Bytes(f.f_bavail, f.f_bsize);
      filesystem.files = f.f_files;
      filesystem.files_free = f.f_ffree;
      continue;
    }
    if (reported.insert(path).second) {
      gaps.push_back({std::string(CollectorName(Collector::kFilesystem)), path,
                      filesystem.error, errno_value});
    }
  }
}

}  // namespace uplink::agent::node
