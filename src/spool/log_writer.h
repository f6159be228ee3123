// Encodes records in the segment format (log_format.h) into a buffer, so that the spool can
// write a whole group of records with one Append and make it durable with one Sync.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace uplink::spool::framing {

class Writer {
 public:
  // `file_offset`: where the next encoded byte will land in the file (its current size);
  // the block position follows from it, so a writer resumes at any offset.
  explicit Writer(std::uint64_t file_offset = 0) : offset_(file_offset) {}

  // Appends the fragments of one record, and any block trailer before them, to `out`.
  void AddRecord(std::uint64_t sequence, std::string_view record, std::string* out);

  // The file offset after everything encoded so far.
  std::uint64_t offset() const { return offset_; }

 private:
  std::uint64_t offset_;
};

}  // namespace uplink::spool::framing
