#include "kubesim/logs.h"

#include <algorithm>
#include <charconv>

#include "common/json.h"

namespace uplink::kubesim {
namespace {

// strconv.ParseInt's messages, which the real parameter codec passes on.
Result<std::int64_t> ParseInt64(std::string_view name, std::string_view text) {
  std::int64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (!text.empty() && text.front() == '+') ++begin;
  auto [stop, error] = std::from_chars(begin, end, value);
  std::string quoted = GoQuoted(text.substr(0, 64));
  if (error == std::errc::result_out_of_range) {
    return InvalidArgumentError(std::string(name) + ": strconv.ParseInt: parsing " + quoted +
                                ": value out of range");
  }
  if (error != std::errc() || stop != end || begin == end) {
    return InvalidArgumentError(std::string(name) + ": strconv.ParseInt: parsing " + quoted +
                                ": invalid syntax");
  }
  return value;
}

// strconv.ParseBool; an empty value is false, as the real codec reads it.
Result<bool> ParseGoBool(std::string_view name, std::string_view text) {
  for (std::string_view yes : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (text == yes) return true;
  }
  for (std::string_view no : {"", "0", "f", "F", "FALSE", "false", "False"}) {
    if (text == no) return false;
  }
  return InvalidArgumentError(std::string(name) + ": strconv.ParseBool: parsing " +
                              GoQuoted(text.substr(0, 64)) + ": invalid syntax");
}

std::string JoinNames(const json::array& containers) {
  std::string names;
  for (const json::value& container : containers) {
    if (!container.is_object()) continue;
    if (!names.empty()) names += " ";
    names += StringAt(container.get_object(), "name");
  }
  return names;
}

bool HasContainerNamed(const json::object& spec, std::string_view name) {
  for (std::string_view key : {"containers", "initContainers", "ephemeralContainers"}) {
    for (const json::value& container : ArrayAt(spec, key)) {
      if (container.is_object() && StringAt(container.get_object(), "name") == name) return true;
    }
  }
  return false;
}

const json::object* ContainerStatus(const json::object& status, std::string_view name) {
  for (std::string_view key :
       {"containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"}) {
    for (const json::value& entry : ArrayAt(status, key)) {
      if (entry.is_object() && StringAt(entry.get_object(), "name") == name) {
        return &entry.get_object();
      }
    }
  }
  return nullptr;
}

// kubelet's validateContainerLogStatus: which container instance's log to read.
Result<std::string> ContainerIdToRead(const json::object& status, const std::string& container,
                                      const std::string& pod, bool previous) {
  const json::object* container_status = ContainerStatus(status, container);
  std::string quoted = GoQuoted(container) + " in pod " + GoQuoted(pod);
  if (!container_status) return InvalidArgumentError("container " + quoted + " is not available");
  const json::object& state = ObjectAt(*container_status, "state");
  const json::object& last_terminated =
      ObjectAt(ObjectAt(*container_status, "lastState"), "terminated");
  std::string last_id = StringAt(last_terminated, "containerID");
  if (previous) {
    if (last_id.empty()) {
      return InvalidArgumentError("previous terminated container " + quoted + " not found");
    }
    return last_id;
  }
  if (state.contains("running")) return StringAt(*container_status, "containerID");
  if (state.contains("terminated")) {
    std::string id = StringAt(ObjectAt(state, "terminated"), "containerID");
    if (!id.empty()) return id;
    if (!last_id.empty()) return last_id;
    return InvalidArgumentError("container " + quoted + " is terminated");
  }
  if (!last_terminated.empty()) {
    if (last_id.empty()) return InvalidArgumentError("container " + quoted + " is terminated");
    return last_id;
  }
  if (state.contains("waiting")) {
    std::string reason = StringAt(ObjectAt(state, "waiting"), "reason");
    if (reason == "ErrImagePull") reason = "image can't be pulled";
    if (reason == "ImagePullBackOff") reason = "trying and failing to pull image";
    return InvalidArgumentError("container " + quoted + " is waiting to start: " + reason);
  }
  return InvalidArgumentError("container " + quoted + " is waiting to start - no logs yet");
}

}  // namespace

std::string FormatRfc3339Nano(WallTime time) {
  auto since_epoch = time.time_since_epoch();
  auto seconds = std::chrono::floor<std::chrono::seconds>(since_epoch);
  auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - seconds).count();
  std::string text = FormatRfc3339(WallTime(seconds));  // "...:SSZ"
  if (nanos == 0) return text;
  std::string fraction = std::to_string(nanos);
  fraction.insert(0, 9 - fraction.size(), '0');
  while (fraction.back() == '0') fraction.pop_back();
  text.insert(text.size() - 1, "." + fraction);
  return text;
}

