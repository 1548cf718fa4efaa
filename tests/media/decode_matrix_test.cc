// A decode matrix made at test time with the ffmpeg CLI: codecs in the containers that carry them,
// pixel formats, an odd frame size, still images and audio-only inputs. Each video is checked for
// frame count, timestamps, sampled indices and the colour of a known pattern. The sample videos and
// images that Debian's python3-imageio ships, which nobody here produced, are checked against what
// ffprobe and the ffmpeg CLI make of them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "media/clip_decoder.h"
#include "media/frame_sampler.h"
#include "tests/test_util/decode_sources.h"
#include "tests/test_util/test_files.h"

extern "C" {
#include <libavutil/pixdesc.h>
}

namespace vidclf::media {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Every generated video has 12 frames at 10 fps: frame i is shown at i / 10 s.
constexpr int kMatrixFrames = 12;
constexpr double kFrameRate = 10;
// Sampling 5 of 12 keeps frames 1, 3, 6, 8 and 10: uneven gaps, neither end. Sampling 2 keeps
// frames 3 and 9; with a keyframe every 4 frames, reaching 9 is a seek to frame 8.
constexpr int kSampled = 5;
constexpr int kSparse = 2;
// Frames are resized so that the shorter side is kSide, then cropped to kSide x kSide.
constexpr int kSide = 32;

struct Rgb {
  int r, g, b;
};

// The pattern: a flat grey border around a box over the middle half of the frame in each
// direction, whose colour steps with the frame number n from blue to yellow. Neighbouring frames
// differ by 20 levels in every channel (15 in luma), so the colour also tells which frame decoded.
Rgb BoxColour(int n) { return {10 + 20 * n, 10 + 20 * n, 230 - 20 * n}; }
constexpr Rgb kBorder = {40, 40, 40};

// The grey that swscale makes of an RGB colour for the gray formats, and back: full-range BT.601.
Rgb Grey(Rgb c) {
  const int y = static_cast<int>(std::lround(0.299 * c.r + 0.587 * c.g + 0.114 * c.b));
  return {y, y, y};
}

// lavfi input of kMatrixFrames frames of the pattern, `width` x `height`, as RGB.
std::string PatternInput(int width, int height) {
  const std::string box = "between(X\\,W/4\\,3*W/4)*between(Y\\,H/4\\,3*H/4)";
  // kBorder is grey: the same level in every channel.
  auto channel = [&](const char* name, const char* inside) {
    return absl::StrCat(name, "='if(", box, "\\,", inside, "\\,", kBorder.r, ")'");
  };
  return absl::StrCat("-f lavfi -i \"color=c=black:s=", width, "x", height, ":r=", kFrameRate,
                      ",format=rgb24,geq=", channel("r", "10+20*N"), ":", channel("g", "10+20*N"),
                      ":", channel("b", "230-20*N"), "\" -frames:v ", kMatrixFrames);
}

ClipOptions PlainRgb(int num_frames) {
  ClipOptions options;
  options.sampling.num_frames = num_frames;
  options.preprocess.resize_shorter_side = kSide;
  options.preprocess.crop_size = kSide;
  // Mean 0 and std 1 leave plain RGB in [0, 1], comparable with the pattern's levels.
  options.preprocess.mean = {0, 0, 0};
  options.preprocess.std = {1, 1, 1};
  return options;
}

float Channel(const DecodedClip& clip, int64_t t, int c, int y, int x) {
  const int s = clip.crop_size;
  return clip.pixels[((t * 3 + c) * s + y) * s + x];
}

// Empty when the crop pixel (x, y) of the clip's frame t has the colour `expected`, to within
// `tolerance` in every channel; else what it has instead.
std::string ColourMismatch(const DecodedClip& clip, int64_t t, int x, int y, Rgb expected,
                           double tolerance) {
  const int levels[3] = {expected.r, expected.g, expected.b};
  double actual[3];
  bool near = true;
  for (int c = 0; c < 3; ++c) {
    actual[c] = Channel(clip, t, c, y, x) * 255;
    near = near && std::abs(actual[c] - levels[c]) <= tolerance * 255;
  }
  if (near) return "";
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << "frame " << clip.frame_indices[t] << ", crop pixel ("
      << x << ", " << y << "): RGB " << actual[0] << " " << actual[1] << " " << actual[2]
      << ", expected " << levels[0] << " " << levels[1] << " " << levels[2] << " +- "
      << tolerance * 255;
  return out.str();
}

// The first value of each `key=value` line ffprobe prints; mpegts lists its streams twice.
std::map<std::string, std::string> Probe(const std::string& arguments, const std::string& path) {
  int exit_code = 0;
  const std::string out = testing::RunCommand(
      "ffprobe -v error " + arguments + " -of default=noprint_wrappers=1 '" + path + "' 2>&1",
      &exit_code);
  EXPECT_EQ(exit_code, 0) << "ffprobe " << arguments << " " << path << ": " << out;
  std::map<std::string, std::string> values;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> key_value = absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (key_value.size() == 2) values.emplace(key_value[0], key_value[1]);
  }
  return values;
}

