// YAML through libyaml's event parser. (yaml-cpp 0.7 was replaced: json_yaml_fuzz found a
// 40-byte input on which its LoadAll allocates without bound.)
#include "common/yaml.h"

#include <yaml.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <optional>

#include "common/decimal.h"
#include "common/json.h"

namespace uplink {
namespace {

constexpr size_t kMaxDepth = 64;
// Aliases let a few lines describe an exponentially large document ("billion laughs"), and
// each alias is a copy. Every value costs about what it occupies in memory (kValueCost plus
// its text's bytes), and the conversion stops past kMaxCost: far beyond any kubeconfig or
// objects file, far below what hurts.
constexpr size_t kValueCost = 64;
constexpr size_t kMaxCost = 64u << 20;

json::value PlainScalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  auto text = [&] { return json::value(json::string_view(s)); };
  if (s.size() >= 64) return text();
  // YAML 1.2's core schema: [-+]?[0-9]+ is an integer, and
  // [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? a float. One out of range keeps its text.
  std::string_view number = s;
  if (number.front() == '+') {
    number.remove_prefix(1);
    if (number.empty() || number.front() == '-' || number.front() == '+') return text();
  }
  const std::string_view digits = number.front() == '-' ? number.substr(1) : number;
  if (!digits.empty() && std::all_of(digits.begin(), digits.end(),
                                     [](char c) { return c >= '0' && c <= '9'; })) {
    std::int64_t value = 0;
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec == std::errc() && ptr == number.data() + number.size()) return value;
    return text();
  }
  if (std::optional<double> value = ParseFiniteDouble(number)) return *value;
  return text();
}

json::value Scalar(const yaml_event_t& event) {
  std::string text(reinterpret_cast<const char*>(event.data.scalar.value), event.data.scalar.length);
  const char* tag = reinterpret_cast<const char*>(event.data.scalar.tag);
  if (tag != nullptr) {
    std::string_view t(tag);
    if (t == YAML_STR_TAG) return json::value(json::string_view(text));
    if (t == YAML_INT_TAG || t == YAML_FLOAT_TAG || t == YAML_BOOL_TAG || t == YAML_NULL_TAG) {
      return PlainScalar(text);
    }
    return json::value(json::string_view(text));
  }
  // Quoted, literal and folded scalars are strings; plain ones follow the core schema.
  if (event.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return json::value(json::string_view(text));
  return PlainScalar(text);
}

std::string Anchor(const yaml_char_t* anchor) {
  return anchor ? std::string(reinterpret_cast<const char*>(anchor)) : std::string();
}

// Assembles values from parser events: a stack of open collections plus the anchors seen.
class DocumentBuilder {
 public:
  Status Open(json::value container, std::string anchor) {
    if (stack_.size() >= kMaxDepth) return InvalidArgumentError("YAML nests deeper than 64 levels");
    UPLINK_RETURN_IF_ERROR(Spend(kValueCost));
    stack_.push_back(Frame{std::move(container), std::move(anchor), {}, false, kValueCost});
    return Status::Ok();
  }

  Status Close() {
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    return Place(std::move(frame.value), frame.anchor, frame.cost);
  }

  Status AddScalar(json::value value, const std::string& anchor, size_t text_bytes) {
    UPLINK_RETURN_IF_ERROR(Spend(kValueCost + text_bytes));
    return Place(std::move(value), anchor, kValueCost + text_bytes);
  }

  Status AddAlias(const std::string& name) {
    auto it = anchors_.find(name);
    if (it == anchors_.end()) return InvalidArgumentError("YAML alias *" + name + " has no anchor");
    UPLINK_RETURN_IF_ERROR(Spend(it->second.cost));
    return Place(it->second.value, "", it->second.cost);
  }

  // The finished document, if one is complete.
  std::optional<json::value> TakeRoot() { return std::exchange(root_, std::nullopt); }

 private:
  struct Frame {
    json::value value;
    std::string anchor;
    std::string key;
    bool has_key = false;
    size_t cost = 0;  // of everything inside, for alias accounting
  };
  struct Anchored {
    json::value value;
    size_t cost = 0;
  };

  Status Spend(size_t cost) {
    if (cost > budget_) {
      return ResourceExhaustedError("YAML expands to more than " + std::to_string(kMaxCost >> 20) +
                                    " MiB of values (aliases repeated too often?)");
    }
    budget_ -= cost;
    return Status::Ok();
  }

  Status Place(json::value value, const std::string& anchor, size_t cost) {
    if (!anchor.empty()) anchors_[anchor] = Anchored{value, cost};
    if (stack_.empty()) {
      root_ = std::move(value);
      return Status::Ok();
    }
    Frame& parent = stack_.back();
    parent.cost += cost;
    if (parent.value.is_array()) {
      parent.value.get_array().push_back(std::move(value));
      return Status::Ok();
    }
    if (!parent.has_key) {
      if (value.is_string()) {
        parent.key = std::string(value.get_string());
      } else if (value.is_null()) {
        parent.key = "";
      } else if (value.is_array() || value.is_object()) {
        return InvalidArgumentError("YAML mapping keys must be scalars");
      } else {
        parent.key = json::serialize(value);
      }
      parent.has_key = true;
      return Status::Ok();
    }
    parent.value.get_object()[parent.key] = std::move(value);
    parent.has_key = false;
    return Status::Ok();
  }

  std::vector<Frame> stack_;
  std::map<std::string, Anchored> anchors_;
  std::optional<json::value> root_;
  size_t budget_ = kMaxCost;
};

struct ParserDeleter {
  void operator()(yaml_parser_t* parser) const {
    yaml_parser_delete(parser);
    delete parser;
  }
};

}  // namespace

Result<std::vector<json::value>> ParseYamlDocuments(std::string_view text) {
  std::unique_ptr<yaml_parser_t, ParserDeleter> parser(new yaml_parser_t);
  if (!yaml_parser_initialize(parser.get())) return InternalError("libyaml could not start");
  yaml_parser_set_input_string(parser.get(), reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  std::vector<json::value> documents;
  DocumentBuilder builder;
  while (true) {
    yaml_event_t event;
    if (!yaml_parser_parse(parser.get(), &event)) {
      return InvalidArgumentError(
          "invalid YAML at line " + std::to_string(parser->problem_mark.line + 1) + ", column " +
          std::to_string(parser->problem_mark.column + 1) + ": " +
          (parser->problem ? parser->problem : "unknown error"));
    }
    std::unique_ptr<yaml_event_t, void (*)(yaml_event_t*)> owned(&event, yaml_event_delete);
    Status status;
    switch (event.type) {
      case YAML_STREAM_END_EVENT:
        return documents;
      case YAML_DOCUMENT_END_EVENT:
        if (auto root = builder.TakeRoot(); root && !root->is_null()) {
          documents.push_back(std::move(*root));
        }
        break;
      case YAML_SEQUENCE_START_EVENT:
        status = builder.Open(json::array(), Anchor(event.data.sequence_start.anchor));
        break;
      case YAML_MAPPING_START_EVENT:
        status = builder.Open(json::object(), Anchor(event.data.mapping_start.anchor));
        break;
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        status = builder.Close();
        break;
      case YAML_SCALAR_EVENT:
        status = builder.AddScalar(Scalar(event), Anchor(event.data.scalar.anchor),
                                   event.data.scalar.length);
        break;
      case YAML_ALIAS_EVENT:
        status = builder.AddAlias(Anchor(event.data.alias.anchor));
        break;
      default:
        break;
    }
    if (!status.ok()) return status;
  }
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
