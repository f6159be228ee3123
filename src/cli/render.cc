#include "cli/render.h"

#include <algorithm>

#include "common/text.h"

namespace uplink::cli {
namespace {

// Characters, counting each UTF-8 sequence once.
size_t DisplayWidth(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

void Pad(std::ostream& out, std::string_view text, size_t width) {
  out << text;
  for (size_t w = DisplayWidth(text); w < width; ++w) out << ' ';
}

}  // namespace

std::string Display(const json::value* value, size_t max_chars) {
  if (value == nullptr || value->is_null()) return "-";
  if (value->is_bool()) return value->get_bool() ? "yes" : "no";
  if (value->is_int64()) return std::to_string(value->get_int64());
  if (value->is_uint64()) return std::to_string(value->get_uint64());
  if (value->is_double()) return OneLineExcerpt(json::serialize(*value), 32);
  if (value->is_string()) {
    std::string_view text = value->get_string();
    return text.empty() ? "-" : OneLineExcerpt(text, max_chars);
  }
  return value->is_array() ? "(list)" : "(object)";
}

std::string Display(const json::object& object, std::string_view key, size_t max_chars) {
  return Display(object.if_contains(key), max_chars);
}

std::string DisplayJson(const json::object& object, std::string_view key, size_t max_chars) {
  const json::value* value = object.if_contains(key);
  if (value != nullptr && (value->is_object() || value->is_array())) {
    return OneLineExcerpt(json::serialize(*value), max_chars);
  }
  return Display(value, max_chars);
}

const json::object* ObjectField(const json::object& object, std::string_view key) {
  const json::value* v = object.if_contains(key);
  return v != nullptr && v->is_object() ? &v->get_object() : nullptr;
}

const json::array* ArrayField(const json::object& object, std::string_view key) {
  const json::value* v = object.if_contains(key);
  return v != nullptr && v->is_array() ? &v->get_array() : nullptr;
}

std::optional<std::string> StringField(const json::object& object, std::string_view key) {
  const json::value* v = object.if_contains(key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return std::string(v->get_string());
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

void Table::Render(std::ostream& out) const {
  std::vector<size_t> widths(headers_.size());
  for (size_t i = 0; i < headers_.size(); ++i) widths[i] = DisplayWidth(headers_[i]);
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], DisplayWidth(row[i]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i + 1 == cells.size()) {
        out << cells[i];
      } else {
        Pad(out, cells[i], widths[i] + 2);
      }
    }
    out << "\n";
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
}

void Fields::Add(std::string label, std::string value) {
  lines_.emplace_back(std::move(label), std::move(value));
}

void Fields::Render(std::ostream& out) const {
  size_t width = 0;
  for (const auto& [label, value] : lines_) width = std::max(width, DisplayWidth(label) + 1);
  for (const auto& [label, value] : lines_) {
    Pad(out, label + ":", width + 2);
    out << value << "\n";
  }
}

}  // namespace uplink::cli
