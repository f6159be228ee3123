// Which mounts are real filesystems, and their statvfs figures without ever blocking a cycle
// on a hung mount (an NFS server that went away leaves statvfs waiting for minutes).
#pragma once

#include <sys/statvfs.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/node/host/exclude_pattern.h"
#include "agent/node/host/proc_parsers.h"
#include "agent/node/sample.h"
#include "common/status.h"

namespace uplink::agent::node {

// Picks the mounts node_exporter 1.5 reports: mount point and type not excluded, and one
// entry per (device, mount point, type), the first in mountinfo's order.
class FilesystemSelector {
 public:
  static Result<FilesystemSelector> Create(std::string_view mount_points_exclude,
                                           std::string_view fs_types_exclude);

  // Filesystems with identity and `readonly` set; the figures are left to FilesystemStatter.
  std::vector<Filesystem> Select(const std::vector<Mount>& mounts) const;

 private:
  FilesystemSelector(ExcludePattern mount_points, ExcludePattern fs_types)
      : mount_points_(std::move(mount_points)), fs_types_(std::move(fs_types)) {}

  ExcludePattern mount_points_;
  ExcludePattern fs_types_;
};

// statvfs(2) as a function object so tests can make a mount hang: returns 0 and fills `out`,
// or the errno.
using StatvfsFunction = std::function<int(const std::string& path, struct statvfs& out)>;
StatvfsFunction RealStatvfs();

// The path statvfs is called on: the mount point under the host's root ("/host" + "/data").
std::string PathUnderRoot(std::string_view host_root, std::string_view mount_point);

// Runs statvfs on a few worker threads, each call with its own timeout. One worker makes a
// cycle's calls in turn while they answer quickly; calls still queued a few milliseconds on
// wake another idle worker, and so on, so a slow mount delays the others by no more than that.
// A call that does not return in time marks its path stuck: the path is reported with an error
// and not called again until that call returns, so a hung mount costs one thread and never
// more than one call. The worker that waits on it is replaced, so the other mounts keep their
// workers; threads are thus bounded by the workers plus the stuck paths.
class FilesystemStatter {
 public:
  FilesystemStatter(StatvfsFunction statvfs, std::chrono::milliseconds timeout,
                    std::size_t workers = 4);
  ~FilesystemStatter();
  FilesystemStatter(const FilesystemStatter&) = delete;
  FilesystemStatter& operator=(const FilesystemStatter&) = delete;

  // Starts the statvfs calls of a cycle, on PathUnderRoot(host_root, mountpoint) of each
  // filesystem, and returns at once: the caller reads its other sources meanwhile. Each Start
  // is followed by one Finish with the same filesystems before the next Start.
  void Start(std::string_view host_root, const std::vector<Filesystem>& filesystems);

  // Fills the figures of each filesystem, or its `error` plus a Gap of source "filesystem".
  // Returns within about twice the timeout from Start however many mounts hang; mounts no
  // worker reached by then are reported as not checked and tried again next time.
  // `readonly` stays the mount table's: statvfs's ST_RDONLY would be the agent's own view, and
  // the chart mounts the host's / read-only into its container.
  void Finish(std::vector<Filesystem>& filesystems, std::vector<Gap>& gaps);

  // For tests and health: paths whose call is still out past its timeout, and live threads.
  std::size_t stuck_count() const;
  std::size_t thread_count() const;

 private:
  struct Job;
  struct State;
  // The calls of the cycle between Start and Finish.
  struct Cycle {
    std::vector<std::string> paths;             // per filesystem
    std::vector<std::shared_ptr<Job>> job_of;   // per filesystem; null when its path is stuck
    std::vector<std::shared_ptr<Job>> jobs;     // one per distinct path
    std::chrono::steady_clock::time_point queue_deadline, spread_at;
  };

  static void RunWorker(std::shared_ptr<State> state, std::uint64_t id);
  void StartWorker();  // with state_->mutex held

  std::shared_ptr<State> state_;
  std::chrono::milliseconds timeout_;
  Cycle cycle_;
  // Joinable workers by id; a worker left waiting on a stuck call is detached and removed.
  std::map<std::uint64_t, std::thread> workers_;
};

}  // namespace uplink::agent::node
