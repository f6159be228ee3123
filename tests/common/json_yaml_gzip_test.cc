#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>

#include "common/gzip.h"
#include "common/json.h"
#include "common/yaml.h"

namespace uplink {
namespace {

TEST(ParseJson, ParsesADocument) {
  auto value = ParseJson(R"({"a":[1,2,{"b":null}]})");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->at("a").as_array().size(), 3u);
}

TEST(ParseJson, RefusesTrailingDataTruncationAndGarbage) {
  for (const char* bad : {"{\"a\":1} x", "{\"a\":", "", "nul", "{'a':1}", "[1,]", "\x01"}) {
    auto value = ParseJson(bad);
    EXPECT_EQ(value.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ParseJson, RefusesDeepNestingAndOversizedInput) {
  std::string deep(1000, '[');
  deep += std::string(1000, ']');
  EXPECT_FALSE(ParseJson(deep).ok());
  JsonLimits small{.max_bytes = 10, .max_depth = 64};
  EXPECT_EQ(ParseJson("[1,2,3,4,5,6,7]", small).status().code(), StatusCode::kResourceExhausted);
}

TEST(ParseJson, RefusesNumbersBeyondDoubleRange) {
  auto value = ParseJson(R"({"gpus":1e400})");
  EXPECT_EQ(value.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseJson("[1e308, -1e308, 123456789012345678901234567890]").ok());
}

TEST(ParseJson, ADocumentInAnArenaIsTheSameAndSoAreItsRefusals) {
  const std::string text =
      R"({"a long key past the short-string size":[1,2.5,{"b":null,"c":"a string longer )"
      R"(than fourteen characters"}],"d":true})";
  json::monotonic_resource arena;
  auto in_arena = ParseJson(text, {}, &arena);
  ASSERT_TRUE(in_arena.ok()) << in_arena.status().ToString();
  EXPECT_EQ(in_arena->storage().get(), &arena);
  EXPECT_EQ(*in_arena, ParseJson(text).value());
  std::string deep(1000, '[');
  deep += std::string(1000, ']');
  EXPECT_EQ(ParseJson(deep, {}, &arena).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJson("[1e400]", {}, &arena).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJson("[1,2,3,4,5,6,7]", JsonLimits{.max_bytes = 10, .max_depth = 64}, &arena)
                .status()
                .code(),
            StatusCode::kResourceExhausted);
}

TEST(ParseYaml, TypesPlainScalarsAndKeepsQuotedOnesAsStrings) {
  auto value = ParseYaml("a: 1\nb: true\nc: '1'\nd: ~\ne: 1.5\nf: hello\ng: \"true\"\n");
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  const auto& o = value->as_object();
  EXPECT_EQ(o.at("a").as_int64(), 1);
  EXPECT_TRUE(o.at("b").as_bool());
  EXPECT_EQ(o.at("c").as_string(), "1");
  EXPECT_TRUE(o.at("d").is_null());
  EXPECT_DOUBLE_EQ(o.at("e").as_double(), 1.5);
  EXPECT_EQ(o.at("f").as_string(), "hello");
  EXPECT_EQ(o.at("g").as_string(), "true");
}

TEST(ParseYaml, ReadsEveryDocumentOfAStream) {
  auto docs = ParseYamlDocuments("---\nkind: A\n---\n---\nkind: B\n");
  ASSERT_TRUE(docs.ok());
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[1].at("kind").as_string(), "B");
}

TEST(ParseYaml, ReportsWhereBadYamlBreaks) {
  auto value = ParseYaml("a: [1, 2\nb: c\n");
  ASSERT_FALSE(value.ok());
  EXPECT_NE(value.status().message().find("line"), std::string::npos);
}

TEST(ParseYaml, RefusesNestingBombs) {
  std::string deep(200, '[');
  deep += std::string(200, ']');
  EXPECT_FALSE(ParseYaml(deep).ok());
}

TEST(ParseYaml, RefusesAliasExpansionBombs) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += std::string(1, c) + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev + ", *" +
            prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev +
            ", *" + prev + "]\n";
  }
  auto value = ParseYaml(bomb);  // 10^9 values if expanded
  EXPECT_EQ(value.status().code(), StatusCode::kResourceExhausted);
}

TEST(Gzip, RoundTrips) {
  std::string data(100000, 'x');
  auto back = GzipDecompress(GzipCompress(data).value(), 1 << 20);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, data);
}

TEST(Gzip, RoundTripsBodiesFedInSeveralChunks) {
  std::string data;
  for (std::int64_t i = 0; data.size() < (5u << 20) + 7; ++i) data += std::to_string(i * 7919) + ",";
  auto compressed = GzipCompress(data);
  ASSERT_TRUE(compressed.ok()) << compressed.status().ToString();
  auto back = GzipDecompress(*compressed, 16 << 20);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, data);
  auto empty = GzipCompress("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(GzipDecompress(*empty, 1).value_or("x"), "");
}

