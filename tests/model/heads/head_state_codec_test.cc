#include "model/heads/head_state_codec.h"

#include <gtest/gtest.h>

#include <string>

#include "model/heads/gru_head.h"

namespace vidclf::model {
namespace {

TEST(HeadStateCodec, AStepFromADecodedStateEqualsTheStepFromTheState) {
  torch::manual_seed(5);
  GruHead head(GruHeadOptions(/*num_classes=*/4).input_size(6));
  head->eval();
  torch::NoGradGuard no_grad;
  const auto [logits, state] = head->step(torch::randn({1, 5, 6}), HeadState());
  absl::StatusOr<HeadState> decoded = DecodeHeadState(EncodeHeadState(state), torch::kCPU);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->frames_seen, state.frames_seen);
  const torch::Tensor next = torch::randn({1, 3, 6});
  EXPECT_TRUE(torch::equal(head->step(next, *decoded).first, head->step(next, state).first));
}

TEST(HeadStateCodec, AFreshStateRoundTrips) {
  absl::StatusOr<HeadState> decoded = DecodeHeadState(EncodeHeadState(HeadState()), torch::kCPU);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->frames_seen, 0);
  EXPECT_TRUE(decoded->tensors.empty());
}

TEST(HeadStateCodec, OtherBytesAreRefused) {
  for (const std::string& bytes :
       {std::string(), std::string("not a state"), EncodeHeadState(HeadState()).substr(0, 20)}) {
    EXPECT_EQ(DecodeHeadState(bytes, torch::kCPU).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(HeadStateCodec, TheFingerprintFollowsTheVersionTheHeadAndTheAttention) {
  ModelConfig config;
  config.name = "demo";
  config.version = "1";
  config.labels = {"a", "b"};
  const std::string fingerprint = HeadStateFingerprint(config, "");
  EXPECT_EQ(HeadStateFingerprint(config, ""), fingerprint);
  EXPECT_NE(HeadStateFingerprint(config, "causal-linear"), fingerprint);
  ModelConfig other_version = config;
  other_version.version = "2";
  EXPECT_NE(HeadStateFingerprint(other_version, ""), fingerprint);
  ModelConfig wider = config;
  wider.gru.hidden_size *= 2;
  EXPECT_NE(HeadStateFingerprint(wider, ""), fingerprint);
  ModelConfig measured = config;
  measured.metrics = {{"accuracy", 0.9}};  // what was measured does not change the state
  EXPECT_EQ(HeadStateFingerprint(measured, ""), fingerprint);
}

}  // namespace
}  // namespace vidclf::model
