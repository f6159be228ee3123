#include "exposition.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <set>
#include <utility>
#include <vector>

namespace uplink::agent::node::text_format {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

bool IsValidUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t length = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (length == 0 || i + length > s.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

class LineReader {
 public:
  explicit LineReader(std::string_view line) : line_(line) {}

  bool MetricName(std::string& out) {
    const std::size_t start = pos_;
    if (pos_ >= line_.size() || !(IsNameStart(line_[pos_]) || line_[pos_] == ':')) return false;
    while (pos_ < line_.size() && (IsNameChar(line_[pos_]) || line_[pos_] == ':')) ++pos_;
    out = std::string(line_.substr(start, pos_ - start));
    return true;
  }
  bool LabelName(std::string& out) {
    const std::size_t start = pos_;
    if (pos_ >= line_.size() || !IsNameStart(line_[pos_])) return false;
    while (pos_ < line_.size() && IsNameChar(line_[pos_])) ++pos_;
    out = std::string(line_.substr(start, pos_ - start));
    return true;
  }
  bool Consume(char c) {
    if (pos_ < line_.size() && line_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) const { return pos_ < line_.size() && line_[pos_] == c; }
  // A quoted label value with the format's three escapes.
  bool QuotedValue(std::string& out) {
    if (!Consume('"')) return false;
    out.clear();
    while (pos_ < line_.size()) {
      const char c = line_[pos_++];
      if (c == '"') return IsValidUtf8(out);
      if (c == '\n') return false;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= line_.size()) return false;
      const char escaped = line_[pos_++];
      if (escaped == '\\') {
        out += '\\';
      } else if (escaped == '"') {
        out += '"';
      } else if (escaped == 'n') {
        out += '\n';
      } else {
        return false;
      }
    }
    return false;
  }
  std::string_view Rest() const { return line_.substr(pos_); }

 private:
  std::string_view line_;
  std::size_t pos_ = 0;
};

bool ParseValue(std::string_view text, double& value) {
  if (text == "NaN" || text == "+Inf" || text == "-Inf") {
    value = text == "NaN" ? std::numeric_limits<double>::quiet_NaN()
            : text == "+Inf" ? std::numeric_limits<double>::infinity()
                              : -std::numeric_limits<double>::infinity();
    return true;
  }
  if (text.empty()) return false;
  const std::string copy(text);
  char* end = nullptr;
  value = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size() && copy.find_first_of("xXpP") == std::string::npos;
}

}  // namespace

Exposition ParseExposition(std::string_view text) {
  Exposition result;
  std::set<std::string> closed;  // families whose block has ended
  std::string current;
  std::size_t line_number = 0;
  auto fail = [&](std::string what) {
    result.error = "line " + std::to_string(line_number) + ": " + what;
    return result;
  };
  while (!text.empty()) {
    ++line_number;
    const std::size_t end = text.find('\n');
    if (end == std::string_view::npos) return fail("the text does not end with a newline");
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    if (line.empty()) continue;
    if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
      LineReader reader(line.substr(7));
      std::string name;
      if (!reader.MetricName(name) || !reader.Consume(' ')) return fail("bad comment");
      if (name != current) {
        if (closed.contains(name)) return fail(name + " appears in two blocks");
        if (!current.empty()) closed.insert(current);
        current = name;
      }
      Family& family = result.families[name];
      if (line[2] == 'H') {
        std::string help;
        const std::string_view raw = reader.Rest();
        for (std::size_t i = 0; i < raw.size(); ++i) {
          if (raw[i] == '\\' && i + 1 < raw.size() && (raw[i + 1] == '\\' || raw[i + 1] == 'n')) {
            help += raw[i + 1] == 'n' ? '\n' : '\\';
            ++i;
          } else {
            help += raw[i];
          }
        }
        family.help = help;
      } else {
        if (!family.type.empty()) return fail("second # TYPE for " + name);
        if (!family.series.empty()) return fail("# TYPE after samples of " + name);
        const std::string type(reader.Rest());
        if (type != "counter" && type != "gauge" && type != "untyped") {
          return fail("type '" + type + "'");
        }
        family.type = type;
      }
      continue;
    }
    if (line.front() == '#') continue;

    LineReader reader(line);
    std::string name;
    if (!reader.MetricName(name)) return fail("no metric name");
    if (name != current) {
      if (closed.contains(name)) return fail(name + " appears in two blocks");
      if (!current.empty()) closed.insert(current);
      current = name;
    }
    std::vector<std::pair<std::string, std::string>> labels;
    if (reader.Consume('{')) {
      while (!reader.Consume('}')) {
        std::string label, value;
        if (!reader.LabelName(label) || !reader.Consume('=') || !reader.QuotedValue(value)) {
          return fail("bad label in " + name);
        }
        for (const auto& [seen, unused] : labels) {
          if (seen == label) return fail("label " + label + " twice");
        }
        labels.emplace_back(label, value);
        if (!reader.Consume(',') && !reader.Peek('}')) return fail("bad label list in " + name);
      }
    }
    if (!reader.Consume(' ')) return fail("no space before the value of " + name);
    std::string_view rest = reader.Rest();
    const std::size_t space = rest.find(' ');
    double value = 0;
    if (!ParseValue(rest.substr(0, space), value)) return fail("bad value in " + name);
    auto family = result.families.find(name);
    if (family == result.families.end() || family->second.type.empty()) {
      return fail("sample of " + name + " before its # TYPE");
    }
    std::sort(labels.begin(), labels.end());
    std::string key;
    for (const auto& [label, label_value] : labels) {
      if (label_value.empty()) continue;
      if (!key.empty()) key += ',';
      key += label + "=\"" + label_value + "\"";
    }
    if (!family->second.series.emplace(key, value).second) {
      return fail("series " + name + "{" + key + "} twice");
    }
  }
  return result;
}

}  // namespace uplink::agent::node::text_format