TEST(Gzip, AZlibFailureIsAnErrorNotAnEmptyBody) {
  auto bad_level = GzipCompress("hello", 42);
  EXPECT_EQ(bad_level.status().code(), StatusCode::kInternal);
}

TEST(Gzip, StopsABombAtTheLimit) {
  std::string bomb = GzipCompress(std::string(50 << 20, '\0')).value();
  EXPECT_LT(bomb.size(), 100000u);
  EXPECT_EQ(GzipDecompress(bomb, 1 << 20).status().code(), StatusCode::kResourceExhausted);
}

TEST(Gzip, RefusesCorruptTruncatedAndTrailingInput) {
  std::string good = GzipCompress("hello world, hello world").value();
  EXPECT_FALSE(GzipDecompress(good.substr(0, good.size() - 5), 1 << 20).ok());
  EXPECT_FALSE(GzipDecompress("not gzip at all", 1 << 20).ok());
  EXPECT_FALSE(GzipDecompress(good + "junk", 1 << 20).ok());
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x55;
  EXPECT_FALSE(GzipDecompress(flipped, 1 << 20).ok());
}

// The trailer's stated size only sizes the first buffer: zlib checks it, so a lie is refused.
TEST(Gzip, RefusesATrailerThatMisstatesTheSize) {
  const std::string good = GzipCompress(std::string(100000, 'a')).value();
  for (const unsigned char top : {0x00, 0xff}) {
    std::string lying = good;
    lying[lying.size() - 1] = static_cast<char>(top);  // ISIZE's high byte: 0 or ~4 GiB
    lying[lying.size() - 2] = static_cast<char>(top);
    auto inflated = GzipDecompress(lying, 64 << 20);
    EXPECT_EQ(inflated.status().code(), StatusCode::kInvalidArgument) << int{top};
  }
}

TEST(Gzip, TheLimitIsInclusiveAndOutputGrowsPastTheFirstBuffer) {
  // Zeros compress over a thousand to one: far past what the first buffer believes.
  const std::string zeros(1 << 20, '\0');
  const std::string body = GzipCompress(zeros).value();
  ASSERT_GT(zeros.size() / body.size(), 256u);
  EXPECT_EQ(GzipDecompress(body, zeros.size()).value_or(""), zeros);
  EXPECT_EQ(GzipDecompress(body, zeros.size() - 1).status().code(),
            StatusCode::kResourceExhausted);
}

// A gzip member whose deflate data refers back into `dictionary`, as if the window still
// held it: what a body would send to read what came before it on the same inflater.
std::string GzipReferringTo(const std::string& dictionary, const std::string& text) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  EXPECT_EQ(deflateSetDictionary(&stream, reinterpret_cast<const Bytef*>(dictionary.data()),
                                 static_cast<uInt>(dictionary.size())),
            Z_OK);
  std::string raw(deflateBound(&stream, text.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(raw.data());
  stream.avail_out = static_cast<uInt>(raw.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  raw.resize(raw.size() - stream.avail_out);
  deflateEnd(&stream);
  auto le32 = [](std::uint32_t value) {
    return std::string{static_cast<char>(value), static_cast<char>(value >> 8),
                       static_cast<char>(value >> 16), static_cast<char>(value >> 24)};
  };
  const std::uint32_t crc = static_cast<std::uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size())));
  return std::string("\x1f\x8b\x08\0\0\0\0\0\0\xff", 10) + raw + le32(crc) +
         le32(static_cast<std::uint32_t>(text.size()));
}

// The inflater is kept for the thread's next body: what the last one inflated must not be
// reachable from it.
TEST(Gzip, ABodyCannotReferBackIntoTheBodyBeforeIt) {
  const std::string secret = "token agt_0123456789abcdef belongs to someone else";
  ASSERT_EQ(GzipDecompress(GzipCompress(secret).value(), 1 << 20).value_or(""), secret);
  const std::string probe = GzipReferringTo(secret, secret);
  ASSERT_LT(probe.size(), 10 + secret.size()) << "the probe does not refer back";
  EXPECT_EQ(GzipDecompress(probe, 1 << 20).status().code(), StatusCode::kInvalidArgument);
}

// Each thread keeps one inflater: a body refused halfway must not leak into the next.
TEST(Gzip, ABodyAfterARefusedOneInflatesCleanly) {
  const std::string good = GzipCompress("hello world, hello world").value();
  ASSERT_FALSE(GzipDecompress(good.substr(0, good.size() - 5), 1 << 20).ok());
  EXPECT_EQ(GzipDecompress(good, 1 << 20).value_or(""), "hello world, hello world");
  ASSERT_FALSE(GzipDecompress(GzipCompress(std::string(4096, 'x')).value(), 100).ok());
  EXPECT_EQ(GzipDecompress(good, 1 << 20).value_or(""), "hello world, hello world");
}

}  // namespace
}  // namespace uplink
