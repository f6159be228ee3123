#include "agent/experiments/scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace uplink::agent::experiments {
namespace {

FileStat FromStat(const struct stat& info) {
  FileStat stat;
  stat.is_dir = S_ISDIR(info.st_mode);
  stat.is_regular = S_ISREG(info.st_mode);
  stat.size = info.st_size;
  stat.mtime_ns = static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 +
                  info.st_mtim.tv_nsec;
  return stat;
}

// Opens a regular file for reading without following a link and without blocking on a FIFO.
Result<int> OpenRegular(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    int saved = errno;
    if (saved == ELOOP) return InvalidArgumentError(path + " is a symbolic link; not followed");
    return ErrnoError("open " + path, saved);
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + " is not a regular file");
  }
  return fd;
}

Result<std::string> ReadFd(int fd, std::int64_t offset, size_t max_bytes, bool fail_beyond,
                           const std::string& path) {
  std::string out;
  size_t want = fail_beyond ? max_bytes + 1 : max_bytes;
  out.resize(std::min<size_t>(want, 1 << 16));
  size_t used = 0;
  while (used < want) {
    if (used == out.size()) out.resize(std::min(want, out.size() * 2));
    ssize_t n = ::pread(fd, out.data() + used, out.size() - used,
                        offset + static_cast<std::int64_t>(used));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read " + path, errno);
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  out.resize(used);
  if (fail_beyond && used > max_bytes) {
    return ResourceExhaustedError(path + " is larger than " + std::to_string(max_bytes) +
                                  " bytes");
  }
  return out;
}

Status WalkFiles(const std::string& dir, const std::string& prefix, size_t max_files, int depth,
                 std::vector<DirEntry>& out) {
  UPLINK_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDir(dir, max_files + 1));
  for (DirEntry& entry : entries) {
    std::string relative = prefix.empty() ? entry.name : prefix + "/" + entry.name;
    if (entry.stat.is_regular) {
      if (out.size() >= max_files) {
        return ResourceExhaustedError(dir + " holds more than " + std::to_string(max_files) +
                                      " files");
      }
      entry.name = std::move(relative);
      out.push_back(std::move(entry));
    } else if (entry.stat.is_dir && depth > 0) {
      UPLINK_RETURN_IF_ERROR(WalkFiles(dir + "/" + entry.name, relative, max_files, depth - 1, out));
    }
  }
  return Status::Ok();
}

}  // namespace

bool TakeRun(ScanPass& pass) {
  if (pass.Exhausted()) {
    pass.more = true;
    return false;
  }
  ++pass.runs_read;
  return true;
}

bool Unchanged(const ScanPass& pass, std::string_view key, std::uint64_t signature) {
  auto existing = pass.cursor.runs().find(key);
  return existing != pass.cursor.runs().end() && existing->second.signature == signature;
}

Result<std::string> UpsertIfChanged(ScanPass& pass, const std::string& key, RunState& state,
                                    const RunRecord& run) {
  state.run_id = run.run_id;
  state.problem_reported = false;
  std::string item = RunItem(run);
  const std::uint64_t fingerprint = Fingerprint(item);
  if (fingerprint != state.sent_fingerprint) {
    UPLINK_RETURN_IF_ERROR(pass.emitter.AddRun(run));
    state.sent_fingerprint = fingerprint;
    pass.touched.insert(key);
  }
  return item;
}

Status ForgetMissing(ScanPass& pass, std::string_view prefix, const std::set<std::string>& seen) {
  auto& runs = pass.cursor.runs();
  for (auto it = runs.lower_bound(prefix); it != runs.end() && it->first.starts_with(prefix);) {
    if (seen.count(it->first) > 0) {
      ++it;
      continue;
    }
    // Only runs the console heard of need a deletion; a run only ever reported as a problem
    // was never stored.
    if (it->second.sent_fingerprint != 0) UPLINK_RETURN_IF_ERROR(pass.emitter.AddDeleted(it->second.run_id));
    it = runs.erase(it);
  }
  return Status::Ok();
}

Status ReportProblem(ScanPass& pass, std::string_view key, std::uint64_t signature,
                     std::string_view source, std::string_view location, const Status& error,
                     log::Logger& log) {
  RunState& state = pass.cursor.runs()[std::string(key)];
  if (state.problem_reported && state.signature == signature) return Status::Ok();
  log.Warn("skipping a run that cannot be read; it is read again when it changes",
           {{"source", std::string(source)}, {"location", std::string(location)}, {"error", error}});
  UPLINK_RETURN_IF_ERROR(pass.emitter.AddProblem(source, location, error.message()));
  state.problem_reported = true;
  state.signature = signature;
  ++pass.problems_reported;
  pass.touched.insert(std::string(key));
  return Status::Ok();
}

std::optional<FileStat> StatNoFollow(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return std::nullopt;
  return FromStat(info);
}

Result<std::vector<DirEntry>> ListDir(const std::string& dir, size_t max_entries) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoError("open directory " + dir, errno);
  DIR* stream = ::fdopendir(fd);
  if (stream == nullptr) {
    int saved = errno;
    ::close(fd);
    return ErrnoError("read directory " + dir, saved);
  }
  std::vector<DirEntry> entries;
  Status status;
  while (true) {
    errno = 0;
    struct dirent* entry = ::readdir(stream);
    if (entry == nullptr) {
      if (errno != 0) status = ErrnoError("read directory " + dir, errno);
      break;
    }
    std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (entries.size() >= max_entries) {
      status = ResourceExhaustedError(dir + " holds more than " + std::to_string(max_entries) +
                                      " entries");
      break;
    }
    struct stat info {};
    if (::fstatat(fd, entry->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
    entries.push_back(DirEntry{std::string(name), FromStat(info)});
  }
  ::closedir(stream);
  if (!status.ok()) return status;
  std::sort(entries.begin(), entries.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return entries;
}

Result<std::vector<DirEntry>> ListFilesRecursive(const std::string& dir, size_t max_files,
                                                 int max_depth) {
  std::vector<DirEntry> files;
  UPLINK_RETURN_IF_ERROR(WalkFiles(dir, "", max_files, max_depth, files));
  // By whole relative name, as a cursor orders its metrics ("a.x" before "a/b").
  std::sort(files.begin(), files.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return files;
}

Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes) {
  UPLINK_ASSIGN_OR_RETURN(int fd, OpenRegular(path));
  auto text = ReadFd(fd, 0, max_bytes, true, path);
  ::close(fd);
  return text;
}

Result<std::string> ReadFileRange(const std::string& path, std::int64_t offset, size_t max_bytes) {
  UPLINK_ASSIGN_OR_RETURN(int fd, OpenRegular(path));
  auto text = ReadFd(fd, offset, max_bytes, false, path);
  ::close(fd);
  return text;
}

}  // namespace uplink::agent::experiments
