// The exclusion patterns of node_exporter's flags (--collector.filesystem.mount-points-exclude
// and its kin), so the node role leaves out what node_exporter leaves out.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace uplink::agent::node {

// node_exporter 1.5.0's defaults (collector/filesystem_linux.go, diskstats_linux.go). The
// netdev collector excludes nothing by default (Debian's build of node_exporter adds "^lo$";
// upstream's does not).
inline constexpr std::string_view kDefaultMountPointsExclude =
    "^/(dev|proc|run/credentials/.+|sys|var/lib/docker/.+|var/lib/containers/storage/.+)($|/)";
inline constexpr std::string_view kDefaultFsTypesExclude =
    "^(autofs|binfmt_misc|bpf|cgroup2?|configfs|debugfs|devpts|devtmpfs|fusectl|hugetlbfs|"
    "iso9660|mqueue|nsfs|overlay|proc|procfs|pstore|rpc_pipefs|securityfs|selinuxfs|squashfs|"
    "sysfs|tracefs)$";
inline constexpr std::string_view kDefaultDiskDevicesExclude =
    R"(^(ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$)";
inline constexpr std::string_view kDefaultNetDevicesExclude = "";

// A compiled pattern, searched (not anchored unless it says so) like Go's MatchString: '^'
// and '$' are the ends of the name, '.' does not match a newline. Boost.Regex rather than
// std::regex: libstdc++'s matcher recurses once per character and overflows the stack on a
// long name, where Boost's matcher is iterative and bounded.
class ExcludePattern {
 public:
  // An empty pattern excludes nothing. InvalidArgument when the pattern does not compile.
  static Result<ExcludePattern> Compile(std::string_view pattern);

  bool Excludes(std::string_view name) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  ExcludePattern(std::string pattern, std::shared_ptr<const Compiled> compiled);

  std::string pattern_;
  std::shared_ptr<const Compiled> compiled_;  // null for the empty pattern
};

// An ExcludePattern applied to a cycle's devices. It remembers its verdicts on the last list of
// names: device lists seldom change between cycles, and comparing the names costs far less
// than a regex search for each.
class DeviceExclusion {
 public:
  explicit DeviceExclusion(ExcludePattern pattern) : pattern_(std::move(pattern)) {}

  // Removes the items whose `device` the pattern excludes; the rest keep their order.
  template <typename T>
  void KeepIncluded(std::vector<T>& items) {
    if (pattern_.pattern().empty()) return;  // excludes nothing
    if (!SameNames(items)) {
      names_.clear();
      excluded_.clear();
      for (const T& item : items) {
        names_.push_back(item.device);
        excluded_.push_back(pattern_.Excludes(item.device));
      }
    }
    std::size_t kept = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (excluded_[i]) continue;
      if (kept != i) items[kept] = std::move(items[i]);
      ++kept;
    }
    items.resize(kept);
  }

 private:
  template <typename T>
  bool SameNames(const std::vector<T>& items) const {
    if (items.size() != names_.size()) return false;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (items[i].device != names_[i]) return false;
    }
    return true;
  }

  ExcludePattern pattern_;
  std::vector<std::string> names_;  // the last list, in its order
  std::vector<bool> excluded_;      // the verdict on each of them
};

}  // namespace uplink::agent::node
