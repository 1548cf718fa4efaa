// Broken and hostile input: truncated, damaged and random bytes, and headers declaring huge frames.
// DecodeClip must give its documented error or a valid prefix of the video's frames, and never
// crash, hang (a watchdog aborts a decode after 20 s) or leak. The memory half of that (leaks, heap
// errors, undefined behaviour, oversized allocations) is checked by running this suite under ASan
// and UBSan: scripts/media-sanitizer-check.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "media/clip_decoder.h"
#include "media/fragment_guard.h"
#include "tests/test_util/decode_sources.h"
#include "tests/test_util/test_files.h"

extern "C" {
#include <libavutil/log.h>
}

namespace vidclf::media {
namespace {

using ::testing::HasSubstr;

constexpr int kCrop = 32;
constexpr int kFrames = 20;

ClipOptions SmallFrames(int num_frames) {
  ClipOptions options;
  options.sampling.num_frames = num_frames;
  options.preprocess.resize_shorter_side = 40;
  options.preprocess.crop_size = kCrop;
  return options;
}

// Aborts the process when a decode outlives `limit`, naming the input: a hang then fails at once
// with its cause instead of timing out the whole suite.
class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::seconds limit)
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "DecodeClip hangs: still running after %lld s on %s\n",
                         static_cast<long long>(limit.count()), what_.c_str());
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_one();
    thread_.join();
  }

 private:
  const std::string what_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

absl::StatusOr<DecodedClip> DecodeGuarded(absl::string_view bytes, const ClipOptions& options,
                                          const std::string& what) {
  // Decoding these small inputs takes milliseconds, even under ASan.
  Watchdog watchdog(what, std::chrono::seconds(20));
  return DecodeClip(VideoSource::Bytes(bytes), options);
}

// The contract for any input: one of DecodeClip's documented errors, with a message, or between 1
// and `max_frames` frames of finite pixels.
::testing::AssertionResult IsErrorOrValidClip(const absl::StatusOr<DecodedClip>& clip,
                                              int64_t max_frames) {
  if (!clip.ok()) {
    const absl::StatusCode code = clip.status().code();
    if (code != absl::StatusCode::kInvalidArgument &&
        code != absl::StatusCode::kResourceExhausted) {
      return ::testing::AssertionFailure() << "undocumented error " << clip.status();
    }
    if (clip.status().message().empty()) {
      return ::testing::AssertionFailure() << "error without a message: " << clip.status();
    }
    return ::testing::AssertionSuccess();
  }
  if (clip->num_frames < 1 || clip->num_frames > max_frames) {
    return ::testing::AssertionFailure()
           << clip->num_frames << " frames; expected 1 to " << max_frames;
  }
  if (clip->pixels.size() != static_cast<size_t>(clip->num_frames) * 3 * kCrop * kCrop) {
    return ::testing::AssertionFailure()
           << clip->pixels.size() << " floats for " << clip->num_frames << " frames";
  }
  for (size_t i = 0; i < clip->pixels.size(); ++i) {
    if (!std::isfinite(clip->pixels[i])) {
      return ::testing::AssertionFailure() << "pixel " << i << " is " << clip->pixels[i];
    }
  }
  return ::testing::AssertionSuccess();
}

std::string RandomBytes(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

// Variant `seed` of `bytes`: 1 to 8 bytes XORed with random non-zero values. Odd seeds aim at the
// first and last 2 KiB, where headers and indexes (an mp4's moov) live. `offsets` lists the changes
// so that a failure can be reproduced.
std::string FlipBytes(std::string bytes, uint32_t seed, std::string* offsets) {
  std::mt19937 rng(seed);
  const size_t size = bytes.size();
  const size_t edge = std::min<size_t>(2048, size);
  const int flips = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < flips; ++i) {
    size_t offset = rng() % size;
    if (seed % 2 == 1) {
      const size_t k = rng() % (2 * edge);
      offset = k < edge ? k : size - 2 * edge + k;
    }
    const auto mask = static_cast<unsigned char>(1 + rng() % 255);
    bytes[offset] = static_cast<char>(static_cast<unsigned char>(bytes[offset]) ^ mask);
    absl::StrAppend(offsets, offsets->empty() ? "" : ",", offset, "^", mask);
  }
  return bytes;
}

