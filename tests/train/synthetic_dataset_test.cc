// The synthetic data set on disk: deterministic, UCF101-shaped, decodable, and made of class
// pairs that differ only in time.
#include "train/synthetic_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "media/clip_decoder.h"
#include "media/frame_sampler.h"
#include "media/libav_settings.h"
#include "train/synthetic_videos.h"

extern "C" {
#include <libavutil/log.h>
}

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string ReadBytes(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

// Every regular file under `root`, by path relative to it, with its bytes.
std::map<std::string, std::string> ReadTree(const fs::path& root) {
  std::map<std::string, std::string> tree;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) {
      tree[fs::relative(entry.path(), root).generic_string()] = ReadBytes(entry.path());
    }
  }
  return tree;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// Mean over pixels and channels.
double MeanLevel(const media::RgbImage& image) {
  double sum = 0;
  for (uint8_t value : image.rgb) sum += value;
  return sum / image.rgb.size();
}

// Mean squared difference of neighbouring cells of the grey image averaged over 2x2 pixels: how
// sharp and how fine the image is, with the pixel noise mostly averaged away.
double Sharpness(const media::RgbImage& image) {
  const int width = image.width / 2;
  const int height = image.height / 2;
  std::vector<double> grey(static_cast<size_t>(width) * height);
  for (int y = 0; y < 2 * height; ++y) {
    for (int x = 0; x < 2 * width; ++x) {
      const uint8_t* pixel = &image.rgb[3 * (static_cast<size_t>(y) * image.width + x)];
      grey[(y / 2) * width + x / 2] += (pixel[0] + pixel[1] + pixel[2]) / 12.0;
    }
  }
  double sum = 0;
  for (int y = 1; y < height; ++y) {
    for (int x = 1; x < width; ++x) {
      const double here = grey[y * width + x];
      sum += std::pow(here - grey[y * width + x - 1], 2) +
             std::pow(here - grey[(y - 1) * width + x], 2);
    }
  }
  return sum / ((width - 1) * (height - 1));
}

class SyntheticDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    media::LibavSettings settings;
    settings.log_level = AV_LOG_ERROR;  // libx264 reports every encode at INFO
    media::ConfigureLibav(settings);
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("vidclf_synthetic_" + std::to_string(::getpid()) + "_" + test->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static SyntheticDatasetOptions Small(const fs::path& dir, uint64_t seed) {
    SyntheticDatasetOptions options;
    options.output_dir = dir.string();
    options.seed = seed;
    options.videos_per_class = 4;
    options.video.min_frames = 8;
    options.video.max_frames = 16;
    return options;
  }

  fs::path dir_;
};

TEST_F(SyntheticDatasetTest, SameSeedGivesByteIdenticalTreesAndAnotherSeedDoesNot) {
  int last_done = 0;
  int calls = 0;
  absl::StatusOr<SyntheticDatasetSummary> first =
      WriteSyntheticDataset(Small(dir_ / "a", 7), [&](int done, int total) {
        EXPECT_EQ(done, last_done + 1);
        EXPECT_EQ(total, 40);
        last_done = done;
        ++calls;
      });
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(calls, 40);
  ASSERT_TRUE(WriteSyntheticDataset(Small(dir_ / "b", 7)).ok());
  ASSERT_TRUE(WriteSyntheticDataset(Small(dir_ / "c", 8)).ok());

  const auto a = ReadTree(dir_ / "a");
  const auto b = ReadTree(dir_ / "b");
  const auto c = ReadTree(dir_ / "c");
  EXPECT_EQ(a.size(), 40u + 3u);
  ASSERT_EQ(a.size(), b.size());
  int64_t bytes = 0;
  for (const auto& [path, content] : a) {
    ASSERT_EQ(b.count(path), 1u) << path;
    EXPECT_TRUE(content == b.at(path)) << path << " differs between two runs";
    EXPECT_THAT(path, ::testing::Not(HasSubstr(".partial")));
    bytes += static_cast<int64_t>(content.size());
  }
  EXPECT_EQ(first->bytes, bytes);

  // Another seed: other videos (names may differ by extension), the same class list.
  std::set<std::string> a_videos;
  for (const auto& [path, content] : a) {
    if (path.rfind("videos/", 0) == 0) a_videos.insert(content);
  }
  int shared = 0;
  for (const auto& [path, content] : c) {
    if (path.rfind("videos/", 0) == 0) shared += a_videos.count(content);
  }
  EXPECT_EQ(shared, 0);
  EXPECT_EQ(c.at("splits/classInd.txt"), a.at("splits/classInd.txt"));
}

