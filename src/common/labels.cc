#include "common/labels.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "common/kubernetes_names.h"

namespace uplink::labels {
namespace {

constexpr size_t kMaxNameLength = 63;

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Quotes user text for an error message, cutting it short and escaping control bytes so a
// hostile selector cannot flood or garble a log line.
std::string Quote(std::string_view text) {
  constexpr size_t kMaxShown = 80;
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMaxShown) out += "...";
  return out + "\"";
}

// The "name" part of a key, and every non-empty value.
bool IsQualifiedName(std::string_view text) {
  if (text.empty() || text.size() > kMaxNameLength) return false;
  if (!IsAlnum(text.front()) || !IsAlnum(text.back())) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}


enum class TokenKind {
  kEnd,
  kIdentifier,
  kNot,           // !
  kEquals,        // =
  kDoubleEquals,  // ==
  kNotEquals,     // !=
  kGreaterThan,   // >
  kLessThan,      // <
  kOpenParen,
  kCloseParen,
  kComma,
  kIn,
  kNotIn,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;
  size_t position = 0;
};

bool IsSpecial(char c) {
  return c == '!' || c == '=' || c == '(' || c == ')' || c == ',' || c == '<' || c == '>';
}
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Splits the selector the way apimachinery's lexer does: identifiers are runs of anything
// that is neither whitespace nor one of the operator characters.
std::vector<Token> Tokenize(std::string_view text) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (IsSpace(c)) {
      ++i;
      continue;
    }
    Token token;
    token.position = i;
    if (IsSpecial(c)) {
      bool followed_by_equals = i + 1 < text.size() && text[i + 1] == '=';
      size_t length = 1;
      switch (c) {
        case '!':
          token.kind = followed_by_equals ? TokenKind::kNotEquals : TokenKind::kNot;
          length = followed_by_equals ? 2 : 1;
          break;
        case '=':
          token.kind = followed_by_equals ? TokenKind::kDoubleEquals : TokenKind::kEquals;
          length = followed_by_equals ? 2 : 1;
          break;
        case '(': token.kind = TokenKind::kOpenParen; break;
        case ')': token.kind = TokenKind::kCloseParen; break;
        case ',': token.kind = TokenKind::kComma; break;
        case '<': token.kind = TokenKind::kLessThan; break;
        default: token.kind = TokenKind::kGreaterThan; break;
      }
      token.text = text.substr(i, length);
      i += length;
    } else {
      size_t start = i;
      while (i < text.size() && !IsSpace(text[i]) && !IsSpecial(text[i])) ++i;
      token.text = text.substr(start, i - start);
      token.kind = token.text == "in"      ? TokenKind::kIn
                   : token.text == "notin" ? TokenKind::kNotIn
                                           : TokenKind::kIdentifier;
    }
    tokens.push_back(token);
  }
  tokens.push_back(Token{TokenKind::kEnd, {}, text.size()});
  return tokens;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : tokens_(Tokenize(text)) {}

  Result<std::vector<Requirement>> ParseAll() {
    std::vector<Requirement> requirements;
    if (Peek().kind == TokenKind::kEnd) return requirements;
    while (true) {
      UPLINK_ASSIGN_OR_RETURN(Requirement requirement, ParseRequirement());
      requirements.push_back(std::move(requirement));
      Token next = Next();
      if (next.kind == TokenKind::kEnd) return requirements;
      if (next.kind != TokenKind::kComma) return Unexpected(next, "',' or end of selector");
    }
  }

 private:
  const Token& Peek() const { return tokens_[index_]; }
  Token Next() {
    Token token = tokens_[index_];
    if (token.kind != TokenKind::kEnd) ++index_;
    return token;
  }

  static Status Unexpected(const Token& token, std::string_view expected) {
    std::string found = token.kind == TokenKind::kEnd ? "end of selector" : Quote(token.text);
    return InvalidArgumentError("label selector: found " + found + " at position " +
                                std::to_string(token.position) + ", expected " +
                                std::string(expected));
  }

  // In value position the keywords are ordinary words: "a=in" selects the value "in".
  static bool IsWord(const Token& token) {
    return token.kind == TokenKind::kIdentifier || token.kind == TokenKind::kIn ||
           token.kind == TokenKind::kNotIn;
  }

  Result<Requirement> ParseRequirement() {
    Requirement requirement;
    Token first = Next();
    bool negated = first.kind == TokenKind::kNot;
    Token key = negated ? Next() : first;
    if (key.kind != TokenKind::kIdentifier) {
      return Unexpected(key, negated ? "a label key" : "'!' or a label key");
    }
    requirement.key = std::string(key.text);
    if (Status status = ValidateLabelKey(key.text); !status.ok()) {
      return InvalidArgumentError("label selector: " + status.message());
    }
    TokenKind after = Peek().kind;
    if (negated || after == TokenKind::kEnd || after == TokenKind::kComma) {
      if (negated && after != TokenKind::kEnd && after != TokenKind::kComma) {
        return Unexpected(Peek(), "',' or end of selector after '!" + requirement.key + "'");
      }
      requirement.op = negated ? Operator::kDoesNotExist : Operator::kExists;
      return requirement;
    }
    Token op = Next();
    switch (op.kind) {
      case TokenKind::kEquals:
      case TokenKind::kDoubleEquals: requirement.op = Operator::kEquals; break;
      case TokenKind::kNotEquals: requirement.op = Operator::kNotEquals; break;
      case TokenKind::kGreaterThan: requirement.op = Operator::kGreaterThan; break;
      case TokenKind::kLessThan: requirement.op = Operator::kLessThan; break;
      case TokenKind::kIn: requirement.op = Operator::kIn; break;
      case TokenKind::kNotIn: requirement.op = Operator::kNotIn; break;
      default: return Unexpected(op, "an operator (=, ==, !=, in, notin, <, >)");
    }
    if (requirement.op == Operator::kIn || requirement.op == Operator::kNotIn) {
      UPLINK_ASSIGN_OR_RETURN(requirement.values, ParseValueSet(requirement.key));
    } else {
      UPLINK_ASSIGN_OR_RETURN(std::string value, ParseSingleValue());
      requirement.values.push_back(std::move(value));
    }
    UPLINK_RETURN_IF_ERROR(ValidateValues(requirement));
    return requirement;
  }

  // "a=" selects the empty value, as in apimachinery.
  Result<std::string> ParseSingleValue() {
    const Token& token = Peek();
    if (token.kind == TokenKind::kEnd || token.kind == TokenKind::kComma) return std::string();
    if (!IsWord(token)) return Unexpected(token, "a label value");
    return std::string(Next().text);
  }

  // "(x, y)"; an empty element ("(x,)") is the empty value.
  Result<std::vector<std::string>> ParseValueSet(const std::string& key) {
    Token open = Next();
    if (open.kind != TokenKind::kOpenParen) return Unexpected(open, "'('");
    std::vector<std::string> values;
    if (Peek().kind == TokenKind::kCloseParen) {
      return InvalidArgumentError("label selector: the value set for '" + key +
                                  "' is empty; 'in' and 'notin' need at least one value");
    }
    while (true) {
      if (IsWord(Peek())) {
        values.emplace_back(Next().text);
      } else {
        values.emplace_back();
      }
      Token separator = Next();
      if (separator.kind == TokenKind::kCloseParen) break;
      if (separator.kind != TokenKind::kComma) return Unexpected(separator, "',' or ')'");
    }
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return values;
  }

  static Status ValidateValues(const Requirement& requirement) {
    for (const std::string& value : requirement.values) {
      if (Status status = ValidateLabelValue(value); !status.ok()) {
        return InvalidArgumentError("label selector: " + status.message() + " (key " +
                                    Quote(requirement.key) + ")");
      }
    }
    if (requirement.op == Operator::kGreaterThan || requirement.op == Operator::kLessThan) {
      const std::string& value = requirement.values.front();
      std::int64_t number = 0;
      auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
      if (value.empty() || error != std::errc() || end != value.data() + value.size()) {
        return InvalidArgumentError("label selector: " + Quote(value) + " for '" +
                                    requirement.key +
                                    "' must be an integer for the '<' and '>' operators");
      }
    }
    return Status::Ok();
  }

  std::vector<Token> tokens_;
  size_t index_ = 0;
};