class BrokenInputTest : public ::testing::Test {
 protected:
  // FFmpeg logs every damaged packet; hundreds of broken inputs would bury a failure's message.
  static void SetUpTestSuite() {
    log_level_ = av_log_get_level();
    av_log_set_level(AV_LOG_QUIET);
  }
  static void TearDownTestSuite() { av_log_set_level(log_level_); }

  void SetUp() override { dir_ = testing::MakeScratchDir("broken"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Video(const std::string& name, const std::string& ffmpeg_arguments) {
    const std::string path = dir_ + "/" + name;
    testing::MakeVideo(ffmpeg_arguments, path);
    return testing::ReadFile(path);
  }

  // A fragmented MP4 with MPEG-4 video and AAC audio, each fragment one trun per track.
  std::string FragmentedMp4() {
    return Video(
        "fragmented.mp4",
        "-f lavfi -i testsrc2=size=64x48:rate=10 -f lavfi -i sine=r=8000 -t 0.8 -c:v mpeg4 "
        "-g 3 -c:a aac -movflags frag_keyframe+empty_moov");
  }

  std::string dir_;

 private:
  static int log_level_;
};

int BrokenInputTest::log_level_ = AV_LOG_INFO;

struct SampleVideo {
  const char* name;  // its extension picks the container
  const char* ffmpeg_arguments;
  // Whether the file has the layout it stands for (moov after mdat, fragments, ...).
  bool (*has_layout)(const std::string& bytes);
};

// Names the parameter in test output (and ctest's test names) instead of dumping its bytes.
void PrintTo(const SampleVideo& video, std::ostream* os) { *os << video.name; }

const SampleVideo kSampleVideos[] = {
    // The mp4 muxer writes the index (moov) after the data unless asked for +faststart, so every
    // prefix lacks it.
    {"moov_at_end.mp4",
     "-f lavfi -i testsrc2=size=96x64:rate=10 -frames:v 20 -c:v libx264 -bf 2 -g 8",
     [](const std::string& bytes) {
       return bytes.find("mdat") != std::string::npos && bytes.find("moov") > bytes.find("mdat");
     }},
    {"fragmented.mp4",
     "-f lavfi -i testsrc2=size=96x64:rate=10 -frames:v 20 -c:v mpeg4 -g 5 "
     "-movflags frag_keyframe+empty_moov",
     [](const std::string& bytes) { return bytes.find("moof") != std::string::npos; }},
    {"vp9.mkv",
     "-f lavfi -i testsrc2=size=96x64:rate=10 -frames:v 20 -c:v libvpx-vp9 -deadline realtime "
     "-cpu-used 8 -g 8",
     [](const std::string& bytes) { return bytes.rfind("\x1A\x45\xDF\xA3", 0) == 0; }},
    {"mpeg2.ts", "-f lavfi -i testsrc2=size=96x64:rate=10 -frames:v 20 -c:v mpeg2video -g 6",
     [](const std::string& bytes) {
       return bytes.size() > 188 && bytes[0] == 0x47 && bytes[188] == 0x47;
     }},
};

class BrokenContainerTest : public BrokenInputTest,
                            public ::testing::WithParamInterface<SampleVideo> {
 protected:
  // The intact file, checked to decode in full.
  std::string IntactVideo() {
    const std::string bytes = Video(GetParam().name, GetParam().ffmpeg_arguments);
    EXPECT_TRUE(GetParam().has_layout(bytes)) << GetParam().name << " lacks its layout";
    absl::StatusOr<DecodedClip> clip = DecodeGuarded(bytes, SmallFrames(0), GetParam().name);
    EXPECT_TRUE(clip.ok()) << clip.status();
    if (clip.ok()) {
      EXPECT_EQ(clip->num_frames, kFrames);
    }
    return bytes;
  }

  // Every frame (bounded by the intact file's count), and 4 sampled ones, which takes the
  // seek-to-keyframe and frame-skipping path.
  void ExpectErrorOrValidClips(absl::string_view bytes, const std::string& what) {
    EXPECT_TRUE(IsErrorOrValidClip(DecodeGuarded(bytes, SmallFrames(0), what), kFrames))
        << what << ", every frame";
    EXPECT_TRUE(IsErrorOrValidClip(DecodeGuarded(bytes, SmallFrames(4), what), 4))
        << what << ", 4 sampled frames";
  }
};

TEST_P(BrokenContainerTest, EveryTenthPrefixGivesAnErrorOrAPrefixOfTheFrames) {
  const std::string bytes = IntactVideo();
  ASSERT_FALSE(HasFailure());
  for (int tenth = 1; tenth <= 10; ++tenth) {
    const size_t size = bytes.size() * tenth / 10;
    ExpectErrorOrValidClips(bytes.substr(0, size),
                            absl::StrCat(GetParam().name, " cut to ", size, " of ", bytes.size(),
                                         " bytes (", tenth * 10, "%)"));
  }
}

TEST_P(BrokenContainerTest, FlippedBytesGiveAnErrorOrAPrefixOfTheFrames) {
  const std::string bytes = IntactVideo();
  ASSERT_FALSE(HasFailure());
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    std::string offsets;
    const std::string damaged = FlipBytes(bytes, seed, &offsets);
    ExpectErrorOrValidClips(
        damaged, absl::StrCat(GetParam().name, " variant ", seed, " (byte^mask: ", offsets, ")"));
  }
}

INSTANTIATE_TEST_SUITE_P(Containers, BrokenContainerTest, ::testing::ValuesIn(kSampleVideos),
                         [](const ::testing::TestParamInfo<SampleVideo>& info) {
                           std::string name = info.param.name;
                           for (char& c : name) {
                             if (c == '.') c = '_';
                           }
                           return name;
                         });

TEST_F(BrokenInputTest, EmptyInputIsInvalid) {
  absl::StatusOr<DecodedClip> clip = DecodeGuarded("", SmallFrames(8), "empty input");
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(clip.status().message().empty());
}

TEST_F(BrokenInputTest, RandomBytesGiveAnError) {
  for (size_t size : {1, 7, 188, 4096, 100000}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const std::string what = absl::StrCat(size, " random bytes, seed ", seed);
      absl::StatusOr<DecodedClip> clip =
          DecodeGuarded(RandomBytes(size, seed), SmallFrames(8), what);
      EXPECT_FALSE(clip.ok()) << what;
      EXPECT_TRUE(IsErrorOrValidClip(clip, 8)) << what;
    }
  }
}

