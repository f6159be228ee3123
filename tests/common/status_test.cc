#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>

namespace uplink {
namespace {

Result<int> Half(int n) {
  if (n % 2 != 0) return InvalidArgumentError(std::to_string(n) + " is odd");
  return n / 2;
}

Result<int> Quarter(int n) {
  UPLINK_ASSIGN_OR_RETURN(int half, Half(n));
  UPLINK_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckEven(int n) {
  UPLINK_RETURN_IF_ERROR(Half(n).status());
  return Status::Ok();
}

TEST(Status, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.ToString(), "OK");
}

TEST(Status, ToStringNamesTheCodeAndMessage) {
  EXPECT_EQ(NotFoundError("connection 7 does not exist").ToString(),
            "NotFound: connection 7 does not exist");
}

TEST(Status, WithContextPrefixesTheMessageAndKeepsTheCode) {
  Status status = ErrnoError("open /x", ENOENT).WithContext("reading token file");
  EXPECT_EQ(status.code(), StatusCode::kIOError);
  EXPECT_EQ(status.message(), "reading token file: open /x: No such file or directory");
}

TEST(Status, WithContextOnOkStaysOk) { EXPECT_TRUE(Status::Ok().WithContext("x").ok()); }

TEST(Result, HoldsAValueOrAnError) {
  Result<int> good = Half(8);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 4);
  Result<int> bad = Half(3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.value_or(-1), -1);
}

TEST(Result, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "3 is odd");
  EXPECT_FALSE(CheckEven(5).ok());
  EXPECT_TRUE(CheckEven(4).ok());
}

TEST(Result, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> result = std::make_unique<int>(7);
  std::unique_ptr<int> value = std::move(result).value();
  EXPECT_EQ(*value, 7);
}

}  // namespace
}  // namespace uplink
