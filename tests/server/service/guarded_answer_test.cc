// A unary gRPC call whose work throws ends as INTERNAL, counted, and the next call is answered.
#include <gtest/gtest.h>

#include <stdexcept>

#include "server/internal_errors.h"
#include "server/service/finished_call.h"

namespace vidclf::service {
namespace {

TEST(GuardedAnswerTest, WorkThatThrowsIsAnInternalErrorOfThatCallOnly) {
  const int64_t before = InternalErrorCounts()["grpc"];
  const absl::Status thrown =
      GuardedAnswer("ListSources", []() -> absl::Status { throw std::out_of_range("a bug"); });
  EXPECT_EQ(thrown.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(thrown.message(), kInternalErrorMessage);
  EXPECT_EQ(InternalErrorCounts()["grpc"], before + 1);
  EXPECT_EQ(GuardedAnswer("ListSources", [] { return absl::NotFoundError("none"); }).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(InternalErrorCounts()["grpc"], before + 1);
}

}  // namespace
}  // namespace vidclf::service