std::optional<std::int64_t> ParseInteger(std::string_view text) {
  std::int64_t number = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return number;
}

}  // namespace

Status ValidateLabelKey(std::string_view key) {
  std::string_view name = key;
  if (size_t slash = key.find('/'); slash != std::string_view::npos) {
    std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty()) return InvalidArgumentError("key " + Quote(key) + ": the prefix before '/' is empty");
    if (name.find('/') != std::string_view::npos) {
      return InvalidArgumentError("key " + Quote(key) + ": a key may contain at most one '/'");
    }
    if (!IsDnsSubdomain(prefix)) {
      return InvalidArgumentError(
          "key " + Quote(key) +
          ": the prefix must be a DNS subdomain (lower-case alphanumerics, '-' and '.', at "
          "most 253 characters, e.g. 'nvidia.com')");
    }
  }
  if (name.empty()) return InvalidArgumentError("key " + Quote(key) + ": the name part is empty");
  if (!IsQualifiedName(name)) {
    return InvalidArgumentError(
        "key " + Quote(key) +
        ": the name part must be at most 63 alphanumerics, '-', '_' or '.', starting and "
        "ending with an alphanumeric (e.g. 'gpu.product')");
  }
  return Status::Ok();
}

Status ValidateLabelValue(std::string_view value) {
  if (value.empty() || IsQualifiedName(value)) return Status::Ok();
  return InvalidArgumentError(
      "value " + Quote(value) +
      " must be empty or at most 63 alphanumerics, '-', '_' or '.', starting and ending with "
      "an alphanumeric");
}