// Keeps one scratch directory for a suite, and the list of encoders this ffmpeg has.
class MatrixTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeScratchDir("decode_matrix"));
    int exit_code = 0;
    encoders_ = new std::string(
        testing::RunCommand("ffmpeg -hide_banner -encoders 2>/dev/null", &exit_code));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete encoders_;
  }

 protected:
  static bool HasEncoder(const std::string& name) {
    return encoders_->find(" " + name + " ") != std::string::npos;
  }
  static std::string Path(const std::string& file) { return *dir_ + "/" + file; }

 private:
  static std::string* dir_;
  static std::string* encoders_;
};

std::string* MatrixTest::dir_ = nullptr;
std::string* MatrixTest::encoders_ = nullptr;

// One video of the matrix. The file's extension picks the muxer.
struct VideoCell {
  const char* name;
  const char* file;
  const char* encoder;  // as `ffmpeg -encoders` names it
  const char* options;  // ffmpeg output options
  // What ffprobe must report, so that the cell holds what it claims: ffmpeg silently converts to
  // another pixel format when an encoder lacks the one asked for.
  const char* codec;
  const char* pix_fmt;
  int width;
  int height;
  bool grey;         // luma only: the pattern's colours turn into their greys
  double tolerance;  // per channel, in [0, 1] units
};

// gtest names the cell when a test fails, instead of dumping its bytes.
void PrintTo(const VideoCell& cell, std::ostream* os) { *os << cell.name; }

// Bounds on a channel's error, in [0, 1] units. Lossy codecs at high quality, with chroma
// subsampling and limited-range YUV, were seen to stay within 5 levels; 10 levels is half the step
// between neighbouring frames, so a frame off by one still fails.
constexpr double kLossy = 0.04;
// Lossless codecs: only the RGB <-> YUV rounding, if any.
constexpr double kLossless = 0.02;
// Grey cells step 15 levels a frame.
constexpr double kGrey = 0.03;

// Options per encoder, at high quality, with a keyframe every 4 frames so that sparse sampling
// seeks. x264, x265, VP8 (with alt-ref), VP9 and AV1 reorder or hide frames by default; MPEG-4 and
// MPEG-2 are given B-frames.
#define X264 "-c:v libx264 -crf 10 -g 4 -pix_fmt "
#define X265 "-c:v libx265 -crf 10 -g 4 -x265-params log-level=error -pix_fmt "
#define VP8 "-c:v libvpx -crf 4 -b:v 2M -g 4 -auto-alt-ref 1 -lag-in-frames 8 -pix_fmt yuv420p"
#define VP9 "-c:v libvpx-vp9 -crf 10 -b:v 0 -g 4 -pix_fmt "
#define AOM "-c:v libaom-av1 -cpu-used 8 -crf 10 -g 4 -pix_fmt "
#define MPEG4 "-c:v mpeg4 -q:v 2 -g 4 -bf 2"
#define MPEG2 "-c:v mpeg2video -q:v 2 -g 4 -bf 2 -pix_fmt "
#define MJPEG "-c:v mjpeg -q:v 2 -pix_fmt "
#define THEORA "-c:v libtheora -q:v 10 -g 4 -pix_fmt "
#define FRAGMENTED " -movflags frag_keyframe+empty_moov"

