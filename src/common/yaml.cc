#include "common/yaml.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <regex>

namespace uplink {
namespace {

constexpr int kMaxDepth = 64;

json::value PlainScalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (std::regex_match(s, kInt)) {
    std::int64_t value = 0;
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), value);
    if (ec == std::errc() && ptr == s.data() + s.size()) return value;
    return json::value(json::string_view(s));  // out of range: keep the text rather than lose digits
  }
  if (std::regex_match(s, kFloat)) {
    try {
      return std::stod(s);
    } catch (...) {
      return json::value(json::string_view(s));
    }
  }
  return json::value(json::string_view(s));
}

Result<json::value> Convert(const YAML::Node& node, int depth) {
  if (depth > kMaxDepth) return InvalidArgumentError("YAML nests deeper than 64 levels");
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return json::value(nullptr);
    case YAML::NodeType::Scalar:
      // yaml-cpp tags quoted and explicitly tagged scalars "!" ; plain ones "?".
      if (node.Tag() == "?") return PlainScalar(node.Scalar());
      return json::value(node.Scalar());
    case YAML::NodeType::Sequence: {
      json::array array;
      for (const auto& item : node) {
        UPLINK_ASSIGN_OR_RETURN(json::value converted, Convert(item, depth + 1));
        array.push_back(std::move(converted));
      }
      return json::value(std::move(array));
    }
    case YAML::NodeType::Map: {
      json::object object;
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) return InvalidArgumentError("YAML mapping keys must be scalars");
        UPLINK_ASSIGN_OR_RETURN(json::value converted, Convert(entry.second, depth + 1));
        object[entry.first.Scalar()] = std::move(converted);
      }
      return json::value(std::move(object));
    }
  }
  return InvalidArgumentError("unknown YAML node type");
}

}  // namespace

Result<std::vector<json::value>> ParseYamlDocuments(std::string_view text) {
  std::vector<json::value> out;
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(std::string(text));
    for (const auto& doc : docs) {
      if (doc.IsNull() || !doc.IsDefined()) continue;
      UPLINK_ASSIGN_OR_RETURN(json::value converted, Convert(doc, 0));
      out.push_back(std::move(converted));
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("invalid YAML at line " + std::to_string(e.mark.line + 1) +
                                ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  return out;
}

Result<json::value> ParseYaml(std::string_view text) {
  UPLINK_ASSIGN_OR_RETURN(auto docs, ParseYamlDocuments(text));
  if (docs.size() != 1) {
    return InvalidArgumentError("expected exactly one YAML document, found " +
                                std::to_string(docs.size()));
  }
  return std::move(docs.front());
}

}  // namespace uplink
