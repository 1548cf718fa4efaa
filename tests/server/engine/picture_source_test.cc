// Pictures sent one by one, alone: the test hands them over as the stream session would, and
// counts what the source passes on.
#include "server/engine/picture_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace vidclf::engine {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

// 8x8 raw RGB24 pictures, timed by their position.
PictureSource::Options RawPictures(int embed_stride) {
  PictureSource::Options options;
  options.preprocess.resize_shorter_side = 8;
  options.preprocess.crop_size = 8;
  options.raw_rgb24 = true;
  options.width = 8;
  options.height = 8;
  options.embed_stride = embed_stride;
  return options;
}

// Hands out `pictures` in turn, then says the feed ended.
PictureSource::NextPicture From(std::vector<std::string> pictures) {
  return [pictures = std::move(pictures)](int64_t index) -> absl::StatusOr<std::optional<Picture>> {
    if (index >= static_cast<int64_t>(pictures.size())) return std::nullopt;
    return Picture{pictures[index], 0, {}};
  };
}

struct Seen {
  int64_t index;
  double seconds;
  bool converted;
};

TEST(PictureSourceTest, ConvertsEveryStrideThPictureAndSpacesUntimedOnesAsACamera) {
  PictureSource source(RawPictures(/*embed_stride=*/2),
                       From(std::vector<std::string>(5, std::string(8 * 8 * 3, '\x80'))));
  std::vector<Seen> seen;
  ASSERT_TRUE(source
                  .Run([&](const SourceFrame& frame) {
                    seen.push_back({frame.index, frame.seconds, frame.pixels != nullptr});
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_EQ(seen.size(), 5u);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(seen[i].index, i);
    EXPECT_THAT(seen[i].seconds, DoubleNear(i / kDefaultPictureRate, 1e-9));
    EXPECT_EQ(seen[i].converted, i % 2 == 0) << i;
  }
}

TEST(PictureSourceTest, APictureThatDoesNotConvertEndsItNamingThePicture) {
  PictureSource source(RawPictures(1), From({std::string(8 * 8 * 3, 'a'), "short"}));
  int handed_on = 0;
  const absl::Status status = source.Run([&](const SourceFrame&) {
    ++handed_on;
    return absl::OkStatus();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("frame 1 of the stream: "));
  EXPECT_EQ(handed_on, 1);
}

TEST(PictureSourceTest, StopsWithTheHandlersOrTheFeedsError) {
  PictureSource refused(RawPictures(1), From({std::string(8 * 8 * 3, 'a')}));
  EXPECT_EQ(refused.Run([](const SourceFrame&) { return absl::CancelledError("enough"); }),
            absl::CancelledError("enough"));
  PictureSource failed(RawPictures(1), [](int64_t) -> absl::StatusOr<std::optional<Picture>> {
    return absl::DeadlineExceededError("idle");
  });
  EXPECT_EQ(failed.Run([](const SourceFrame&) { return absl::OkStatus(); }),
            absl::DeadlineExceededError("idle"));
}

}  // namespace
}  // namespace vidclf::engine
