// Showing what the console sent: tables and key/value blocks for people, whatever the
// console put in a field. Every value passes through Display(), which never throws on a
// missing field or a wrong type and blanks control characters, so a hostile reply cannot
// move the cursor or rewrite the screen.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"

namespace uplink::cli {

// A value for a table cell: "-" for missing or null, yes/no for booleans, numbers as
// written, strings on one line (at most `max_chars`), and "(object)"/"(list)" otherwise.
std::string Display(const json::value* value, size_t max_chars = 120);
std::string Display(const json::object& object, std::string_view key, size_t max_chars = 120);

// Like Display, but objects and lists are shown as compact JSON, for free-form details.
std::string DisplayJson(const json::object& object, std::string_view key, size_t max_chars = 160);

// Typed access that treats a missing or wrongly typed field as absent.
const json::object* ObjectField(const json::object& object, std::string_view key);
const json::array* ArrayField(const json::object& object, std::string_view key);
std::optional<std::string> StringField(const json::object& object, std::string_view key);

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  // Missing cells are blank; extra cells are dropped.
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }
  // Columns as wide as their widest cell (in characters, not bytes), two spaces apart.
  void Render(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// "label:   value" lines with the values aligned.
class Fields {
 public:
  void Add(std::string label, std::string value);
  void Render(std::ostream& out) const;

 private:
  std::vector<std::pair<std::string, std::string>> lines_;
};

}  // namespace uplink::cli