bool Requirement::Matches(const LabelMap& labels) const {
  auto it = labels.find(key);
  bool present = it != labels.end();
  auto contains = [&](const std::string& value) {
    return std::find(values.begin(), values.end(), value) != values.end();
  };
  switch (op) {
    case Operator::kExists: return present;
    case Operator::kDoesNotExist: return !present;
    case Operator::kEquals:
    case Operator::kIn: return present && contains(it->second);
    case Operator::kNotEquals:
    case Operator::kNotIn: return !present || !contains(it->second);
    case Operator::kGreaterThan:
    case Operator::kLessThan: {
      if (!present) return false;
      std::optional<std::int64_t> actual = ParseInteger(it->second);
      std::optional<std::int64_t> bound = ParseInteger(values.front());
      if (!actual || !bound) return false;
      return op == Operator::kGreaterThan ? *actual > *bound : *actual < *bound;
    }
  }
  return false;
}

Result<Selector> Selector::Parse(std::string_view text) {
  if (text.size() > kMaxSelectorBytes) {
    return InvalidArgumentError("label selector is " + std::to_string(text.size()) +
                                " bytes; at most " + std::to_string(kMaxSelectorBytes) +
                                " are accepted");
  }
  Selector selector;
  UPLINK_ASSIGN_OR_RETURN(selector.requirements_, Parser(text).ParseAll());
  // apimachinery keeps requirements sorted by key; ToString() output then matches it.
  std::stable_sort(selector.requirements_.begin(), selector.requirements_.end(),
                   [](const Requirement& a, const Requirement& b) { return a.key < b.key; });
  return selector;
}

bool Selector::Matches(const LabelMap& labels) const {
  return std::all_of(requirements_.begin(), requirements_.end(),
                     [&](const Requirement& r) { return r.Matches(labels); });
}

std::string Selector::ToString() const {
  std::string out;
  for (const Requirement& r : requirements_) {
    if (!out.empty()) out += ',';
    auto joined = [&] {
      std::string list;
      // By position, not by emptiness: "" is a valid value and may come first. A set of only
      // "" needs a comma to be told from the empty set, which does not parse.
      for (size_t i = 0; i < r.values.size(); ++i) list += (i == 0 ? "" : ",") + r.values[i];
      if (r.values.size() == 1 && r.values[0].empty()) list = ",";
      return list;
    };
    switch (r.op) {
      case Operator::kExists: out += r.key; break;
      case Operator::kDoesNotExist: out += "!" + r.key; break;
      case Operator::kEquals: out += r.key + "=" + r.values.front(); break;
      case Operator::kNotEquals: out += r.key + "!=" + r.values.front(); break;
      case Operator::kGreaterThan: out += r.key + ">" + r.values.front(); break;
      case Operator::kLessThan: out += r.key + "<" + r.values.front(); break;
      case Operator::kIn: out += r.key + " in (" + joined() + ")"; break;
      case Operator::kNotIn: out += r.key + " notin (" + joined() + ")"; break;
    }
  }
  return out;
}

Result<std::string> CanonicalNodeSelector(std::string_view text) {
  auto selector = Selector::Parse(text);
  if (!selector.ok()) {
    std::string_view why = selector.status().message();
    if (why.starts_with("label selector: ")) why.remove_prefix(16);
    return InvalidArgumentError("not a label selector: " + std::string(why));
  }
  if (selector->empty()) {
    return InvalidArgumentError(
        "it must name the GPU nodes, e.g. nvidia.com/gpu.present=true: an empty selector would "
        "report every node");
  }
  return selector->ToString();
}

}  // namespace uplink::labels
