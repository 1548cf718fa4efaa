#include "server/engine/admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vidclf::engine {
namespace {

using ::testing::HasSubstr;

AdmissionOptions Bounds(int calls, int64_t bytes) {
  AdmissionOptions options;
  options.max_inflight_calls = calls;
  options.max_inflight_bytes = bytes;
  return options;
}

TEST(AdmissionTest, RefusesPastTheCallBoundUntilACallEnds) {
  Admission admission(Bounds(2, 1000));
  Refusal refusal = Refusal::kDeadline;
  EXPECT_TRUE(admission.Admit(10, &refusal).ok());
  EXPECT_TRUE(admission.Admit(10, &refusal).ok());
  const absl::Status third = admission.Admit(10, &refusal);
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.message(), HasSubstr("2 calls are in flight"));
  EXPECT_EQ(refusal, Refusal::kRequests);
  EXPECT_EQ(admission.inflight_calls(), 2);
  EXPECT_EQ(admission.inflight_bytes(), 20);

  admission.Release(10, /*call_ended=*/true);
  EXPECT_TRUE(admission.Admit(10, &refusal).ok());
  EXPECT_EQ(admission.inflight_calls(), 2);
}

TEST(AdmissionTest, RefusesPastTheByteBoundTakingNothing) {
  Admission admission(Bounds(10, 100));
  Refusal refusal = Refusal::kDeadline;
  EXPECT_TRUE(admission.Admit(60, &refusal).ok());
  const absl::Status refused = admission.Admit(41, &refusal);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("this one needs 41"));
  EXPECT_EQ(refusal, Refusal::kBytes);
  EXPECT_EQ(admission.inflight_calls(), 1);
  EXPECT_EQ(admission.inflight_bytes(), 60);
  EXPECT_TRUE(admission.Admit(40, &refusal).ok());  // exactly at the bound
  EXPECT_EQ(admission.inflight_bytes(), 100);
}

TEST(AdmissionTest, AddsAnUploadsBytesWithinTheBound) {
  Admission admission(Bounds(10, 100));
  Refusal refusal = Refusal::kDeadline;
  ASSERT_TRUE(admission.Admit(10, &refusal).ok());
  EXPECT_TRUE(admission.AddBytes(50).ok());
  const absl::Status over = admission.AddBytes(41);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(admission.inflight_bytes(), 60);

  // Bytes handed back while the call goes on leave its count alone.
  admission.Release(50, /*call_ended=*/false);
  EXPECT_EQ(admission.inflight_bytes(), 10);
  EXPECT_EQ(admission.inflight_calls(), 1);
  admission.Release(10, /*call_ended=*/true);
  EXPECT_EQ(admission.inflight_bytes(), 0);
  EXPECT_EQ(admission.inflight_calls(), 0);
}

TEST(AdmissionTest, RefusesEveryCallOnceDrainingEvenWithRoom) {
  Admission admission(Bounds(10, 100));
  Refusal refusal = Refusal::kDeadline;
  ASSERT_TRUE(admission.Admit(10, &refusal).ok());
  EXPECT_FALSE(admission.draining());
  admission.StartDraining();
  EXPECT_TRUE(admission.draining());
  const absl::Status refused = admission.Admit(0, &refusal);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.message(), HasSubstr("retry on another replica"));
  EXPECT_EQ(refusal, Refusal::kDraining);
  // The call admitted before the drain still ends normally.
  admission.Release(10, /*call_ended=*/true);
  EXPECT_EQ(admission.inflight_calls(), 0);
}

}  // namespace
}  // namespace vidclf::engine