TEST_F(SyntheticDatasetTest, SplitListsCoverEveryVideoOnceStratifiedInUcf101Format) {
  SyntheticDatasetOptions options = Small(dir_, 3);
  options.videos_per_class = 8;
  options.test_fraction = 0.25;
  absl::StatusOr<SyntheticDatasetSummary> summary = WriteSyntheticDataset(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->videos, 80);
  EXPECT_EQ(summary->train_videos, 60);
  EXPECT_EQ(summary->test_videos, 20);

  const std::vector<std::string>& labels = SyntheticLabels();
  ASSERT_EQ(labels.size(), 10u);
  const std::vector<std::string> classes = Lines(ReadBytes(dir_ / "splits/classInd.txt"));
  ASSERT_EQ(classes.size(), labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    EXPECT_EQ(classes[i], std::to_string(i + 1) + " " + labels[i]);
  }

  std::set<std::string> on_disk;
  for (const auto& entry : fs::recursive_directory_iterator(dir_ / "videos")) {
    if (entry.is_regular_file()) {
      on_disk.insert(fs::relative(entry.path(), dir_ / "videos").generic_string());
    }
  }
  EXPECT_EQ(on_disk.size(), 80u);

  const std::regex train_line(R"(([a-z_]+)/v_([a-z_]+)_g(\d\d)_c(\d\d)\.(mp4|avi|mkv) (\d+))");
  const std::regex test_line(R"(([a-z_]+)/v_([a-z_]+)_g(\d\d)_c(\d\d)\.(mp4|avi|mkv))");
  std::set<std::string> listed;
  std::map<std::string, int> train_per_class;
  std::map<std::string, int> test_per_class;
  for (const std::string& line : Lines(ReadBytes(dir_ / "splits/trainlist01.txt"))) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, train_line)) << line;
    EXPECT_EQ(match[1], match[2]) << line;
    const int label = std::stoi(match[6]);
    ASSERT_GE(label, 1);
    ASSERT_LE(label, 10);
    EXPECT_EQ(match[1], labels[label - 1]) << line;
    EXPECT_TRUE(listed.insert(line.substr(0, line.find(' '))).second) << "listed twice: " << line;
    ++train_per_class[match[1]];
  }
  for (const std::string& line : Lines(ReadBytes(dir_ / "splits/testlist01.txt"))) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, test_line)) << line;
    EXPECT_EQ(match[1], match[2]) << line;
    EXPECT_TRUE(listed.insert(line).second) << "listed twice: " << line;
    ++test_per_class[match[1]];
  }
  EXPECT_EQ(listed, on_disk);
  for (const std::string& label : labels) {
    EXPECT_EQ(train_per_class[label], 6) << label;
    EXPECT_EQ(test_per_class[label], 2) << label;
  }
  // The test share is the last videos of each class.
  EXPECT_THAT(ReadBytes(dir_ / "splits/testlist01.txt"), HasSubstr("v_fade_in_g02_c03."));
  EXPECT_THAT(ReadBytes(dir_ / "splits/testlist01.txt"), HasSubstr("v_fade_in_g02_c02."));
}

TEST_F(SyntheticDatasetTest, EveryVideoDecodesToItsFramesAtItsSize) {
  const SyntheticDatasetOptions options = Small(dir_, 11);
  ASSERT_TRUE(WriteSyntheticDataset(options).ok());
  media::ClipOptions clip;
  clip.sampling.num_frames = 0;  // every frame
  clip.preprocess.resize_shorter_side = 32;
  clip.preprocess.crop_size = 32;
  clip.decoder_threads = 1;
  std::set<std::string> encodings;
  std::set<int> rates;
  const std::vector<std::string>& labels = SyntheticLabels();
  for (int label = 0; label < static_cast<int>(labels.size()); ++label) {
    for (int index = 0; index < options.videos_per_class; ++index) {
      const SyntheticVideoFormat format =
          DescribeSyntheticVideo(label, index, options.seed, options.video);
      const fs::path path = dir_ / "videos" / labels[label] /
                            SyntheticVideoFileName(labels[label], index, format.extension);
      absl::StatusOr<media::DecodedClip> decoded =
          media::DecodeClip(media::VideoSource::Bytes(ReadBytes(path)), clip);
      ASSERT_TRUE(decoded.ok()) << path << ": " << decoded.status();
      EXPECT_EQ(decoded->total_frames, format.num_frames) << path;
      EXPECT_EQ(decoded->source_width, format.width) << path;
      EXPECT_EQ(decoded->source_height, format.height) << path;
      ASSERT_GE(decoded->timestamps_seconds.size(), 2u);
      EXPECT_NEAR(decoded->timestamps_seconds[1] - decoded->timestamps_seconds[0],
                  1.0 / format.encode.frames_per_second, 1e-3)
          << path;
      encodings.insert(format.encode.codec + " in " + format.encode.container);
      rates.insert(format.encode.frames_per_second);
      EXPECT_GE(format.num_frames, options.video.min_frames);
      EXPECT_LE(format.num_frames, options.video.max_frames);
      EXPECT_EQ(format.width % 2, 0);
      EXPECT_EQ(format.height % 2, 0);
    }
  }
  EXPECT_GE(encodings.size(), 4u);  // mpeg4 in mp4 and avi, mjpeg in avi, H.264 or mpeg4 in mkv
  EXPECT_GE(rates.size(), 3u);
}