// Every encoder here is in Debian bookworm's ffmpeg build, so a missing one fails its cells.
constexpr VideoCell kVideoCells[] = {
    // Codecs in the containers that carry them, yuv420p.
    {"h264_mp4", "h264.mp4", "libx264", X264 "yuv420p", "h264", "yuv420p", 64, 48, false, kLossy},
    {"h264_fragmented_mp4", "h264_frag.mp4", "libx264", X264 "yuv420p" FRAGMENTED, "h264",
     "yuv420p", 64, 48, false, kLossy},
    {"h264_mkv", "h264.mkv", "libx264", X264 "yuv420p", "h264", "yuv420p", 64, 48, false, kLossy},
    {"h264_mov", "h264.mov", "libx264", X264 "yuv420p", "h264", "yuv420p", 64, 48, false, kLossy},
    {"h264_avi", "h264.avi", "libx264", X264 "yuv420p", "h264", "yuv420p", 64, 48, false, kLossy},
    {"h264_mpegts", "h264.ts", "libx264", X264 "yuv420p", "h264", "yuv420p", 64, 48, false, kLossy},
    {"hevc_mp4", "hevc.mp4", "libx265", X265 "yuv420p", "hevc", "yuv420p", 64, 48, false, kLossy},
    {"hevc_fragmented_mp4", "hevc_frag.mp4", "libx265", X265 "yuv420p" FRAGMENTED, "hevc",
     "yuv420p", 64, 48, false, kLossy},
    {"hevc_mkv", "hevc.mkv", "libx265", X265 "yuv420p", "hevc", "yuv420p", 64, 48, false, kLossy},
    {"hevc_mov", "hevc.mov", "libx265", X265 "yuv420p", "hevc", "yuv420p", 64, 48, false, kLossy},
    {"hevc_mpegts", "hevc.ts", "libx265", X265 "yuv420p", "hevc", "yuv420p", 64, 48, false, kLossy},
    {"vp8_webm", "vp8.webm", "libvpx", VP8, "vp8", "yuv420p", 64, 48, false, kLossy},
    {"vp8_mkv", "vp8.mkv", "libvpx", VP8, "vp8", "yuv420p", 64, 48, false, kLossy},
    {"vp8_ogg", "vp8.ogg", "libvpx", VP8, "vp8", "yuv420p", 64, 48, false, kLossy},
    {"vp9_webm", "vp9.webm", "libvpx-vp9", VP9 "yuv420p", "vp9", "yuv420p", 64, 48, false, kLossy},
    {"vp9_mkv", "vp9.mkv", "libvpx-vp9", VP9 "yuv420p", "vp9", "yuv420p", 64, 48, false, kLossy},
    {"vp9_mp4", "vp9.mp4", "libvpx-vp9", VP9 "yuv420p", "vp9", "yuv420p", 64, 48, false, kLossy},
    {"av1_webm", "av1.webm", "libaom-av1", AOM "yuv420p", "av1", "yuv420p", 64, 48, false, kLossy},
    {"av1_mkv", "av1.mkv", "libaom-av1", AOM "yuv420p", "av1", "yuv420p", 64, 48, false, kLossy},
    {"av1_mp4", "av1.mp4", "libaom-av1", AOM "yuv420p", "av1", "yuv420p", 64, 48, false, kLossy},
    {"av1_fragmented_mp4", "av1_frag.mp4", "libaom-av1", AOM "yuv420p" FRAGMENTED, "av1", "yuv420p",
     64, 48, false, kLossy},
    // SVT-AV1 refuses frames under 64 pixels high.
    {"av1_svt_mp4", "av1_svt.mp4", "libsvtav1",
     "-c:v libsvtav1 -preset 12 -crf 10 -g 4 -pix_fmt yuv420p", "av1", "yuv420p", 96, 64, false,
     kLossy},
    {"av1_rav1e_mkv", "av1_rav1e.mkv", "librav1e",
     "-c:v librav1e -speed 10 -qp 20 -g 4 -pix_fmt yuv420p", "av1", "yuv420p", 64, 48, false,
     kLossy},
    {"mpeg4_mp4", "mpeg4.mp4", "mpeg4", MPEG4, "mpeg4", "yuv420p", 64, 48, false, kLossy},
    {"mpeg4_avi", "mpeg4.avi", "mpeg4", MPEG4, "mpeg4", "yuv420p", 64, 48, false, kLossy},
    {"mpeg4_mkv", "mpeg4.mkv", "mpeg4", MPEG4, "mpeg4", "yuv420p", 64, 48, false, kLossy},
    {"mpeg4_mov", "mpeg4.mov", "mpeg4", MPEG4, "mpeg4", "yuv420p", 64, 48, false, kLossy},
    {"mpeg4_mpegts", "mpeg4.ts", "mpeg4", MPEG4, "mpeg4", "yuv420p", 64, 48, false, kLossy},
    {"mpeg2video_mpegts", "mpeg2.ts", "mpeg2video", MPEG2 "yuv420p", "mpeg2video", "yuv420p", 64,
     48, false, kLossy},
    {"mpeg2video_mkv", "mpeg2.mkv", "mpeg2video", MPEG2 "yuv420p", "mpeg2video", "yuv420p", 64, 48,
     false, kLossy},
    // MPEG program streams, which have no header: DVD's VOB, the DVD muxer, MPEG-1 systems (whose
    // video allows 10 fps only as an unofficial rate).
    {"mpeg2video_vob", "mpeg2.vob", "mpeg2video", MPEG2 "yuv420p -f vob", "mpeg2video", "yuv420p",
     64, 48, false, kLossy},
    {"mpeg2video_dvd", "mpeg2_dvd.vob", "mpeg2video", MPEG2 "yuv420p -f dvd", "mpeg2video",
     "yuv420p", 64, 48, false, kLossy},
    {"mpeg1video_mpeg", "mpeg1.mpg", "mpeg1video",
     "-c:v mpeg1video -strict unofficial -q:v 2 -g 4 -bf 2 -f mpeg", "mpeg1video", "yuv420p", 64,
     48, false, kLossy},
    {"mjpeg_avi", "mjpeg.avi", "mjpeg", MJPEG "yuvj420p", "mjpeg", "yuvj420p", 64, 48, false,
     kLossy},
    {"mjpeg_mov", "mjpeg.mov", "mjpeg", MJPEG "yuvj420p", "mjpeg", "yuvj420p", 64, 48, false,
     kLossy},
    {"mjpeg_mkv", "mjpeg.mkv", "mjpeg", MJPEG "yuvj420p", "mjpeg", "yuvj420p", 64, 48, false,
     kLossy},
    {"theora_ogg", "theora.ogg", "libtheora", THEORA "yuv420p", "theora", "yuv420p", 64, 48, false,
     kLossy},
    {"theora_mkv", "theora.mkv", "libtheora", THEORA "yuv420p", "theora", "yuv420p", 64, 48, false,
     kLossy},
    // yuv422p.
    {"h264_mkv_yuv422p", "h264_422.mkv", "libx264", X264 "yuv422p", "h264", "yuv422p", 64, 48,
     false, kLossy},
    {"hevc_mp4_yuv422p", "hevc_422.mp4", "libx265", X265 "yuv422p", "hevc", "yuv422p", 64, 48,
     false, kLossy},
    {"vp9_webm_yuv422p", "vp9_422.webm", "libvpx-vp9", VP9 "yuv422p", "vp9", "yuv422p", 64, 48,
     false, kLossy},
    {"mpeg2video_mpegts_yuv422p", "mpeg2_422.ts", "mpeg2video", MPEG2 "yuv422p", "mpeg2video",
     "yuv422p", 64, 48, false, kLossy},
    {"mjpeg_avi_yuvj422p", "mjpeg_422.avi", "mjpeg", MJPEG "yuvj422p", "mjpeg", "yuvj422p", 64, 48,
     false, kLossy},
    {"theora_ogg_yuv422p", "theora_422.ogg", "libtheora", THEORA "yuv422p", "theora", "yuv422p", 64,
     48, false, kLossy},
    {"ffv1_mkv_yuv422p", "ffv1_422.mkv", "ffv1", "-c:v ffv1 -pix_fmt yuv422p", "ffv1", "yuv422p",
     64, 48, false, kLossless},
    // yuv444p.
    {"h264_mp4_yuv444p", "h264_444.mp4", "libx264", X264 "yuv444p", "h264", "yuv444p", 64, 48,
     false, kLossy},
    {"hevc_mkv_yuv444p", "hevc_444.mkv", "libx265", X265 "yuv444p", "hevc", "yuv444p", 64, 48,
     false, kLossy},
    {"vp9_webm_yuv444p", "vp9_444.webm", "libvpx-vp9", VP9 "yuv444p", "vp9", "yuv444p", 64, 48,
     false, kLossy},
    {"av1_mkv_yuv444p", "av1_444.mkv", "libaom-av1", AOM "yuv444p", "av1", "yuv444p", 64, 48, false,
     kLossy},
    {"theora_ogg_yuv444p", "theora_444.ogg", "libtheora", THEORA "yuv444p", "theora", "yuv444p", 64,
     48, false, kLossy},
    {"ffv1_mkv_yuv444p", "ffv1_444.mkv", "ffv1", "-c:v ffv1 -pix_fmt yuv444p", "ffv1", "yuv444p",
     64, 48, false, kLossless},
    // yuv420p10le.
    {"h264_mkv_yuv420p10le", "h264_10.mkv", "libx264", X264 "yuv420p10le", "h264", "yuv420p10le",
     64, 48, false, kLossy},
    {"hevc_mp4_yuv420p10le", "hevc_10.mp4", "libx265", X265 "yuv420p10le", "hevc", "yuv420p10le",
     64, 48, false, kLossy},
    {"vp9_webm_yuv420p10le", "vp9_10.webm", "libvpx-vp9", VP9 "yuv420p10le", "vp9", "yuv420p10le",
     64, 48, false, kLossy},
    {"av1_webm_yuv420p10le", "av1_10.webm", "libaom-av1", AOM "yuv420p10le", "av1", "yuv420p10le",
     64, 48, false, kLossy},
    {"ffv1_mkv_yuv420p10le", "ffv1_10.mkv", "ffv1", "-c:v ffv1 -pix_fmt yuv420p10le", "ffv1",
     "yuv420p10le", 64, 48, false, kLossless},
    // gray. libavcodec decodes 8-bit monochrome H.264 as yuvj420p with flat chroma.
    {"h264_mkv_gray", "h264_gray.mkv", "libx264", X264 "gray", "h264", "yuvj420p", 64, 48, true,
     kGrey},
    {"hevc_mkv_gray", "hevc_gray.mkv", "libx265", X265 "gray", "hevc", "gray", 64, 48, true, kGrey},
    {"av1_mkv_gray", "av1_gray.mkv", "libaom-av1", AOM "gray", "av1", "gray", 64, 48, true, kGrey},
    {"ffv1_mkv_gray", "ffv1_gray.mkv", "ffv1", "-c:v ffv1 -pix_fmt gray", "ffv1", "gray", 64, 48,
     true, kGrey},
    {"png_mkv_gray", "png_gray.mkv", "png", "-c:v png -pix_fmt gray", "png", "gray", 64, 48, true,
     kGrey},
    {"rawvideo_avi_gray", "raw_gray.avi", "rawvideo", "-c:v rawvideo -pix_fmt gray", "rawvideo",
     "gray", 64, 48, true, kGrey},
    // RGB: packed rgb24 (PNG, raw), and the planar RGB that H.264 and AV1 decode to.
    {"png_mov_rgb24", "png_rgb.mov", "png", "-c:v png -pix_fmt rgb24", "png", "rgb24", 64, 48,
     false, kLossless},
    {"rawvideo_mov_rgb24", "raw_rgb.mov", "rawvideo", "-c:v rawvideo -pix_fmt rgb24", "rawvideo",
     "rgb24", 64, 48, false, kLossless},
    {"h264_mkv_rgb24", "h264_rgb.mkv", "libx264rgb", "-c:v libx264rgb -qp 0 -pix_fmt rgb24", "h264",
     "gbrp", 64, 48, false, kLossless},
    {"av1_mkv_gbrp", "av1_rgb.mkv", "libaom-av1", AOM "gbrp", "av1", "gbrp", 64, 48, false, kLossy},
    {"ffv1_mkv_bgr0", "ffv1_rgb.mkv", "ffv1", "-c:v ffv1 -pix_fmt bgr0", "ffv1", "bgr0", 64, 48,
     false, kLossless},
    // Colour tags, which the converter must honour as the ffmpeg CLI does: a BT.709 matrix, and
    // full-range YUV in a format without a "j" variant (VP9, AV1). H.264 full range decodes as
    // yuvj420p, whose range swscale knows from the format itself.
    {"h264_mp4_bt709", "h264_709.mp4", "libx264",
     "-vf scale=out_color_matrix=bt709,format=yuv420p -colorspace bt709 -color_primaries bt709 "
     "-color_trc bt709 " X264 "yuv420p",
     "h264", "yuv420p", 64, 48, false, kLossy},
    {"vp9_webm_full_range", "vp9_pc.webm", "libvpx-vp9",
     "-vf scale=out_range=pc,format=yuv420p -color_range pc " VP9 "yuv420p", "vp9", "yuv420p", 64,
     48, false, kLossy},
    {"av1_webm_full_range", "av1_pc.webm", "libaom-av1",
     "-vf scale=out_range=pc,format=yuv420p -color_range pc " AOM "yuv420p", "av1", "yuv420p", 64,
     48, false, kLossy},
    {"h264_mkv_full_range", "h264_pc.mkv", "libx264",
     "-vf scale=out_range=pc,format=yuv420p -color_range pc " X264 "yuv420p", "h264", "yuvj420p",
     64, 48, false, kLossy},
    // Odd frame size: chroma planes of ceil(97 / 2) x ceil(61 / 2), rows with padding.
    {"h264_mkv_97x61_yuv444p", "h264_odd.mkv", "libx264", X264 "yuv444p", "h264", "yuv444p", 97, 61,
     false, kLossy},
    {"vp8_webm_97x61", "vp8_odd.webm", "libvpx", VP8, "vp8", "yuv420p", 97, 61, false, kLossy},
    {"vp9_webm_97x61", "vp9_odd.webm", "libvpx-vp9", VP9 "yuv420p", "vp9", "yuv420p", 97, 61, false,
     kLossy},
    {"av1_webm_97x61", "av1_odd.webm", "libaom-av1", AOM "yuv420p", "av1", "yuv420p", 97, 61, false,
     kLossy},
    {"mpeg4_avi_97x61", "mpeg4_odd.avi", "mpeg4", MPEG4, "mpeg4", "yuv420p", 97, 61, false, kLossy},
    {"mpeg2video_mpegts_97x61", "mpeg2_odd.ts", "mpeg2video", MPEG2 "yuv420p", "mpeg2video",
     "yuv420p", 97, 61, false, kLossy},
    {"mjpeg_avi_97x61", "mjpeg_odd.avi", "mjpeg", MJPEG "yuvj420p", "mjpeg", "yuvj420p", 97, 61,
     false, kLossy},
    {"theora_ogg_97x61", "theora_odd.ogg", "libtheora", THEORA "yuv420p", "theora", "yuv420p", 97,
     61, false, kLossy},
    {"ffv1_mkv_97x61", "ffv1_odd.mkv", "ffv1", "-c:v ffv1 -pix_fmt yuv420p", "ffv1", "yuv420p", 97,
     61, false, kLossless},
    {"png_mov_97x61_rgb24", "png_odd.mov", "png", "-c:v png -pix_fmt rgb24", "png", "rgb24", 97, 61,
     false, kLossless},
};

