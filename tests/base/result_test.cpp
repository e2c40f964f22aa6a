#include "dockhand/base/result.h"

#include <memory>
#include <string>
#include <variant>

#include <gtest/gtest.h>

namespace dockhand {
namespace {

Result<int> half(int n) {
  if (n % 2 != 0) return Error{"odd: " + std::to_string(n), "odd", false};
  return n / 2;
}

Result<void> check(bool good) {
  if (!good) return Error{"not good", "", true};
  return {};
}

struct CodeOnly {
  int code = 0;
};

TEST(ResultTest, HoldsTheValueItWasBuiltFrom) {
  auto r = half(8);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.value(), 4);
  EXPECT_EQ(*r, 4);
}

TEST(ResultTest, HoldsTheErrorItWasBuiltFrom) {
  auto r = half(3);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.error().message, "odd: 3");
  EXPECT_EQ(r.error().code, "odd");
  EXPECT_FALSE(r.error().retryable);
}

TEST(ResultTest, ReadingTheWrongSideIsABugThatThrows) {
  auto failed = half(3);
  EXPECT_THROW(static_cast<void>(failed.value()), std::bad_variant_access);
  auto succeeded = half(2);
  EXPECT_THROW(static_cast<void>(succeeded.error()), std::bad_variant_access);
  Result<void> fine;
  EXPECT_THROW(static_cast<void>(fine.error()), std::bad_variant_access);
}

TEST(ResultTest, StringValueIsNotMistakenForAnError) {
  Result<std::string> text = std::string("hello");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->size(), 5u);
  Result<std::string> failed = Error{"no text"};
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message, "no text");
}

TEST(ResultTest, MovesAValueThatCannotBeCopiedOut) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> taken = std::move(r).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, 7);
}

TEST(ResultTest, VoidIsSuccessByDefaultAndCarriesAnError) {
  Result<void> good = check(true);
  EXPECT_TRUE(good.ok());
  Result<void> bad = check(false);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "not good");
  EXPECT_TRUE(bad.error().retryable);
}

TEST(ResultTest, TakesAnErrorTypeOfItsOwn) {
  Result<std::string, CodeOnly> r = CodeOnly{42};
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, 42);
  Result<void, CodeOnly> v = CodeOnly{7};
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, 7);
}

}  // namespace
}  // namespace dockhand
