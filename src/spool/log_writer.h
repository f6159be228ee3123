// Encodes records in the segment format (log_format.h), either into a buffer or as the
// pieces of one vectored write (the framing, and slices of the record in place), which the
// spool then writes at the offset the encoding started from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace uplink::spool::framing {

class Writer {
 public:
  // `file_offset`: where the next encoded byte will land in the file (its current size);
  // the block position follows from it, so a writer resumes at any offset.
  explicit Writer(std::uint64_t file_offset = 0) : offset_(file_offset) {}

  // Appends the fragments of one record, and any block trailer before them, to `out`.
  void AddRecord(std::uint64_t sequence, std::string_view record, std::string* out);
  // The same for the record `head` followed by `tail`, without joining them first.
  void AddRecord(std::uint64_t sequence, std::string_view head, std::string_view tail,
                 std::string* out);

  // The same without copying the record: `framing` receives the headers and trailers, and
  // `pieces` (appended to) the encoding in order, as views into `framing`, `head` and `tail`,
  // valid while those are unchanged. `framing` must be empty.
  void AddRecordPieces(std::uint64_t sequence, std::string_view head, std::string_view tail,
                       std::string* framing, std::vector<std::string_view>* pieces);

  // The file offset after everything encoded so far.
  std::uint64_t offset() const { return offset_; }

  // Where a record of `length` bytes that starts at `file_offset` ends once encoded: lets
  // the spool reserve a record's place before it encodes the record.
  static std::uint64_t EncodedEnd(std::uint64_t file_offset, std::uint64_t length);

 private:
  std::uint64_t offset_;
};

}  // namespace uplink::spool::framing