#undef X264
#undef X265
#undef VP8
#undef VP9
#undef AOM
#undef MPEG4
#undef MPEG2
#undef MJPEG
#undef THEORA
#undef FRAGMENTED

// Checks a clip of a generated video against the pattern, frame by frame.
void ExpectPattern(const DecodedClip& clip, const VideoCell& cell,
                   const std::vector<int64_t>& expected) {
  EXPECT_EQ(clip.total_frames, kMatrixFrames);
  EXPECT_EQ(clip.source_width, cell.width);
  EXPECT_EQ(clip.source_height, cell.height);
  ASSERT_THAT(clip.frame_indices, ElementsAreArray(expected));
  ASSERT_EQ(clip.num_frames, static_cast<int64_t>(expected.size()));
  ASSERT_EQ(clip.timestamps_seconds.size(), expected.size());
  ASSERT_EQ(clip.pixels.size(), expected.size() * 3 * kSide * kSide);
  const Rgb border = cell.grey ? Grey(kBorder) : kBorder;
  std::vector<std::string> mismatches;
  for (size_t t = 0; t < expected.size(); ++t) {
    const int n = static_cast<int>(expected[t]);
    EXPECT_NEAR(clip.timestamps_seconds[t], n / kFrameRate, 0.5 / kFrameRate) << "frame " << n;
    // The crop's centre lies in the box; its corner, in the border.
    const Rgb box = cell.grey ? Grey(BoxColour(n)) : BoxColour(n);
    for (const std::string& mismatch :
         {ColourMismatch(clip, t, kSide / 2, kSide / 2, box, cell.tolerance),
          ColourMismatch(clip, t, 1, 1, border, cell.tolerance)}) {
      if (!mismatch.empty()) mismatches.push_back(mismatch);
    }
  }
  EXPECT_THAT(mismatches, IsEmpty());
}