Status LogStore::Add(const json::object& container_log) {
  const json::object& metadata = ObjectAt(container_log, "metadata");
  std::string where = "ContainerLog " + StringAt(metadata, "namespace") + "/" +
                      StringAt(metadata, "name") + " " + StringAt(container_log, "container");
  std::string container_id = StringAt(container_log, "containerID");
  if (container_id.empty()) return InvalidArgumentError(where + " has no containerID");
  const json::value* log = container_log.if_contains("log");
  if (log && !log->is_string()) return InvalidArgumentError(where + ": log must be a string");
  std::string_view text = log ? std::string_view(log->get_string()) : std::string_view();
  if (text.size() > kMaxContainerLogBytes) {
    return InvalidArgumentError(where + ": log is longer than " +
                                std::to_string(kMaxContainerLogBytes) + " bytes");
  }
  std::vector<LogLine> lines;
  size_t start = 0;
  size_t number = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    size_t space = line.find(' ');
    Result<WallTime> time = ParseRfc3339(line.substr(0, space));
    if (!time.ok()) {
      return InvalidArgumentError(where + ": log line " + std::to_string(number) +
                                  " does not start with an RFC 3339 time and a space");
    }
    lines.push_back(LogLine{*time, space == std::string_view::npos
                                               ? std::string()
                                               : std::string(line.substr(space + 1))});
  }
  std::lock_guard lock(mutex_);
  logs_[container_id] = std::move(lines);
  return Status::Ok();
}

std::vector<LogLine> LogStore::Lines(const std::string& container_id) const {
  std::lock_guard lock(mutex_);
  auto it = logs_.find(container_id);
  return it == logs_.end() ? std::vector<LogLine>() : it->second;
}

Result<LogOptions> ParseLogOptions(
    const std::vector<std::pair<std::string, std::string>>& query) {
  LogOptions options;
  std::vector<std::string> seen;
  for (const auto& [key, value] : query) {
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    if (key == "container") {
      options.container = value;
    } else if (key == "follow") {
      UPLINK_ASSIGN_OR_RETURN(options.follow, ParseGoBool(key, value));
    } else if (key == "previous") {
      UPLINK_ASSIGN_OR_RETURN(options.previous, ParseGoBool(key, value));
    } else if (key == "timestamps") {
      UPLINK_ASSIGN_OR_RETURN(options.timestamps, ParseGoBool(key, value));
    } else if (key == "tailLines") {
      UPLINK_ASSIGN_OR_RETURN(options.tail_lines, ParseInt64(key, value));
    } else if (key == "sinceSeconds") {
      UPLINK_ASSIGN_OR_RETURN(options.since_seconds, ParseInt64(key, value));
    } else if (key == "limitBytes") {
      UPLINK_ASSIGN_OR_RETURN(options.limit_bytes, ParseInt64(key, value));
    } else if (key == "sinceTime") {
      Result<WallTime> time = ParseRfc3339(value);
      if (!time.ok()) {
        return InvalidArgumentError("sinceTime: parsing time " + GoQuoted(value.substr(0, 64)) +
                                    " as \"2006-01-02T15:04:05Z07:00\": not an RFC 3339 time");
      }
      options.since_time = *time;
    }
  }
  return options;
}