TEST_F(BrokenInputTest, RandomPayloadBehindValidHeadersGivesAnErrorOrFrames) {
  // Past format probing, into the demuxers and decoders: MPEG-TS sync bytes, a y4m stream header.
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    std::string ts = RandomBytes(188 * 64, seed);
    for (size_t i = 0; i < ts.size(); i += 188) ts[i] = 0x47;
    EXPECT_TRUE(IsErrorOrValidClip(DecodeGuarded(ts, SmallFrames(8), "random ts"), 8))
        << "MPEG-TS packets of random payload, seed " << seed;

    const std::string y4m = "YUV4MPEG2 W64 H48 F25:1 Ip A1:1 C420jpeg\nFRAME\n" +
                            RandomBytes(64 * 48 * 3 / 2 * 2 + seed * 100, seed);
    EXPECT_TRUE(IsErrorOrValidClip(DecodeGuarded(y4m, SmallFrames(8), "random y4m"), 8))
        << "y4m header and random frames, seed " << seed;
  }
}

// Overwrites the `size`-byte big-endian value at `offset`.
void PutBigEndian(std::string& bytes, size_t offset, int size, uint32_t value) {
  for (int i = size - 1; i >= 0; --i, value >>= 8) bytes[offset + i] = static_cast<char>(value);
}