class GeneratedVideoTest : public MatrixTest, public ::testing::WithParamInterface<VideoCell> {};

// Each file is made by the one test that reads it, so that a filtered run, or ctest's one process
// per test, encodes only what it checks.
TEST_P(GeneratedVideoTest, DecodesFramesTimesAndColours) {
  const VideoCell& cell = GetParam();
  ASSERT_TRUE(HasEncoder(cell.encoder)) << "this ffmpeg has no " << cell.encoder
                                        << " encoder; Debian's has (scripts/install-deps.sh)";
  const std::string path = Path(cell.file);
  testing::MakeVideo(absl::StrCat(PatternInput(cell.width, cell.height), " ", cell.options), path);
  ASSERT_FALSE(HasFatalFailure());
  std::map<std::string, std::string> stream =
      Probe("-select_streams v:0 -show_entries stream=codec_name,pix_fmt", path);
  ASSERT_EQ(stream["codec_name"], cell.codec);
  ASSERT_EQ(stream["pix_fmt"], cell.pix_fmt);
  const std::string bytes = testing::ReadFile(path);

  for (int num_frames : {0, kSampled, kSparse}) {
    SCOPED_TRACE(absl::StrCat("num_frames ", num_frames));
    absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), PlainRgb(num_frames));
    ASSERT_TRUE(clip.ok()) << clip.status();
    ExpectPattern(*clip, cell, UniformSampleIndices(kMatrixFrames, num_frames));

    // Seeking and skipping are meant to change how much is decoded, never the result.
    ClipOptions straight = PlainRgb(num_frames);
    straight.seek_to_keyframes = false;
    straight.skip_unwanted_non_reference_frames = false;
    absl::StatusOr<DecodedClip> reference = DecodeClip(VideoSource::Bytes(bytes), straight);
    ASSERT_TRUE(reference.ok()) << reference.status();
    EXPECT_EQ(clip->frame_indices, reference->frame_indices);
    EXPECT_EQ(clip->timestamps_seconds, reference->timestamps_seconds);
    EXPECT_TRUE(clip->pixels == reference->pixels)
        << "pixels differ from a decode without seeking or skipping (" << clip->seeks << " seeks, "
        << clip->frames_decoded << " frames decoded)";
  }

  // The incremental source, fed as a gRPC stream would feed it, gives the same frames.
  absl::StatusOr<DecodedClip> whole = DecodeClip(VideoSource::Bytes(bytes), PlainRgb(kSampled));
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (size_t chunk_bytes : {size_t{1}, size_t{4096}, size_t{1} << 20}) {
    SCOPED_TRACE(absl::StrCat("chunks of ", chunk_bytes, " bytes"));
    absl::StatusOr<DecodedClip> chunked =
        testing::DecodeInChunks(bytes, chunk_bytes, PlainRgb(kSampled));
    ASSERT_TRUE(chunked.ok()) << chunked.status();
    EXPECT_EQ(chunked->total_frames, whole->total_frames);
    EXPECT_EQ(chunked->frame_indices, whole->frame_indices);
    EXPECT_EQ(chunked->timestamps_seconds, whole->timestamps_seconds);
    EXPECT_TRUE(chunked->pixels == whole->pixels) << "pixels differ from the memory source's";
  }
}