std::vector<FieldError> ValidateLogOptions(const LogOptions& options) {
  std::vector<FieldError> causes;
  if (options.tail_lines && *options.tail_lines < 0) {
    causes.push_back(FieldError{"tailLines", "FieldValueInvalid",
                                "Invalid value: " + std::to_string(*options.tail_lines) +
                                    ": must be greater than or equal to 0"});
  }
  if (options.limit_bytes && *options.limit_bytes < 1) {
    causes.push_back(FieldError{"limitBytes", "FieldValueInvalid",
                                "Invalid value: " + std::to_string(*options.limit_bytes) +
                                    ": must be greater than 0"});
  }
  if (options.since_seconds && options.since_time) {
    causes.push_back(FieldError{"", "FieldValueForbidden",
                                "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be "
                                "specified"});
  } else if (options.since_seconds && *options.since_seconds < 1) {
    causes.push_back(FieldError{"sinceSeconds", "FieldValueInvalid",
                                "Invalid value: " + std::to_string(*options.since_seconds) +
                                    ": must be greater than 0"});
  }
  return causes;
}

Result<std::string> ReadContainerLog(const json::object& pod, const LogOptions& options,
                                     const LogStore& logs, WallTime now) {
  if (options.follow) {
    return InvalidArgumentError("follow is not supported by uplink-kubesim: it serves logs whole "
                                "and never streams them");
  }
  const json::object& spec = ObjectAt(pod, "spec");
  std::string pod_name = StringAt(ObjectAt(pod, "metadata"), "name");
  std::string container = options.container;
  if (container.empty()) {
    const json::array& containers = ArrayAt(spec, "containers");
    if (containers.size() == 1 && containers[0].is_object()) {
      container = StringAt(containers[0].get_object(), "name");
    } else if (containers.empty()) {
      return InvalidArgumentError("a container name must be specified for pod " + pod_name);
    } else {
      std::string message = "a container name must be specified for pod " + pod_name +
                            ", choose one of: [" + JoinNames(containers) + "]";
      const json::array& init = ArrayAt(spec, "initContainers");
      if (!init.empty()) message += " or one of the init containers: [" + JoinNames(init) + "]";
      return InvalidArgumentError(message);
    }
  } else if (!HasContainerNamed(spec, container)) {
    return InvalidArgumentError("container " + container.substr(0, 253) + " is not valid for pod " +
                                pod_name);
  }
  // An unscheduled pod has no kubelet to ask: the real server answers with an empty body.
  if (StringAt(spec, "nodeName").empty()) return std::string();
  UPLINK_ASSIGN_OR_RETURN(std::string container_id,
                          ContainerIdToRead(ObjectAt(pod, "status"), container, pod_name,
                                            options.previous));
  std::vector<LogLine> lines = logs.Lines(container_id);
  // The kubelet seeks to the last tailLines lines first, then skips those before the since
  // time.
  size_t first = 0;
  if (options.tail_lines && static_cast<std::uint64_t>(*options.tail_lines) < lines.size()) {
    first = lines.size() - static_cast<size_t>(*options.tail_lines);
  }
  std::optional<WallTime> since = options.since_time;
  // Clamped far beyond any log's age so that a huge value cannot overflow the clock.
  constexpr std::int64_t kMaxSinceSeconds = std::int64_t{1} << 32;
  if (options.since_seconds) {
    since = now - std::chrono::seconds(std::min(*options.since_seconds, kMaxSinceSeconds));
  }
  std::string body;
  for (size_t i = first; i < lines.size(); ++i) {
    if (since && lines[i].time < *since) continue;
    if (options.timestamps) body += FormatRfc3339Nano(lines[i].time) + " ";
    body += lines[i].text;
    body += '\n';
    if (options.limit_bytes && body.size() >= static_cast<std::uint64_t>(*options.limit_bytes)) {
      break;
    }
  }
  if (options.limit_bytes && body.size() > static_cast<std::uint64_t>(*options.limit_bytes)) {
    body.resize(static_cast<size_t>(*options.limit_bytes));
  }
  return body;
}

}  // namespace uplink::kubesim