// Huge declared frames. Refusing them "before anything is allocated" is checked by the sanitizer
// run, which caps every single allocation far below such a frame (ASAN_OPTIONS
// max_allocation_size_mb in scripts/media-sanitizer-check.sh): an allocation for the declared size
// aborts the test there, even where the machine could have given the memory.

TEST_F(BrokenInputTest, RefusesAnMp4SampleEntryDeclaringHugeFrames) {
  std::string bytes =
      Video("small.mp4", "-f lavfi -i testsrc2=size=96x64:rate=10 -frames:v 4 -c:v libx264");
  // VisualSampleEntry: size, 'avc1', 6 reserved bytes, data_reference_index, 16 bytes of
  // pre_defined and reserved, then width and height, 16 bits each. (H.264 because the mov demuxer
  // ignores this size for MPEG-4 part 2 and lets the decoder find it.)
  const size_t entry = bytes.find("avc1", bytes.find("stsd"));
  ASSERT_NE(entry, std::string::npos);
  ASSERT_EQ(bytes.substr(entry + 28, 4), std::string("\x00\x60\x00\x40", 4));  // 96x64
  PutBigEndian(bytes, entry + 28, 2, 30000);
  PutBigEndian(bytes, entry + 30, 2, 30000);
  absl::StatusOr<DecodedClip> clip = DecodeGuarded(bytes, SmallFrames(8), "mp4 30000x30000");
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted) << clip.status();
  EXPECT_THAT(clip.status().message(), HasSubstr("30000x30000"));
}

TEST_F(BrokenInputTest, RefusesAMatroskaTrackDeclaringHugeFrames) {
  // 320x288: both sides take two bytes in EBML, as 30000 does, so the patch keeps every size.
  std::string bytes =
      Video("small.mkv", "-f lavfi -i testsrc2=size=320x288:rate=10 -frames:v 2 -c:v mpeg4");
  const size_t width = bytes.find(std::string("\xB0\x82\x01\x40", 4));   // PixelWidth 320
  const size_t height = bytes.find(std::string("\xBA\x82\x01\x20", 4));  // PixelHeight 288
  ASSERT_NE(width, std::string::npos);
  ASSERT_NE(height, std::string::npos);
  PutBigEndian(bytes, width + 2, 2, 30000);
  PutBigEndian(bytes, height + 2, 2, 30000);
  absl::StatusOr<DecodedClip> clip = DecodeGuarded(bytes, SmallFrames(8), "mkv 30000x30000");
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted) << clip.status();
  EXPECT_THAT(clip.status().message(), HasSubstr("30000x30000"));
}

TEST_F(BrokenInputTest, RefusesAY4mHeaderDeclaringFramesOverTheLimit) {
  // 16000x16000 4:2:0 is 384 MB a frame; the stream holds a few bytes of it.
  const std::string bytes =
      "YUV4MPEG2 W16000 H16000 F25:1 Ip A1:1 C420jpeg\nFRAME\n" + RandomBytes(4096, /*seed=*/1);
  absl::StatusOr<DecodedClip> clip = DecodeGuarded(bytes, SmallFrames(8), "y4m 16000x16000");
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted) << clip.status();
  EXPECT_THAT(clip.status().message(), HasSubstr("16000x16000"));
}