TEST_F(SyntheticDatasetTest, PairsDifferOnlyInTime) {
  for (int index = 0; index < 3; ++index) {
    for (int pair = 0; pair < 5; ++pair) {
      const std::vector<media::RgbImage> a = MakeSyntheticVideo(2 * pair, index, /*seed=*/5);
      const std::vector<media::RgbImage> b = MakeSyntheticVideo(2 * pair + 1, index, /*seed=*/5);
      ASSERT_EQ(a.size(), b.size());
      ASSERT_GE(a.size(), 2u);
      const size_t last = a.size() - 1;
      EXPECT_EQ(a[0].width, b[0].width);
      EXPECT_EQ(a[0].height, b[0].height);
      if (pair == 3) {
        // flicker_slow and flicker_fast: the same start, other rates.
        EXPECT_TRUE(a[0].rgb == b[0].rgb) << "pair " << pair;
        EXPECT_FALSE(a[last / 4].rgb == b[last / 4].rgb) << "pair " << pair;
      } else {
        // The second class is the first played backwards, frame for frame.
        for (size_t f = 0; f <= last; ++f) {
          ASSERT_TRUE(a[f].rgb == b[last - f].rgb) << "pair " << pair << " frame " << f;
        }
        EXPECT_FALSE(a[0].rgb == b[0].rgb) << "pair " << pair;
      }
    }
  }
}

TEST_F(SyntheticDatasetTest, EffectsAreStrongOverSixteenUniformSamples) {
  SyntheticVideoOptions lengths;
  for (const auto& [min_frames, max_frames] : {std::pair{24, 48}, std::pair{300, 400}}) {
    lengths.min_frames = min_frames;
    lengths.max_frames = max_frames;
    for (int index = 0; index < 2; ++index) {
      auto sampled = [&](int label) {
        const std::vector<media::RgbImage> all = MakeSyntheticVideo(label, index, 9, lengths);
        std::vector<media::RgbImage> kept;
        for (int64_t i : media::UniformSampleIndices(all.size(), 16)) kept.push_back(all[i]);
        return kept;
      };
      const auto fade_in = sampled(0);
      EXPECT_GT(MeanLevel(fade_in.back()), 3 * MeanLevel(fade_in.front()));
      const auto zoom_in = sampled(4);
      EXPECT_GT(Sharpness(zoom_in.front()), 2 * Sharpness(zoom_in.back()));
      const auto focus_in = sampled(8);
      EXPECT_GT(Sharpness(focus_in.back()), 2 * Sharpness(focus_in.front()));
      // Brightness crosses its mean about twice per cycle: 2 for one cycle, 8 for four.
      for (const auto& [label, low, high] : {std::tuple{6, 1, 3}, std::tuple{7, 6, 9}}) {
        const auto flicker = sampled(label);
        double mean = 0;
        for (const auto& frame : flicker) mean += MeanLevel(frame) / flicker.size();
        int crossings = 0;
        for (size_t i = 1; i < flicker.size(); ++i) {
          crossings += (MeanLevel(flicker[i]) > mean) != (MeanLevel(flicker[i - 1]) > mean);
        }
        EXPECT_GE(crossings, low) << SyntheticLabels()[label] << " video " << index;
        EXPECT_LE(crossings, high) << SyntheticLabels()[label] << " video " << index;
      }
    }
  }
  SyntheticVideoOptions long_clips;
  long_clips.min_frames = 300;
  long_clips.max_frames = 1100;
  for (int index = 0; index < 20; ++index) {
    const int frames = DescribeSyntheticVideo(0, index, 1, long_clips).num_frames;
    EXPECT_GE(frames, 300);
    EXPECT_LE(frames, 1100);
  }
}

TEST_F(SyntheticDatasetTest, RefusesBadOptionsAndNamesWhatItCannotWrite) {
  SyntheticDatasetOptions options = Small(dir_ / "out", 1);
  options.videos_per_class = 0;
  EXPECT_EQ(WriteSyntheticDataset(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Small(dir_ / "out", 1);
  options.test_fraction = 1;
  EXPECT_EQ(WriteSyntheticDataset(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Small(dir_ / "out", 1);
  options.video.min_frames = 10;
  options.video.max_frames = 9;
  EXPECT_THAT(WriteSyntheticDataset(options).status().message(), HasSubstr("min_frames"));
  options = Small("", 1);
  EXPECT_EQ(WriteSyntheticDataset(options).status().code(), absl::StatusCode::kInvalidArgument);

  // A file where a class directory must go.
  fs::create_directories(dir_ / "blocked" / "videos");
  std::ofstream(dir_ / "blocked" / "videos" / "fade_in") << "not a directory";
  options = Small(dir_ / "blocked", 1);
  absl::StatusOr<SyntheticDatasetSummary> blocked = WriteSyntheticDataset(options);
  ASSERT_FALSE(blocked.ok());
  EXPECT_THAT(blocked.status().message(), HasSubstr("fade_in"));
}

}  // namespace
}  // namespace vidclf::train