std::string CellName(const ::testing::TestParamInfo<VideoCell>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(DecodeMatrix, GeneratedVideoTest, ::testing::ValuesIn(kVideoCells),
                         CellName);

// A single image, which libavformat opens with an image2 pipe demuxer when it has no file name.
struct StillCell {
  const char* name;
  const char* file;
  const char* options;
  const char* codec;
  int width;
  int height;
  double tolerance;
};

constexpr StillCell kStillCells[] = {
    {"png", "still.png", "-c:v png -pix_fmt rgb24", "png", 64, 48, kLossless},
    {"jpeg_97x61", "still.jpg", "-c:v mjpeg -q:v 2 -pix_fmt yuvj444p", "mjpeg", 97, 61, kLossy},
};

void PrintTo(const StillCell& cell, std::ostream* os) { *os << cell.name; }

class StillImageTest : public MatrixTest, public ::testing::WithParamInterface<StillCell> {};

TEST_P(StillImageTest, DecodesOneFrameAtTimeZero) {
  const StillCell& cell = GetParam();
  const std::string path = Path(cell.file);
  testing::MakeVideo(
      absl::StrCat(PatternInput(cell.width, cell.height), " -frames:v 1 ", cell.options), path);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(Probe("-select_streams v:0 -show_entries stream=codec_name", path)["codec_name"],
            cell.codec);

  // More frames are asked for than there are: the one frame is returned once.
  absl::StatusOr<DecodedClip> clip =
      DecodeClip(VideoSource::Bytes(testing::ReadFile(path)), PlainRgb(16));
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->total_frames, 1);
  EXPECT_EQ(clip->source_width, cell.width);
  EXPECT_EQ(clip->source_height, cell.height);
  ASSERT_THAT(clip->frame_indices, ElementsAreArray({int64_t{0}}));
  ASSERT_EQ(clip->num_frames, 1);
  EXPECT_THAT(clip->timestamps_seconds, ElementsAreArray({0.0}));
  EXPECT_EQ(ColourMismatch(*clip, 0, kSide / 2, kSide / 2, BoxColour(0), cell.tolerance), "");
  EXPECT_EQ(ColourMismatch(*clip, 0, 1, 1, kBorder, cell.tolerance), "");
}