TEST_F(BrokenInputTest, RefusesHeadersDeclaringHugeFrames) {
  // Past libavformat's own size bound, which calls such headers invalid data: the limit is
  // checked on the header first, from memory and from a stream, so the caller learns which limit.
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"y4m",
       "YUV4MPEG2 W30000 H30000 F25:1 Ip A1:1 C420jpeg\nFRAME\n" + RandomBytes(4096, /*seed=*/2)},
      {"ppm", "P6\n30000 30000\n255\n" + RandomBytes(4096, /*seed=*/3)},
      {"pgm with a comment",
       "P5 # made by hand\n30000\n30000 255\n" + RandomBytes(4096, /*seed=*/5)},
      {"pam", "P7\nWIDTH 30000\nHEIGHT 30000\nDEPTH 3\nMAXVAL 255\nTUPLTYPE RGB\nENDHDR\n" +
                  RandomBytes(4096, /*seed=*/6)},
  };
  for (const auto& [what, bytes] : inputs) {
    absl::StatusOr<DecodedClip> clip = DecodeGuarded(bytes, SmallFrames(8), what);
    EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted) << what << clip.status();
    EXPECT_THAT(clip.status().message(), HasSubstr("30000x30000")) << what;
    clip = testing::DecodeInChunks(bytes, 1000, SmallFrames(8));
    EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted) << what << clip.status();
  }
}

TEST_F(BrokenInputTest, RefusesAPpmOverTheSideLimitButUnderItsArea) {
  // 60000x1100 is under the decoder's max_pixels (8192 * 8192) but over max_frame_side; only the
  // picture header says so. An RGB frame of that size is 198 MB.
  const std::string bytes = "P6\n60000 1100\n255\n" + RandomBytes(4096, /*seed=*/4);
  absl::StatusOr<DecodedClip> clip = DecodeGuarded(bytes, SmallFrames(8), "ppm 60000x1100");
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted) << clip.status();
  EXPECT_THAT(clip.status().message(), HasSubstr("60000x1100"));
}

// Peak resident memory of this process so far.
int64_t PeakResidentMib() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;  // KiB on Linux
}

TEST_F(BrokenInputTest, FragmentGuardCountsTheSamplesOfEveryTrackRun) {
  const std::string bytes = FragmentedMp4();
  int exit_code = 0;
  const std::string packets = testing::RunCommand(
      "ffprobe -v error -show_entries packet=stream_index -of csv=p=0 " + dir_ + "/fragmented.mp4",
      &exit_code);
  ASSERT_EQ(exit_code, 0) << packets;
  FragmentGuard whole(1 << 20);
  ASSERT_TRUE(whole.Inspect(bytes).ok());
  EXPECT_EQ(whole.samples_declared(), std::count(packets.begin(), packets.end(), '\n'));
  EXPECT_GT(whole.samples_declared(), 8);  // the audio's count too
  FragmentGuard byte_by_byte(1 << 20);
  for (char c : bytes) ASSERT_TRUE(byte_by_byte.Inspect(absl::string_view(&c, 1)).ok());
  EXPECT_EQ(byte_by_byte.samples_declared(), whole.samples_declared());
  FragmentGuard tight(whole.samples_declared() - 1);
  EXPECT_EQ(tight.Inspect(bytes).code(), absl::StatusCode::kResourceExhausted);
}

// A reader that seeks (a URI's demuxer) reads some bytes again, or skips the rest of a box.
TEST_F(BrokenInputTest, FragmentGuardFollowsSeeksAndCountsEachTrackRunOnce) {
  const std::string bytes = FragmentedMp4();
  FragmentGuard once(1 << 20);
  ASSERT_TRUE(once.Inspect(bytes).ok());

  FragmentGuard again(1 << 20);
  ASSERT_TRUE(again.Inspect(bytes).ok());
  again.SeekTo(0);
  ASSERT_TRUE(again.Inspect(bytes).ok());
  EXPECT_EQ(again.samples_declared(), once.samples_declared());

  // Skipping the rest of the first trun's box keeps the guard inside its moof, so the track runs
  // after it still count.
  const size_t trun = bytes.find("trun") - 4;
  FragmentGuard skipping(1 << 20);
  ASSERT_TRUE(skipping.Inspect(absl::string_view(bytes).substr(0, trun + 16)).ok());
  size_t trun_end = 0;  // its 32-bit size, then where it ends
  for (int i = 0; i < 4; ++i) trun_end = trun_end << 8 | static_cast<uint8_t>(bytes[trun + i]);
  trun_end += trun;
  skipping.SeekTo(static_cast<int64_t>(trun_end));
  ASSERT_TRUE(skipping.Inspect(absl::string_view(bytes).substr(trun_end)).ok());
  EXPECT_EQ(skipping.samples_declared(), once.samples_declared());
}

