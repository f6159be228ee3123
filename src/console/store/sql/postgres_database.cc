#include "console/store/sql/postgres_database.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "console/store/sql/reconnect_gate.h"

namespace uplink::console::sql {
namespace {

const log::Logger& Log() {
  static const log::Logger logger("console.store.postgres");
  return logger;
}

// The type OIDs of pg_type that parameters are sent as (fixed since PostgreSQL 7).
constexpr Oid kUnknownOid = 0;  // text and NULL: the server gives them the column's type
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kFloat8Oid = 701;

// BEGIN IMMEDIATE's equivalent: the transaction-scoped advisory lock every replica's write
// transaction takes (its key is "uplink" in ASCII, 0x75706c696e6b). A writer waits as long
// as SQLite's busy timeout behind another, then fails with kBusy (55P03).
constexpr const char* kBeginWrite =
    "BEGIN; SET LOCAL lock_timeout = '5s'; SELECT pg_advisory_xact_lock(129125715635819)";

bool IsIdentifierByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || static_cast<unsigned char>(c) >= 0x80;
}

// The end (one past) of the construct starting at `at` that `?` must not be looked for in,
// or `at` when none starts there. An unterminated one runs to the end: the server reports it.
size_t SkipQuoted(std::string_view sql, size_t at) {
  const char c = sql[at];
  const char next = at + 1 < sql.size() ? sql[at + 1] : '\0';
  // E'...', where a backslash escapes the next character (E'it\'s'); not xe'...', which is an
  // identifier and a plain literal.
  if ((c == 'E' || c == 'e') && next == '\'' && (at == 0 || !IsIdentifierByte(sql[at - 1]))) {
    size_t i = at + 2;
    while (i < sql.size()) {
      if (sql[i] == '\\') {
        i += 2;
      } else if (sql[i] != '\'') {
        ++i;
      } else if (i + 1 < sql.size() && sql[i + 1] == '\'') {
        i += 2;
      } else {
        return i + 1;
      }
    }
    return sql.size();
  }
  if (c == '\'' || c == '"') {  // a doubled quote inside is an escaped one
    size_t i = at + 1;
    while (i < sql.size()) {
      if (sql[i] != c) {
        ++i;
      } else if (i + 1 < sql.size() && sql[i + 1] == c) {
        i += 2;
      } else {
        return i + 1;
      }
    }
    return sql.size();
  }
  if (c == '-' && next == '-') {
    size_t end = sql.find('\n', at);
    return end == std::string_view::npos ? sql.size() : end + 1;
  }
  if (c == '/' && next == '*') {  // PostgreSQL's block comments nest
    int depth = 0;
    size_t i = at;
    while (i + 1 < sql.size()) {
      if (sql[i] == '/' && sql[i + 1] == '*') {
        ++depth;
        i += 2;
      } else if (sql[i] == '*' && sql[i + 1] == '/') {
        i += 2;
        if (--depth == 0) return i;
      } else {
        ++i;
      }
    }
    return sql.size();
  }
  // $tag$ ... $tag$, where a `$` inside an identifier (a$b) or before a digit ($1) is not one.
  if (c == '$' && (at == 0 || !IsIdentifierByte(sql[at - 1])) && !(next >= '0' && next <= '9')) {
    size_t tag_end = at + 1;
    while (tag_end < sql.size() && IsIdentifierByte(sql[tag_end])) ++tag_end;
    if (tag_end >= sql.size() || sql[tag_end] != '$') return at;
    std::string_view tag = sql.substr(at, tag_end + 1 - at);
    size_t close = sql.find(tag, tag_end + 1);
    return close == std::string_view::npos ? sql.size() : close + tag.size();
  }
  return at;
}

// The message of a failed call on one line, without DETAIL: a constraint's DETAIL repeats the
// row's values, which may be token hashes or anything else the store keeps.
std::string OneLine(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

Failure FailureOfSqlState(std::string_view state, std::string_view constraint) {
  if (state == "23505") return constraint.ends_with("_pkey") ? Failure::kPrimaryKey : Failure::kUnique;
  if (state == "23503") return Failure::kForeignKey;
  if (state == "23514") return Failure::kCheck;
  if (state == "40001" || state == "40P01" || state == "55P03") return Failure::kBusy;
  if (state.starts_with("08") || state == "57P01" || state == "57P02" || state == "57P03") {
    return Failure::kUnavailable;
  }
  if (state == "XX001" || state == "XX002") return Failure::kCorrupt;
  return Failure::kOther;
}

// What a transaction-control statement run through Exec() does to the transaction.
enum class TransactionControl { kNone, kBegin, kCommit, kRollback };

TransactionControl TransactionControlOf(std::string_view sql) {
  auto word = [&sql]() {
    size_t start = sql.find_first_not_of(" \t\r\n");
    if (start == std::string_view::npos) return std::string();
    size_t end = start;
    while (end < sql.size() && IsIdentifierByte(sql[end])) ++end;
    std::string w(sql.substr(start, end - start));
    for (char& c : w) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    sql.remove_prefix(end);
    return w;
  };
  std::string first = word();
  if (first == "BEGIN" || first == "START") return TransactionControl::kBegin;
  if (first == "COMMIT" || first == "END") return TransactionControl::kCommit;
  // ROLLBACK TO [SAVEPOINT] x stays inside the transaction.
  if (first == "ROLLBACK" || first == "ABORT") {
    return word() == "TO" ? TransactionControl::kNone : TransactionControl::kRollback;
  }
  return TransactionControl::kNone;
}

// Whether `sql` undoes work (ROLLBACK, ROLLBACK TO): it must run even after a failure.
bool UndoesWork(std::string_view sql) {
  size_t start = sql.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return false;
  std::string word;
  for (size_t i = start; i < sql.size() && IsIdentifierByte(sql[i]); ++i) {
    word += static_cast<char>(std::toupper(static_cast<unsigned char>(sql[i])));
  }
  return word == "ROLLBACK" || word == "ABORT";
}

// Integers as the store reads them: booleans ('t'/'f') as 1/0; numerics ("12.000", SUM or AVG
// of bigints) and floats truncated toward zero and clamped, as SQLite converts them.
std::int64_t ParseInt(std::string_view text) {
  if (text == "t") return 1;
  if (text == "f") return 0;
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool fraction_follows =
      end != text.data() + text.size() && *end == '.' &&
      std::all_of(end + 1, text.data() + text.size(), [](char c) { return c >= '0' && c <= '9'; });
  if (error == std::errc() && (end == text.data() + text.size() || fraction_follows)) return value;
  double d = 0;
  if (std::from_chars(text.data(), text.data() + text.size(), d).ec != std::errc() ||
      std::isnan(d)) {
    return 0;
  }
  if (d >= 9223372036854775807.0) return std::numeric_limits<std::int64_t>::max();
  if (d <= -9223372036854775808.0) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(d);
}

double ParseDouble(std::string_view text) {
  if (text == "t") return 1;
  if (text == "f") return 0;
  double value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);  // NaN, Infinity included
  return value;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// bytea's output in the default hex format, "\x0a1b..."; nullopt when it is not that.
std::optional<std::string> DecodeByteaHex(std::string_view text) {
  if (!text.starts_with("\\x") || text.size() % 2 != 0) return std::nullopt;
  std::string bytes;
  bytes.resize((text.size() - 2) / 2);
  for (size_t i = 0; i < bytes.size(); ++i) {
    int high = HexDigit(text[2 + 2 * i]);
    int low = HexDigit(text[3 + 2 * i]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes[i] = static_cast<char>(high << 4 | low);
  }
  return bytes;
}

std::string BigEndian(std::uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 7; i >= 0; --i) {
    bytes[static_cast<size_t>(i)] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  return bytes;
}


Status StatusOfFailure(Failure failure, std::string message) {
  switch (failure) {
    case Failure::kBusy:
    case Failure::kUnavailable:
      return UnavailableError(std::move(message));
    case Failure::kCorrupt:
      return DataLossError(std::move(message));
    case Failure::kPrimaryKey:
    case Failure::kUnique:
      return AlreadyExistsError(std::move(message));
    case Failure::kForeignKey:
      return NotFoundError(std::move(message));
    case Failure::kCheck:
      return InvalidArgumentError(std::move(message));
    case Failure::kNone:
    case Failure::kOther:
      break;
  }
  return IOError(std::move(message));
}

class PostgresStatement;

class PostgresDatabase final : public Database {
 public:
  PostgresDatabase(PGconn* conn, PostgresOptions options)
      : conn_(conn),
        answer_timeout_(options.answer_timeout),
        reconnect_gate_(options.reconnect_gate != nullptr
                            ? std::move(options.reconnect_gate)
                            : std::make_shared<ReconnectGate>()),
        gate_failures_seen_(reconnect_gate_->failures()) {
    PQsetnonblocking(conn_, 1);
  }
  ~PostgresDatabase() override {
    statements_.clear();
    PQfinish(conn_);
  }
  PostgresDatabase(const PostgresDatabase&) = delete;
  PostgresDatabase& operator=(const PostgresDatabase&) = delete;

  Engine engine() const override { return Engine::kPostgres; }
  std::span<const Migration> Migrations() const override { return PostgresMigrations(); }
  Result<Statement*> Prepare(const std::string& sql) override;
  Status Exec(const std::string& sql) override { return Exec(sql, answer_timeout_); }
  Status ExecUnbounded(const std::string& sql) override { return Exec(sql, std::nullopt); }
  Status BeginWrite() override;
  Status BeginSnapshot() override {
    return Exec("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");
  }
  Status Defer(Statement& statement, std::string_view what) override;
  Status DeferExec(const std::string& sql) override;
  Status AwaitDeferred() override;
  std::int64_t DeferredSent() const override { return deferred_sent_; }
  std::int64_t DeferredAnswered() const override { return deferred_answered_; }
  std::optional<DeferredFailure> LastDeferredFailure() const override {
    return last_deferred_failure_;
  }
  bool InTransaction() const override {
    if (given_up_) return false;
    // Until their answers are read, deferred statements are taken to leave it as it was.
    if (!deferred_.empty()) return pipeline_in_transaction_;
    PGTransactionStatusType status = PQtransactionStatus(conn_);
    return status == PQTRANS_INTRANS || status == PQTRANS_INERROR;
  }
  Failure LastFailure() const override { return failure_; }
  std::string LastMessage() const override { return message_; }
  std::int64_t RoundTrips() const override { return round_trips_.load(std::memory_order_relaxed); }

  // Whether a statement may be sent now: connected (reconnecting when the connection was
  // lost) and not inside a transaction that the lost connection took with it. `control` is
  // what the statement does to the transaction.
  Status ReadyToSend(TransactionControl control);
  // Sends a query with one of libpq's PQsend* calls and waits for its result, at most `timeout`
  // (none: as long as the server takes); nullptr when it failed, the failure recorded.
  template <typename Send>
  PGresult* Run(Send send, std::optional<std::chrono::milliseconds> timeout);
  template <typename Send>
  PGresult* Run(Send send) { return Run(send, answer_timeout_); }
  // Sends a query with one of libpq's PQsend* calls in pipeline mode, its answer read by the
  // next AwaitDeferred() or Run(). `control` is what it does to the transaction.
  template <typename Send>
  Status SendDeferred(Send send, std::string_view what, TransactionControl control);
  bool HasDeferred() const { return !deferred_.empty(); }
  Status Fail(Failure failure, std::string message) {
    failure_ = failure;
    message_ = std::move(message);
    return StatusOfFailure(failure_, message_);
  }
  std::string NextStatementName() { return "uplink_" + std::to_string(++statements_named_); }
  PGconn* conn() { return conn_; }

 private:
  Status Exec(const std::string& sql, std::optional<std::chrono::milliseconds> timeout);
  // Ends the pipeline: a sync, then the answers of the deferred statements and, when
  // `last_sent`, of the query sent after them, which is returned in `last` when it and every
  // deferred one succeeded. False when one failed (the first failure recorded) or the
  // deadline passed (the connection given up).
  bool EndPipeline(bool last_sent, std::optional<std::chrono::milliseconds> timeout,
                   PGresult*& last);
  // Leaves pipeline mode; a connection that cannot is given up, to be made again.
  void LeavePipeline();
  // Records that the server did not answer within `timeout`.
  void RecordSilence(std::chrono::milliseconds timeout);
  // Reconnects a lost connection, when the gate lets this one try now.
  Status Reconnect();
  // Waits for the result of the query just sent, as PQexec returns it: the last one of a
  // multi-statement string, which the server ends at its first error. False when `deadline`
  // passed first: the connection is then given up.
  bool Await(std::optional<SteadyTime> deadline, PGresult*& result);
  // Sends what libpq holds unsent, reading whatever comes meanwhile, as libpq requires of a
  // nonblocking connection (the server may answer before it has read it all). False when
  // `deadline` passed first.
  bool FlushOut(std::optional<SteadyTime> deadline);
  // The next of libpq's results (null between queries' results), once it has come; false
  // when `deadline` passed first.
  bool NextResult(std::optional<SteadyTime> deadline, PGresult*& next);
  // Ends a wait the deadline cut short; returns false for Await to return.
  bool GiveUp(PGresult*& result);
  // Waits until the socket is ready for `events` (POLLIN, POLLOUT); false once `deadline` has
  // passed. A failed poll counts as ready: libpq's next call reports what is wrong.
  bool WaitForSocket(short events, std::optional<SteadyTime> deadline, short& ready);
  void RecordFailure(const PGresult* result);

  PGconn* conn_;
  const std::chrono::milliseconds answer_timeout_;
  const std::shared_ptr<ReconnectGate> reconnect_gate_;
  // The gate's failure count when this connection was made: a failure since then means this
  // one may be dead too.
  std::uint64_t gate_failures_seen_;
  std::unordered_map<std::string, std::unique_ptr<PostgresStatement>> statements_;
  std::uint64_t statements_named_ = 0;
  // The connection was lost inside a transaction: until the store ends it (ROLLBACK) or
  // begins another, statements would run outside the transaction it thinks it is in.
  bool transaction_lost_ = false;
  // The server did not answer in time and the connection was shut: reconnect before sending.
  bool given_up_ = false;
  // Statements sent in pipeline mode whose answers are not read yet, in the order sent.
  struct DeferredStatement {
    std::string what;
    TransactionControl control;
  };
  std::vector<DeferredStatement> deferred_;
  // Whether a transaction was open when the first of deferred_ was sent.
  bool pipeline_in_transaction_ = false;
  std::int64_t deferred_sent_ = 0;      // numbered from 0: deferred_ is the last ones of them
  std::int64_t deferred_answered_ = 0;  // every one numbered below has been answered
  std::optional<DeferredFailure> last_deferred_failure_;
  Failure failure_ = Failure::kNone;
  std::string message_;
  std::atomic<std::int64_t> round_trips_{0};  // written by the owner's thread only
};

class PostgresStatement final : public Statement {
 public:
  PostgresStatement(PostgresDatabase& db, NumberedSql sql)
      : db_(db), sql_(std::move(sql)), bindings_(static_cast<size_t>(sql_.parameters)) {}
  ~PostgresStatement() override { PQclear(result_); }
  PostgresStatement(const PostgresStatement&) = delete;
  PostgresStatement& operator=(const PostgresStatement&) = delete;

  void BindText(int index, std::string_view value, bool /*copy*/) override {
    // Text parameters travel as C strings, so they are always copied. PostgreSQL's text
    // cannot hold a NUL, which would silently cut the value short: refused at Step().
    if (value.find('\0') != std::string_view::npos) {
      bind_error_ = "parameter " + std::to_string(index) +
                    " is text with a NUL byte, which PostgreSQL's text cannot hold";
      return;
    }
    if (Binding* b = At(index)) *b = {Kind::kText, std::string(value), {}};
  }
  void BindBlob(int index, std::string_view bytes) override {
    if (Binding* b = At(index)) *b = {Kind::kBlob, {}, bytes};
  }
  void BindInt(int index, std::int64_t value) override {
    if (Binding* b = At(index)) *b = {Kind::kInt, BigEndian(static_cast<std::uint64_t>(value)), {}};
  }
  void BindDouble(int index, double value) override {
    if (Binding* b = At(index)) {
      *b = {Kind::kDouble, BigEndian(std::bit_cast<std::uint64_t>(value)), {}};
    }
  }
  void BindNull(int index) override {
    if (Binding* b = At(index)) *b = Binding{};
  }

  StepResult Step() override;
  // Sends the statement in pipeline mode (PostgresDatabase::Defer).
  Status SendDeferred(std::string_view what);

  std::string_view Text(int column) const override {
    if (!ValidCell(column)) return {};
    // A bytea column reads as its bytes, as SQLite reads a blob as text.
    if (PQftype(result_, column) == kByteaOid) return Blob(column);
    return RawCell(column);
  }
  std::string_view Blob(int column) const override {
    if (!ValidCell(column)) return {};
    std::string_view text = RawCell(column);
    if (PQftype(result_, column) != kByteaOid) return text;
    // Decoded once per row and column: the view stays valid until the next Step() or Reset().
    if (decoded_.empty()) decoded_.resize(static_cast<size_t>(PQnfields(result_)));
    auto& cached = decoded_[static_cast<size_t>(column)];
    if (!cached) cached = DecodeByteaHex(text).value_or(std::string(text));
    return *cached;
  }
  std::int64_t Int(int column) const override {
    return ValidCell(column) ? ParseInt(RawCell(column)) : 0;
  }
  double Double(int column) const override {
    return ValidCell(column) ? ParseDouble(RawCell(column)) : 0;
  }
  bool IsNull(int column) const override {
    return !ValidCell(column) || PQgetisnull(result_, row_, column);
  }

  std::int64_t Changes() const override {
    if (result_ == nullptr) return 0;
    std::string_view tuples = PQcmdTuples(result_);
    std::int64_t changes = 0;
    std::from_chars(tuples.data(), tuples.data() + tuples.size(), changes);
    return changes;
  }

  void Reset() override {
    PQclear(result_);
    result_ = nullptr;
    row_ = -1;
    executed_ = false;
    bind_error_.clear();
    std::fill(bindings_.begin(), bindings_.end(), Binding{});
    decoded_.clear();
  }

  // A new connection: the server knows none of this statement's prepared forms.
  void ForgetPrepared() { prepared_.clear(); }

 private:
  enum class Kind { kNull, kText, kBlob, kInt, kDouble };
  struct Binding {
    Kind kind = Kind::kNull;
    std::string owned;      // text, or an int8 or float8 in network byte order
    std::string_view blob;  // the caller's bytes, unchanged until Reset()
  };

  Binding* At(int index) {
    if (index >= 1 && index <= sql_.parameters) return &bindings_[static_cast<size_t>(index - 1)];
    bind_error_ = "parameter " + std::to_string(index) + " is out of range: the statement has " +
                  std::to_string(sql_.parameters);
    return nullptr;
  }

  bool ValidCell(int column) const {
    return result_ != nullptr && row_ >= 0 && row_ < PQntuples(result_) && column >= 0 &&
           column < PQnfields(result_);
  }
  std::string_view RawCell(int column) const {
    return {PQgetvalue(result_, row_, column),
            static_cast<size_t>(PQgetlength(result_, row_, column))};
  }

  // This statement's server-side name for parameters of `types`, prepared first when this
  // connection has not seen that combination; nullopt when preparing failed.
  std::optional<std::string> PreparedFor(const std::vector<Oid>& types);

  // The bindings as PQsendQueryPrepared takes them; valid while the bindings are unchanged.
  struct Parameters {
    std::vector<Oid> types;
    std::vector<const char*> values;
    std::vector<int> lengths;
    std::vector<int> formats;
  };
  Parameters Encode() const;
  // Checks the bindings and the connection and prepares the statement for them: the
  // statement's server-side name, or nullopt when that failed (the failure recorded).
  std::optional<std::string> ReadyToRun(const Parameters& parameters);

  PostgresDatabase& db_;
  const NumberedSql sql_;
  std::vector<Binding> bindings_;
  std::string bind_error_;
  std::map<std::vector<Oid>, std::string> prepared_;
  PGresult* result_ = nullptr;
  int row_ = -1;
  bool executed_ = false;
  mutable std::vector<std::optional<std::string>> decoded_;
};

Result<Statement*> PostgresDatabase::Prepare(const std::string& sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    it = statements_
             .emplace(sql, std::make_unique<PostgresStatement>(*this, NumberParameters(sql)))
             .first;
  }
  return it->second.get();
}

Status PostgresDatabase::Reconnect() {
  if (Status may = reconnect_gate_->TryBegin(); !may.ok()) {
    return Fail(Failure::kUnavailable, may.message());
  }
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string error = "PostgreSQL is unreachable: " + OneLine(PQerrorMessage(conn_));
    Log().Warn("reconnecting to PostgreSQL failed", {{"error", error}});
    reconnect_gate_->Failed(error);
    return Fail(Failure::kUnavailable, std::move(error));
  }
  gate_failures_seen_ = reconnect_gate_->failures();
  reconnect_gate_->Succeeded();
  given_up_ = false;
  PQsetnonblocking(conn_, 1);
  for (auto& [sql, statement] : statements_) statement->ForgetPrepared();
  Log().Info("reconnected to PostgreSQL");
  return Status::Ok();
}

Status PostgresDatabase::ReadyToSend(TransactionControl control) {
  // Deferred statements hold the connection in pipeline mode: a lost one is found by the
  // await that ends it.
  if (HasDeferred()) return Status::Ok();
  // A connection made before another of the store's failed is made again first (outside a
  // transaction, which would be lost with it), so that it fails fast through the gate rather
  // than waiting out its own answer timeout when the server is silent.
  const bool suspect =
      !InTransaction() && reconnect_gate_->failures() != gate_failures_seen_;
  if (given_up_ || suspect || PQstatus(conn_) != CONNECTION_OK) {
    UPLINK_RETURN_IF_ERROR(Reconnect());
  }
  if (transaction_lost_) {
    if (control != TransactionControl::kRollback && control != TransactionControl::kBegin) {
      return Fail(Failure::kUnavailable,
                  "the connection to PostgreSQL was lost inside a transaction, which the server "
                  "rolled back: roll back and start the transaction again");
    }
    transaction_lost_ = false;
  }
  return Status::Ok();
}

template <typename Send>
PGresult* PostgresDatabase::Run(Send send, std::optional<std::chrono::milliseconds> timeout) {
  PGresult* result = nullptr;
  if (HasDeferred()) {
    // After the deferred statements, in their pipeline: one round trip for all of them.
    if (send(conn_) == 1) {
      (void)EndPipeline(/*last_sent=*/true, timeout, result);
      return result;
    }
    std::string error = "PostgreSQL: " + OneLine(PQerrorMessage(conn_));
    if (EndPipeline(/*last_sent=*/false, timeout, result)) (void)Fail(Failure::kOther, error);
    return nullptr;
  }
  const bool was_in_transaction = InTransaction();
  std::optional<SteadyTime> deadline;
  if (timeout) deadline = std::chrono::steady_clock::now() + *timeout;
  const bool answered = send(conn_) != 1 || Await(deadline, result);
  ExecStatusType status = result != nullptr ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  if (answered) {
    RecordFailure(result);
  } else {
    RecordSilence(*timeout);
  }
  PQclear(result);
  if ((given_up_ || PQstatus(conn_) == CONNECTION_BAD) && was_in_transaction) {
    transaction_lost_ = true;
  }
  return nullptr;
}

bool PostgresDatabase::GiveUp(PGresult*& result) {
  // Shutting the socket makes libpq see the connection end now, rather than whenever the
  // server or the network gets round to answering.
  given_up_ = true;
  ::shutdown(PQsocket(conn_), SHUT_RDWR);
  PQclear(result);
  result = nullptr;
  while (PGresult* rest = PQgetResult(conn_)) PQclear(rest);
  return false;
}

bool PostgresDatabase::WaitForSocket(short events, std::optional<SteadyTime> deadline,
                                     short& ready) {
  for (;;) {
    int timeout_ms = -1;
    if (deadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      timeout_ms = static_cast<int>(std::min<std::int64_t>(left.count(), 60'000));
    }
    pollfd socket{PQsocket(conn_), events, 0};
    const int polled = ::poll(&socket, 1, timeout_ms);
    if (polled > 0 || (polled < 0 && errno != EINTR)) {
      ready = polled > 0 ? socket.revents : events;
      return true;
    }
  }
}

void PostgresDatabase::RecordSilence(std::chrono::milliseconds timeout) {
  failure_ = Failure::kUnavailable;
  message_ = "PostgreSQL did not answer within " +
             std::to_string(std::chrono::ceil<std::chrono::seconds>(timeout).count()) +
             " s: the connection was given up, and a later statement makes a new one";
  Log().Warn("gave up a PostgreSQL connection", {{"error", message_}});
  reconnect_gate_->GaveUp(message_);
}

bool PostgresDatabase::FlushOut(std::optional<SteadyTime> deadline) {
  short ready = 0;
  int flushed = PQflush(conn_);
  while (flushed > 0) {
    if (!WaitForSocket(POLLIN | POLLOUT, deadline, ready)) return false;
    if ((ready & POLLIN) != 0 && PQconsumeInput(conn_) == 0) break;
    flushed = PQflush(conn_);
  }
  return true;
}

bool PostgresDatabase::NextResult(std::optional<SteadyTime> deadline, PGresult*& next) {
  short ready = 0;
  while (PQisBusy(conn_) && PQstatus(conn_) == CONNECTION_OK) {
    if (!WaitForSocket(POLLIN, deadline, ready)) return false;
    if (PQconsumeInput(conn_) == 0) break;  // lost: PQgetResult says so
  }
  next = PQgetResult(conn_);
  return true;
}

bool PostgresDatabase::Await(std::optional<SteadyTime> deadline, PGresult*& result) {
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  // A nonblocking connection may hold part of the query unsent.
  if (!FlushOut(deadline)) return GiveUp(result);
  for (;;) {
    PGresult* next = nullptr;
    if (!NextResult(deadline, next)) return GiveUp(result);
    if (next == nullptr) return true;
    PQclear(result);
    result = next;
  }
}

template <typename Send>
Status PostgresDatabase::SendDeferred(Send send, std::string_view what,
                                      TransactionControl control) {
  if (!HasDeferred()) {
    pipeline_in_transaction_ = InTransaction();
    if (PQenterPipelineMode(conn_) != 1) {
      return Fail(Failure::kOther,
                  "PostgreSQL: entering pipeline mode: " + OneLine(PQerrorMessage(conn_)));
    }
  }
  if (send(conn_) != 1) {
    // Not sent: the pipeline ends here, and the failure reported is the first in it.
    std::string error = "PostgreSQL: " + OneLine(PQerrorMessage(conn_));
    PGresult* none = nullptr;
    if (!HasDeferred()) {
      LeavePipeline();
      return Fail(Failure::kOther, std::move(error));
    }
    if (EndPipeline(/*last_sent=*/false, answer_timeout_, none)) {
      return Fail(Failure::kOther, std::move(error));
    }
    return StatusOfFailure(failure_, message_);
  }
  deferred_.push_back({std::string(what), control});
  ++deferred_sent_;
  return Status::Ok();
}

void PostgresDatabase::LeavePipeline() {
  if (PQpipelineStatus(conn_) == PQ_PIPELINE_OFF || PQexitPipelineMode(conn_) == 1) return;
  // Results are left that cannot be told apart from the next query's: start afresh.
  if (PQstatus(conn_) == CONNECTION_OK) {
    Log().Warn("gave up a PostgreSQL connection left in pipeline mode",
               {{"error", OneLine(PQerrorMessage(conn_))}});
    given_up_ = true;
    ::shutdown(PQsocket(conn_), SHUT_RDWR);
  }
}

bool PostgresDatabase::EndPipeline(bool last_sent, std::optional<std::chrono::milliseconds> timeout,
                                   PGresult*& last) {
  const std::vector<DeferredStatement> sent = std::move(deferred_);
  deferred_.clear();
  const std::int64_t first_number = deferred_sent_ - static_cast<std::int64_t>(sent.size());
  deferred_answered_ = deferred_sent_;  // answered, or never to be once this returns
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  // The timeout bounds a silence, as it bounds one statement's answer: each answer that
  // comes starts it again, so a long pipeline is not cut short while the server works.
  std::optional<SteadyTime> deadline;
  auto restart_deadline = [&] {
    if (timeout) deadline = std::chrono::steady_clock::now() + *timeout;
  };
  restart_deadline();
  bool failed = false;
  std::optional<size_t> failed_deferred;  // its index in `sent`
  // The first failure is the one reported: those after it are the pipeline's abort.
  auto fail = [&](const PGresult* result, size_t index) {
    if (failed) return;
    failed = true;
    RecordFailure(result);
    if (index < sent.size()) {
      message_ = sent[index].what + ": " + message_;
      failed_deferred = index;
    }
  };
  bool silent = false;
  const size_t expected = sent.size() + (last_sent ? 1 : 0);
  if (PQpipelineSync(conn_) != 1) {
    fail(nullptr, sent.size());
    silent = true;  // no sync was sent, so none will come: the connection is given up
  } else if (!FlushOut(deadline)) {
    silent = true;
  }
  for (size_t i = 0; i < expected && !failed && !silent; ++i) {
    PGresult* result = nullptr;
    if (!NextResult(deadline, result)) {
      silent = true;
      break;
    }
    if (result == nullptr) {  // the connection is lost: no answer comes after this
      fail(nullptr, i);
      break;
    }
    restart_deadline();
    const ExecStatusType status = PQresultStatus(result);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      fail(result, i);
      PQclear(result);
    } else if (i < sent.size() && sent[i].control == TransactionControl::kCommit &&
               std::string_view(PQcmdStatus(result)) == "ROLLBACK") {
      // As Exec: a COMMIT that rolled back must not pass for a commit.
      PQclear(result);
      failed = true;
      failed_deferred = i;
      (void)Fail(Failure::kOther,
                 "COMMIT rolled the transaction back: a statement in it had failed");
    } else if (i == sent.size()) {
      last = result;
    } else {
      PQclear(result);
    }
    PGresult* end = nullptr;  // each query's results end with a null
    if (!NextResult(deadline, end)) silent = true;
    PQclear(end);
  }
  // What the failure aborted, then the sync. Two nulls in a row: nothing more is coming.
  int nulls = 0;
  while (!silent && PQstatus(conn_) == CONNECTION_OK && nulls < 2) {
    PGresult* result = nullptr;
    if (!NextResult(deadline, result)) {
      silent = true;
      break;
    }
    if (result == nullptr) {
      ++nulls;
      continue;
    }
    restart_deadline();
    nulls = 0;
    const bool synced = PQresultStatus(result) == PGRES_PIPELINE_SYNC;
    PQclear(result);
    if (synced) break;
  }
  if (silent) {
    PQclear(last);
    last = nullptr;
    (void)GiveUp(last);
    if (!failed) RecordSilence(timeout.value_or(answer_timeout_));
    failed = true;
  } else {
    LeavePipeline();
  }
  if ((given_up_ || PQstatus(conn_) == CONNECTION_BAD) && pipeline_in_transaction_) {
    transaction_lost_ = true;
    if (!failed) {
      failed = true;
      RecordFailure(nullptr);
    }
  }
  if (failed) {
    PQclear(last);
    last = nullptr;
  }
  if (failed_deferred) {
    last_deferred_failure_ = DeferredFailure{
        first_number + static_cast<std::int64_t>(*failed_deferred),
        StatusOfFailure(failure_, message_)};
  }
  return !failed;
}

Status PostgresDatabase::Defer(Statement& statement, std::string_view what) {
  auto& postgres = static_cast<PostgresStatement&>(statement);
  Status sent = postgres.SendDeferred(what);
  postgres.Reset();
  return sent;
}

Status PostgresDatabase::DeferExec(const std::string& sql) {
  const TransactionControl control = TransactionControlOf(sql);
  UPLINK_RETURN_IF_ERROR(ReadyToSend(control));
  return SendDeferred(
      [&sql](PGconn* conn) {
        return PQsendQueryParams(conn, sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0);
      },
      sql, control);
}

Status PostgresDatabase::AwaitDeferred() {
  if (!HasDeferred()) return Status::Ok();
  PGresult* none = nullptr;
  if (EndPipeline(/*last_sent=*/false, answer_timeout_, none)) return Status::Ok();
  return StatusOfFailure(failure_, message_);
}

void PostgresDatabase::RecordFailure(const PGresult* result) {
  if (PQstatus(conn_) == CONNECTION_BAD) {
    failure_ = Failure::kUnavailable;
    message_ = "the connection to PostgreSQL was lost: " + OneLine(PQerrorMessage(conn_));
    return;
  }
  auto field = [result](int code) -> std::string_view {
    const char* value = result != nullptr ? PQresultErrorField(result, code) : nullptr;
    return value != nullptr ? value : "";
  };
  std::string_view state = field(PG_DIAG_SQLSTATE);
  std::string_view primary = field(PG_DIAG_MESSAGE_PRIMARY);
  failure_ = FailureOfSqlState(state, field(PG_DIAG_CONSTRAINT_NAME));
  message_ = "PostgreSQL: " + OneLine(primary.empty() ? PQerrorMessage(conn_) : primary);
  if (!state.empty()) message_ += " (SQLSTATE " + std::string(state) + ")";
}

Status PostgresDatabase::Exec(const std::string& sql,
                              std::optional<std::chrono::milliseconds> timeout) {
  const TransactionControl control = TransactionControlOf(sql);
  // A string of several commands cannot join a pipeline: the deferred statements are awaited
  // first.
  if (Status deferred = AwaitDeferred(); !deferred.ok() && !UndoesWork(sql)) return deferred;
  UPLINK_RETURN_IF_ERROR(ReadyToSend(control));
  PGresult* result =
      Run([&sql](PGconn* conn) { return PQsendQuery(conn, sql.c_str()); }, timeout);
  if (result == nullptr) return StatusOfFailure(failure_, message_);
  // COMMIT of a transaction an earlier error aborted succeeds, as a ROLLBACK: SQLite would
  // have committed, so it must not pass for a commit.
  const bool rolled_back =
      control == TransactionControl::kCommit && std::string_view(PQcmdStatus(result)) == "ROLLBACK";
  PQclear(result);
  if (rolled_back) {
    return Fail(Failure::kOther,
                "COMMIT rolled the transaction back: a statement in it had failed");
  }
  return Status::Ok();
}

Status PostgresDatabase::BeginWrite() {
  UPLINK_RETURN_IF_ERROR(AwaitDeferred());
  UPLINK_RETURN_IF_ERROR(ReadyToSend(TransactionControl::kBegin));
  PGresult* result = Run([](PGconn* conn) { return PQsendQuery(conn, kBeginWrite); });
  if (result == nullptr) {
    // A lock that timed out leaves a failed transaction: end it, as a failed BEGIN IMMEDIATE
    // leaves none. The failure reported stays the lock's.
    Status status = StatusOfFailure(failure_, message_);
    if (InTransaction()) {
      const Failure failure = failure_;
      std::string message = std::move(message_);
      PQclear(Run([](PGconn* conn) { return PQsendQuery(conn, "ROLLBACK"); }));
      failure_ = failure;
      message_ = std::move(message);
    }
    return status;
  }
  PQclear(result);
  return Status::Ok();
}

std::optional<std::string> PostgresStatement::PreparedFor(const std::vector<Oid>& types) {
  auto it = prepared_.find(types);
  if (it != prepared_.end()) return it->second;
  std::string name = db_.NextStatementName();
  PGresult* result = db_.Run([&](PGconn* conn) {
    return PQsendPrepare(conn, name.c_str(), sql_.sql.c_str(), sql_.parameters, types.data());
  });
  if (result == nullptr) return std::nullopt;
  PQclear(result);
  prepared_.emplace(types, name);
  return name;
}

PostgresStatement::Parameters PostgresStatement::Encode() const {
  const size_t n = bindings_.size();
  Parameters p{std::vector<Oid>(n), std::vector<const char*>(n), std::vector<int>(n),
               std::vector<int>(n)};
  for (size_t i = 0; i < n; ++i) {
    const Binding& b = bindings_[i];
    switch (b.kind) {
      case Kind::kNull:
        p.types[i] = kUnknownOid;
        p.values[i] = nullptr;
        break;
      case Kind::kText:
        p.types[i] = kUnknownOid;
        p.values[i] = b.owned.c_str();
        break;
      case Kind::kBlob:
        p.types[i] = kByteaOid;
        // libpq takes a null pointer for NULL: an empty blob must still point somewhere.
        p.values[i] = b.blob.empty() ? "" : b.blob.data();
        p.lengths[i] = static_cast<int>(b.blob.size());
        p.formats[i] = 1;
        break;
      case Kind::kInt:
      case Kind::kDouble:
        p.types[i] = b.kind == Kind::kInt ? kInt8Oid : kFloat8Oid;
        p.values[i] = b.owned.data();
        p.lengths[i] = 8;
        p.formats[i] = 1;
        break;
    }
  }
  return p;
}

std::optional<std::string> PostgresStatement::ReadyToRun(const Parameters& parameters) {
  if (!bind_error_.empty()) {
    (void)db_.Fail(Failure::kOther, bind_error_);
    return std::nullopt;
  }
  if (!db_.ReadyToSend(TransactionControl::kNone).ok()) return std::nullopt;
  return PreparedFor(parameters.types);
}

Statement::StepResult PostgresStatement::Step() {
  if (executed_) {
    decoded_.clear();
    return ++row_ < PQntuples(result_) ? StepResult::kRow : StepResult::kDone;
  }
  const Parameters p = Encode();
  std::optional<std::string> name = ReadyToRun(p);
  if (!name) return StepResult::kError;
  result_ = db_.Run([&](PGconn* conn) {
    return PQsendQueryPrepared(conn, name->c_str(), static_cast<int>(p.values.size()),
                               p.values.data(), p.lengths.data(), p.formats.data(),
                               /*resultFormat=*/0);
  });
  if (result_ == nullptr) return StepResult::kError;
  executed_ = true;
  row_ = 0;
  return row_ < PQntuples(result_) ? StepResult::kRow : StepResult::kDone;
}

Status PostgresStatement::SendDeferred(std::string_view what) {
  const Parameters p = Encode();
  std::optional<std::string> name = ReadyToRun(p);
  if (!name) return StatusOfFailure(db_.LastFailure(), db_.LastMessage());
  // libpq copies the parameters into its buffer here: the bindings may go once it returns.
  return db_.SendDeferred(
      [&](PGconn* conn) {
        return PQsendQueryPrepared(conn, name->c_str(), static_cast<int>(p.values.size()),
                                   p.values.data(), p.lengths.data(), p.formats.data(),
                                   /*resultFormat=*/0);
      },
      what, TransactionControl::kNone);
}

constexpr std::string_view kPasswordHelp =
    "put the password in a file given with --store-password-file, or in PGPASSWORD or the "
    "PGPASSFILE (~/.pgpass) of the user the console runs as";

// Whether every % starts an escape of two hex digits, as libpq requires (it refuses %00 too:
// the value would end at it). Checked here so that libpq never quotes a bad token back.
bool ValidPercentEscapes(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') continue;
    if (i + 2 >= text.size()) return false;
    int high = HexDigit(text[i + 1]);
    int low = HexDigit(text[i + 2]);
    if (high < 0 || low < 0 || (high == 0 && low == 0)) return false;
    i += 2;
  }
  return true;
}

// `text` has valid escapes only (ValidPercentEscapes).
std::string PercentDecode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      out += static_cast<char>(HexDigit(text[i + 1]) << 4 | HexDigit(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

NumberedSql NumberParameters(std::string_view sql) {
  NumberedSql out;
  out.sql.reserve(sql.size() + 16);
  size_t i = 0;
  while (i < sql.size()) {
    size_t skipped = SkipQuoted(sql, i);
    if (skipped != i) {
      out.sql.append(sql.substr(i, skipped - i));
      i = skipped;
    } else if (sql[i] == '?') {
      out.sql += '$';
      out.sql += std::to_string(++out.parameters);
      ++i;
    } else {
      out.sql += sql[i++];
    }
  }
  return out;
}

Result<PostgresLocation> ParsePostgresLocation(std::string_view url) {
  // No error below repeats any part of the URL: it may hold a password.
  constexpr size_t kMaxLength = 4096;
  if (url.empty()) {
    return InvalidArgumentError("the store URL is empty: give postgres://[user@]host[:port]/database");
  }
  if (url.size() > kMaxLength) {
    return InvalidArgumentError("the store URL is longer than " + std::to_string(kMaxLength) +
                                " bytes");
  }
  if (std::any_of(url.begin(), url.end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
      })) {
    return InvalidArgumentError("the store URL contains a control character or a NUL byte");
  }
  std::string_view rest;
  for (std::string_view scheme : {"postgresql://", "postgres://"}) {
    if (url.starts_with(scheme)) rest = url.substr(scheme.size());
  }
  if (rest.data() == nullptr) {
    return InvalidArgumentError(
        "the store URL must begin with postgres:// or postgresql:// (libpq's URL form)");
  }
  if (!ValidPercentEscapes(url)) {
    return InvalidArgumentError(
        "the store URL has a % that does not start an escape of two hex digits (or is %00)");
  }
  const std::string password_error =
      "the store URL carries a password, and a URL shows in process lists, shell history and "
      "logs: remove it from the URL and " + std::string(kPasswordHelp);
  // As libpq reads it: user[:password]@ when an @ comes before the first /.
  size_t at = rest.find_first_of("@/");
  if (at != std::string_view::npos && rest[at] == '@') {
    std::string_view userinfo = rest.substr(0, at);
    size_t colon = userinfo.find(':');
    if (colon != std::string_view::npos && colon + 1 < userinfo.size()) {
      return InvalidArgumentError(password_error);
    }
    rest.remove_prefix(at + 1);
  }
  if (size_t query = rest.find('?'); query != std::string_view::npos) {
    std::string_view parameters = rest.substr(query + 1);
    while (!parameters.empty()) {
      size_t amp = parameters.find('&');
      std::string_view parameter = parameters.substr(0, amp);
      parameters.remove_prefix(amp == std::string_view::npos ? parameters.size() : amp + 1);
      std::string key = PercentDecode(parameter.substr(0, parameter.find('=')));
      if (key == "password" || key == "sslpassword") return InvalidArgumentError(password_error);
    }
  }
  return PostgresLocation{std::string(url), std::nullopt};
}

void PgConnectionClose::operator()(pg_conn* conn) const { PQfinish(conn); }

std::string OneLinePostgresMessage(std::string_view text) { return OneLine(text); }

Result<PgConnection> ConnectPostgres(const PostgresLocation& where, const char* application_name) {
  UPLINK_ASSIGN_OR_RETURN(PostgresLocation checked, ParsePostgresLocation(where.url));
  // Keywords before dbname are defaults the URL may override; client_encoding after it is
  // not overridable: the store's text is UTF-8.
  // Over TCP, a server or network that goes silent is noticed by keepalives on an idle
  // connection (the replica bus's LISTEN: after 10 + 3 x 5 s) and by tcp_user_timeout when
  // sent data goes unacknowledged for 15 s, instead of the kernel's default of about 15 min.
  std::vector<const char*> keywords = {"application_name", "connect_timeout", "keepalives",
                                       "keepalives_idle", "keepalives_interval",
                                       "keepalives_count", "tcp_user_timeout"};
  std::vector<const char*> values = {application_name, "10", "1", "10", "5", "3", "15000"};
  if (where.password) {
    keywords.push_back("password");
    values.push_back(where.password->c_str());
  }
  keywords.insert(keywords.end(), {"dbname", "client_encoding", nullptr});
  values.insert(values.end(), {checked.url.c_str(), "UTF8", nullptr});
  PgConnection conn(PQconnectdbParams(keywords.data(), values.data(), /*expand_dbname=*/1));
  if (conn == nullptr) return UnavailableError("connecting to PostgreSQL: out of memory");
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return UnavailableError("connecting to PostgreSQL: " + OneLine(PQerrorMessage(conn.get())));
  }
  // Errors without DETAIL or CONTEXT, which may quote the row; notices to the log at debug
  // level rather than libpq's default of raw stderr.
  PQsetErrorVerbosity(conn.get(), PQERRORS_TERSE);
  PQsetNoticeProcessor(
      conn.get(),
      [](void*, const char* message) { Log().Debug("notice", {{"message", OneLine(message)}}); },
      nullptr);
  return conn;
}

Result<std::unique_ptr<Database>> OpenPostgresDatabase(const PostgresLocation& where,
                                                       PostgresOptions options) {
  UPLINK_ASSIGN_OR_RETURN(PgConnection conn, ConnectPostgres(where));
  return std::unique_ptr<Database>(
      std::make_unique<PostgresDatabase>(conn.release(), std::move(options)));
}

}  // namespace uplink::console::sql