std::string StillName(const ::testing::TestParamInfo<StillCell>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(DecodeMatrix, StillImageTest, ::testing::ValuesIn(kStillCells), StillName);

// Audio without video, in the containers that usually carry it.
struct AudioCell {
  const char* name;
  const char* file;
  const char* options;
  const char* format;  // libavformat's name for the demuxer
};

constexpr AudioCell kAudioCells[] = {
    {"wav", "tone.wav", "-c:a pcm_s16le", "wav"},
    {"flac", "tone.flac", "-c:a flac", "flac"},
    {"ogg_vorbis", "tone.ogg", "-c:a libvorbis", "ogg"},
    {"m4a_aac", "tone.m4a", "-c:a aac", "mov,mp4,m4a,3gp,3g2,mj2"},
    {"webm_opus", "tone.webm", "-c:a libopus", "matroska,webm"},
    {"mpegts_mp2", "tone.ts", "-c:a mp2", "mpegts"},
};

void PrintTo(const AudioCell& cell, std::ostream* os) { *os << cell.name; }

class AudioOnlyTest : public MatrixTest, public ::testing::WithParamInterface<AudioCell> {};

TEST_P(AudioOnlyTest, SaysThereIsNoVideoStreamAndNamesTheFormat) {
  const AudioCell& cell = GetParam();
  const std::string path = Path(cell.file);
  testing::MakeVideo(absl::StrCat("-f lavfi -i sine=frequency=440:duration=0.5 ", cell.options),
                     path);
  ASSERT_FALSE(HasFatalFailure());
  absl::StatusOr<DecodedClip> clip =
      DecodeClip(VideoSource::Bytes(testing::ReadFile(path)), PlainRgb(kSampled));
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument) << clip.status();
  EXPECT_THAT(clip.status().message(), HasSubstr("no video stream"));
  EXPECT_THAT(clip.status().message(), HasSubstr(absl::StrCat("format: ", cell.format, ",")));
  EXPECT_THAT(clip.status().message(), HasSubstr("streams: audio"));
}

