#include "kubesim/protobuf.h"

#include <cstdint>
#include <functional>

#include "common/crypto.h"

namespace uplink::kubesim {
namespace {

// A protobuf reader over one message; every read is bounds-checked.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool done() const { return position_ >= data_.size(); }

  Result<std::uint64_t> Varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) return InvalidArgumentError("protobuf body: truncated varint");
      auto byte = static_cast<std::uint8_t>(data_[position_++]);
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    return InvalidArgumentError("protobuf body: varint too long");
  }

  // Reads one field: its number, and its bytes for length-delimited fields (others skipped).
  Status Next(std::uint32_t& field, std::string_view& bytes, bool& length_delimited,
              std::uint64_t& varint) {
    UPLINK_ASSIGN_OR_RETURN(std::uint64_t key, Varint());
    field = static_cast<std::uint32_t>(key >> 3);
    length_delimited = false;
    switch (key & 7) {
      case 0: {
        UPLINK_ASSIGN_OR_RETURN(varint, Varint());
        return Status::Ok();
      }
      case 1: return Skip(8);
      case 5: return Skip(4);
      case 2: {
        UPLINK_ASSIGN_OR_RETURN(std::uint64_t length, Varint());
        if (length > data_.size() - position_) {
          return InvalidArgumentError("protobuf body: field longer than the message");
        }
        bytes = data_.substr(position_, length);
        position_ += length;
        length_delimited = true;
        return Status::Ok();
      }
      default: return InvalidArgumentError("protobuf body: unsupported wire type");
    }
  }

 private:
  Status Skip(size_t count) {
    if (count > data_.size() - position_) return InvalidArgumentError("protobuf body: truncated");
    position_ += count;
    return Status::Ok();
  }
  std::string_view data_;
  size_t position_ = 0;
};

using FieldHandler = std::function<Status(std::uint32_t field, std::string_view bytes)>;

// Calls `handler` for each length-delimited field of a message.
Status ForEachBytesField(std::string_view message, const FieldHandler& handler) {
  Reader reader(message);
  while (!reader.done()) {
    std::uint32_t field = 0;
    std::string_view bytes;
    bool length_delimited = false;
    std::uint64_t varint = 0;
    UPLINK_RETURN_IF_ERROR(reader.Next(field, bytes, length_delimited, varint));
    if (length_delimited) UPLINK_RETURN_IF_ERROR(handler(field, bytes));
  }
  return Status::Ok();
}

// A map<string,string|bytes> entry: key = 1, value = 2.
Status AddMapEntry(std::string_view entry, json::object& target, bool base64_value) {
  std::string key, value;
  UPLINK_RETURN_IF_ERROR(ForEachBytesField(entry, [&](std::uint32_t field, std::string_view bytes) {
    if (field == 1) key = bytes;
    if (field == 2) value = bytes;
    return Status::Ok();
  }));
  target[key] = base64_value ? Base64Encode(value) : value;
  return Status::Ok();
}

Result<json::object> DecodeObjectMeta(std::string_view message) {
  json::object metadata;
  json::object labels, annotations;
  UPLINK_RETURN_IF_ERROR(ForEachBytesField(message, [&](std::uint32_t field, std::string_view bytes) {
    switch (field) {
      case 1: metadata["name"] = bytes; break;
      case 2: metadata["generateName"] = bytes; break;
      case 3: metadata["namespace"] = bytes; break;
      case 11: return AddMapEntry(bytes, labels, false);
      case 12: return AddMapEntry(bytes, annotations, false);
      default: break;
    }
    return Status::Ok();
  }));
  if (!labels.empty()) metadata["labels"] = std::move(labels);
  if (!annotations.empty()) metadata["annotations"] = std::move(annotations);
  return metadata;
}

}  // namespace

Result<json::object> DecodeProtobufObject(std::string_view body) {
  constexpr std::string_view kMagic("k8s\0", 4);
  if (!body.starts_with(kMagic)) {
    return InvalidArgumentError("protobuf body does not start with the k8s magic number");
  }
  std::string api_version, kind;
  std::string_view raw;
  UPLINK_RETURN_IF_ERROR(ForEachBytesField(body.substr(4), [&](std::uint32_t field, std::string_view bytes) {
    if (field == 2) raw = bytes;
    if (field != 1) return Status::Ok();
    return ForEachBytesField(bytes, [&](std::uint32_t type_field, std::string_view value) {
      if (type_field == 1) api_version = value;
      if (type_field == 2) kind = value;
      return Status::Ok();
    });
  }));
  if (api_version != "v1" || (kind != "ConfigMap" && kind != "Namespace")) {
    return InvalidArgumentError("protobuf bodies are accepted for v1 ConfigMap and Namespace only, not " +
                                api_version.substr(0, 64) + " " + kind.substr(0, 64) +
                                "; send application/json");
  }
  json::object object{{"apiVersion", api_version}, {"kind", kind}};
  json::object data, binary_data;
  json::array finalizers;
  UPLINK_RETURN_IF_ERROR(ForEachBytesField(raw, [&](std::uint32_t field, std::string_view bytes) -> Status {
    if (field == 1) {
      UPLINK_ASSIGN_OR_RETURN(object["metadata"], DecodeObjectMeta(bytes));
    } else if (kind == "ConfigMap" && field == 2) {
      return AddMapEntry(bytes, data, false);
    } else if (kind == "ConfigMap" && field == 3) {
      return AddMapEntry(bytes, binary_data, true);
    } else if (kind == "Namespace" && field == 2) {
      return ForEachBytesField(bytes, [&](std::uint32_t spec_field, std::string_view value) {
        if (spec_field == 1) finalizers.emplace_back(value);
        return Status::Ok();
      });
    }
    return Status::Ok();
  }));
  if (!data.empty()) object["data"] = std::move(data);
  if (!binary_data.empty()) object["binaryData"] = std::move(binary_data);
  if (!finalizers.empty()) object["spec"] = json::object{{"finalizers", std::move(finalizers)}};
  return object;
}

}  // namespace uplink::kubesim