// An ISO BMFF box: its 32-bit size, its type, its contents.
std::string Box(absl::string_view type, absl::string_view contents) {
  std::string box(4, '\0');
  PutBigEndian(box, 0, 4, static_cast<uint32_t>(8 + contents.size()));
  return absl::StrCat(box, type, contents);
}

// A seek into media data that does not parse as a box must not switch the guard off for the
// fragments that a later seek reaches.
TEST_F(BrokenInputTest, FragmentGuardRecoversFromASeekIntoMediaData) {
  std::string media(100, '\x42');
  PutBigEndian(media, 0, 4, 3);  // read as a box header: a size too small for one
  std::string run(8, '\0');      // version and flags 0, then the sample count
  PutBigEndian(run, 4, 4, 1000);
  const std::string head = Box("ftyp", "isom") + Box("mdat", media);
  const std::string bytes = head + Box("moof", Box("traf", Box("trun", run)));

  FragmentGuard sequential(500);
  EXPECT_EQ(sequential.Inspect(bytes).code(), absl::StatusCode::kResourceExhausted);

  FragmentGuard seeking(500);
  ASSERT_TRUE(seeking.Inspect(head).ok());
  seeking.SeekTo(static_cast<int64_t>(head.size() - media.size()));  // back, to read a sample
  ASSERT_TRUE(seeking.Inspect(media).ok());
  seeking.SeekTo(static_cast<int64_t>(head.size()));  // the next fragment
  EXPECT_EQ(seeking.Inspect(absl::string_view(bytes).substr(head.size())).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(BrokenInputTest, RefusesFragmentsDeclaringMillionsOfSamplesWithoutGigabytes) {
  // Found by decode_clip_fuzzer. A trun box whose flags leave out every per-sample field declares
  // any number of samples in 8 bytes. (Unchecked, the fuzzer's 83,886,080 took 5 GB resident and
  // 15 s in Debian's FFmpeg 5.1, and a count just under libav's allocation cap 568 MB.) The
  // fragments may declare 4 samples per frame that max_total_frames allows, 800,000 here.
  const int64_t limit = 4 * ClipOptions().max_total_frames;
  for (const int64_t declared : {int64_t{16777216}, limit + 1, limit - 100}) {
    std::string bytes = FragmentedMp4();
    const size_t trun = bytes.find("trun");
    ASSERT_NE(trun, std::string::npos);
    // After the type: version (1 byte), flags (3 bytes), sample_count (32 bits).
    PutBigEndian(bytes, trun + 5, 3, 0);
    PutBigEndian(bytes, trun + 8, 4, declared);
    const int64_t resident_before = PeakResidentMib();
    const std::string what = absl::StrCat("fragmented mp4 declaring ", declared, " samples");
    absl::StatusOr<DecodedClip> clip = DecodeGuarded(bytes, SmallFrames(8), what);
    EXPECT_LT(PeakResidentMib() - resident_before, 128)
        << "MiB more resident memory for a " << bytes.size() << "-byte input, " << what;
    if (declared > limit) {
      EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted) << what;
      EXPECT_THAT(clip.status().message(), HasSubstr("fragments declare")) << what;
      clip = testing::DecodeInChunks(bytes, 100, SmallFrames(8));
      EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted) << what;
    } else {
      EXPECT_TRUE(IsErrorOrValidClip(clip, 8)) << what << ": " << clip.status();
    }
  }
}

}  // namespace
}  // namespace vidclf::media