std::string AudioName(const ::testing::TestParamInfo<AudioCell>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(DecodeMatrix, AudioOnlyTest, ::testing::ValuesIn(kAudioCells), AudioName);

// Real files nobody here produced: the samples python3-imageio ships (scripts/install-deps.sh).
constexpr char kImageioSamples[] = "/usr/lib/python3/dist-packages/imageio/resources/images";

struct SampleFile {
  const char* name;
  const char* file;
};

constexpr SampleFile kSampleFiles[] = {
    {"cockatoo_mp4", "cockatoo.mp4"},            // H.264 High 4:4:4, 1280x720, 280 frames
    {"realshort_mp4", "realshort.mp4"},          // H.264, 320x240, 36 frames at 29.97 fps
    {"newtonscradle_gif", "newtonscradle.gif"},  // GIF, bgra, uneven frame delays
    {"chelsea_png", "chelsea.png"},              // a photograph, 451x300
    {"astronaut_png", "astronaut.png"},          // a photograph, 512x512
};

void PrintTo(const SampleFile& sample, std::ostream* os) { *os << sample.name; }

class PackagedSampleTest : public MatrixTest, public ::testing::WithParamInterface<SampleFile> {};

// ffprobe gives the oracle for frame count, size and times; the ffmpeg CLI's own decode, cropped
// and resized by the same swscale bilinear filter, gives the oracle for pixels.
TEST_P(PackagedSampleTest, DecodesAsTheFfmpegCliDoes) {
  const std::string path = absl::StrCat(kImageioSamples, "/", GetParam().file);
  ASSERT_TRUE(std::filesystem::exists(path))
      << path << " is missing; scripts/install-deps.sh installs python3-imageio";

  std::map<std::string, std::string> stream =
      Probe("-select_streams v:0 -show_entries stream=width,height,start_time,pix_fmt", path);
  const int width = std::atoi(stream["width"].c_str());
  const int height = std::atoi(stream["height"].c_str());
  const double start = stream["start_time"] == "N/A" ? 0 : std::atof(stream["start_time"].c_str());
  int exit_code = 0;
  const std::string frame_lines = testing::RunCommand(
      "ffprobe -v error -select_streams v:0 -show_entries frame=best_effort_timestamp_time "
      "-of csv=p=0 '" +
          path + "'",
      &exit_code);
  ASSERT_EQ(exit_code, 0);
  std::vector<double> frame_times;
  for (absl::string_view line : absl::StrSplit(frame_lines, '\n', absl::SkipEmpty())) {
    frame_times.push_back(std::atof(std::string(line).c_str()) - start);
  }
  ASSERT_GT(frame_times.size(), 0u);
  const auto total = static_cast<int64_t>(frame_times.size());

  constexpr int kWanted = 8;
  absl::StatusOr<DecodedClip> clip =
      DecodeClip(VideoSource::Bytes(testing::ReadFile(path)), PlainRgb(kWanted));
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->total_frames, total);
  EXPECT_EQ(clip->source_width, width);
  EXPECT_EQ(clip->source_height, height);
  const std::vector<int64_t> expected = UniformSampleIndices(total, kWanted);
  ASSERT_THAT(clip->frame_indices, ElementsAreArray(expected));
  ASSERT_EQ(clip->timestamps_seconds.size(), expected.size());
  for (size_t t = 0; t < expected.size(); ++t) {
    EXPECT_NEAR(clip->timestamps_seconds[t], frame_times[expected[t]], 1e-3)
        << "frame " << expected[t];
  }

  // The same frames from the ffmpeg CLI, made as FrameConverter makes them: the stored pixels
  // under the centre crop of the picture resized to kSide on its shorter side, their left and top
  // edges rounded to the chroma grid and their right and bottom edges to whole pixels
  // (media/frame_converter.cc, FindSourceRegion), resized straight to kSide x kSide into RGBA.
  const int scaled_width =
      width < height ? kSide : static_cast<int>(std::lround(1.0 * width * kSide / height));
  const int scaled_height =
      width < height ? static_cast<int>(std::lround(1.0 * height * kSide / width)) : kSide;
  const AVPixFmtDescriptor* descriptor =
      av_pix_fmt_desc_get(av_get_pix_fmt(stream["pix_fmt"].c_str()));
  ASSERT_NE(descriptor, nullptr) << stream["pix_fmt"];
  auto span = [](int crop_start, int stored, int scaled, int align) {
    const double scale = 1.0 * stored / scaled;
    const int start = std::clamp(static_cast<int>(std::lround(crop_start * scale / align)) * align,
                                 0, (stored - 1) / align * align);
    const int size = std::clamp(static_cast<int>(std::lround((crop_start + kSide) * scale)) - start,
                                1, stored - start);
    return std::array<int, 2>{start, size};
  };
  const auto [left, region_width] =
      span((scaled_width - kSide) / 2, width, scaled_width, 1 << descriptor->log2_chroma_w);
  const auto [top, region_height] =
      span((scaled_height - kSide) / 2, height, scaled_height, 1 << descriptor->log2_chroma_h);
  std::vector<std::string> selected;
  for (int64_t index : expected) selected.push_back(absl::StrCat("eq(n\\,", index, ")"));
  const std::string reference = testing::RunCommand(
      absl::StrCat("ffmpeg -nostdin -v error -i '", path, "' -vf \"select='",
                   absl::StrJoin(selected, "+"), "',crop=", region_width, ":", region_height, ":",
                   left, ":", top, ":exact=1,scale=", kSide, ":", kSide,
                   ":flags=bilinear\" -fps_mode passthrough -pix_fmt rgba -f rawvideo -"),
      &exit_code);
  ASSERT_EQ(exit_code, 0);
  ASSERT_EQ(reference.size(), expected.size() * 4 * kSide * kSide);
  double worst = 0;
  for (size_t t = 0; t < expected.size(); ++t) {
    for (int y = 0; y < kSide; ++y) {
      for (int x = 0; x < kSide; ++x) {
        for (int c = 0; c < 3; ++c) {
          const auto level = static_cast<uint8_t>(reference[((t * kSide + y) * kSide + x) * 4 + c]);
          worst = std::max(worst, std::abs(Channel(*clip, t, c, y, x) - level / 255.0));
        }
      }
    }
  }
  // Same libraries, same filter: the levels agree (to within float rounding here).
  EXPECT_LE(worst, 1 / 255.0) << "largest difference from the ffmpeg CLI's pixels";
}

std::string SampleName(const ::testing::TestParamInfo<SampleFile>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(DecodeMatrix, PackagedSampleTest, ::testing::ValuesIn(kSampleFiles),
                         SampleName);

}  // namespace
}  // namespace vidclf::media
