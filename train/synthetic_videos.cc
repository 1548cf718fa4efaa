#include "train/synthetic_videos.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "media/av_util.h"
#include "train/synthetic_random.h"

namespace vidclf::train {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kNumClasses = 10;
// Lengths (texture wavelengths, blur radii) are in units of 1/kReferenceSide of the frame's
// shorter side, so a frame looks the same at every drawn resolution once the server resizes it.
constexpr double kReferenceSide = 112;

using Rgb = std::array<double, 3>;

// `value` * a colour of hue `hue` (turns) and saturation `saturation`, channels 0..255.
Rgb HsvToRgb(double hue, double saturation, double value) {
  Rgb rgb;
  for (int c = 0; c < 3; ++c) {
    // Distance from the channel's own hue, as in the usual hexcone model.
    const double k = std::fmod(5.0 - 2.0 * c + 6.0 * hue, 6.0);
    const double weight = std::clamp(std::min(k, 4.0 - k), 0.0, 1.0);
    rgb[c] = 255.0 * value * (1.0 - saturation * weight);
  }
  return rgb;
}

// Rotates a colour about the grey axis by `angle` radians: a hue rotation that keeps brightness.
// Linear, so it may be applied to a colour difference as well.
Rgb RotateHue(const Rgb& rgb, double angle) {
  const double c = std::cos(angle);
  const double s = std::sin(angle);
  const double k = (1 - c) / 3;
  const double t = s / std::sqrt(3.0);
  return {(c + k) * rgb[0] + (k - t) * rgb[1] + (k + t) * rgb[2],
          (k + t) * rgb[0] + (c + k) * rgb[1] + (k - t) * rgb[2],
          (k - t) * rgb[0] + (k + t) * rgb[1] + (c + k) * rgb[2]};
}

struct Grating {
  double fx = 0;  // radians per unit
  double fy = 0;
  double phase = 0;
  double amplitude = 0;
};

// Everything about a video but its class's temporal effect, drawn once per (seed, pair, index).
struct Nuisance {
  SyntheticVideoFormat format;
  uint64_t noise_seed = 0;
  // The texture: colour = dark + (light - dark) * pattern, pattern a clipped sum of gratings.
  Rgb dark{};
  Rgb light{};
  std::array<Grating, 3> gratings;
  double sharpness = 0;
  double centre_u = 0;  // texture coordinate at the frame's centre: where the pattern sits
  double centre_v = 0;
  double magnification = 1;  // of the classes that do not zoom
  double gain = 1;           // brightness of the classes that do not fade or flicker
  double noise = 0;          // amplitude of the additive pixel noise, in levels
  // Strength of each effect.
  double fade_low = 0;
  double fade_high = 0;
  double hue_start = 0;
  double hue_turns = 0;
  double zoom_from = 0;
  double zoom_ratio = 0;
  double flicker_mid = 0;
  double flicker_amplitude = 0;
  double flicker_phase = 0;
  double blur_radius = 0;
};

struct Encoding {
  const char* container;
  const char* codec;
  const char* extension;
};

bool HasEncoder(const char* name) { return avcodec_find_encoder_by_name(name) != nullptr; }

Nuisance Draw(int pair, int index, uint64_t seed, const SyntheticVideoOptions& options) {
  Rng rng(Mix(Mix(seed, static_cast<uint64_t>(pair)), static_cast<uint64_t>(index)));
  Nuisance n;
  static constexpr std::array<int, 7> kSides = {96, 112, 128, 144, 160, 176, 192};
  static constexpr std::array<int, 5> kRates = {10, 12, 15, 24, 25};
  static constexpr std::array<Encoding, 4> kEncodings = {{{"mp4", "mpeg4", "mp4"},
                                                          {"avi", "mpeg4", "avi"},
                                                          {"avi", "mjpeg", "avi"},
                                                          {"matroska", "libx264", "mkv"}}};
  static const bool has_x264 = HasEncoder("libx264");
  const int min_frames = std::max(1, options.min_frames);
  const int max_frames = std::max(min_frames, options.max_frames);
  n.format.width = kSides[rng.Below(kSides.size())];
  n.format.height = kSides[rng.Below(kSides.size())];
  n.format.num_frames = min_frames + rng.Below(max_frames - min_frames + 1);
  n.format.encode.frames_per_second = kRates[rng.Below(kRates.size())];
  const Encoding& encoding = kEncodings[rng.Below(kEncodings.size())];
  n.format.encode.container = encoding.container;
  n.format.encode.codec = encoding.codec;
  n.format.extension = encoding.extension;
  if (n.format.encode.codec == "libx264" && !has_x264) n.format.encode.codec = "mpeg4";
  n.format.encode.quantizer = 2 + rng.Below(5);  // 2..6; libx264 ignores it (CRF 23)
  n.noise_seed = rng.Next();

  // Two saturated colours of different hue and brightness, so that hue rotation shows.
  const double hue = rng.Uniform(0, 1);
  n.dark = HsvToRgb(hue, rng.Uniform(0.5, 1.0), rng.Uniform(0.2, 0.45));
  n.light = HsvToRgb(hue + rng.Uniform(0.25, 0.75), rng.Uniform(0.4, 0.9), rng.Uniform(0.75, 1.0));
  for (Grating& grating : n.gratings) {
    const double wavelength = rng.Uniform(10, 36);
    const double direction = rng.Uniform(0, kPi);
    grating.fx = 2 * kPi / wavelength * std::cos(direction);
    grating.fy = 2 * kPi / wavelength * std::sin(direction);
    grating.phase = rng.Uniform(0, 2 * kPi);
    grating.amplitude = rng.Uniform(0.5, 1.0);
  }
  n.sharpness = rng.Uniform(1.0, 4.0);
  n.centre_u = rng.Uniform(0, 1000);
  n.centre_v = rng.Uniform(0, 1000);
  n.magnification = rng.Uniform(0.8, 1.25);
  n.gain = rng.Uniform(0.8, 1.0);
  n.noise = rng.Uniform(0, 12);

  n.fade_low = rng.Uniform(0.03, 0.15);
  n.fade_high = rng.Uniform(0.85, 1.0);
  n.hue_start = rng.Uniform(0, 2 * kPi);
  n.hue_turns = rng.Uniform(0.5, 1.0);
  n.zoom_from = rng.Uniform(0.5, 0.8);
  n.zoom_ratio = rng.Uniform(2.5, 4.0);
  n.flicker_mid = rng.Uniform(0.55, 0.65);
  n.flicker_amplitude = rng.Uniform(0.3, 0.4);
  n.flicker_phase = rng.Uniform(0, 2 * kPi);
  n.blur_radius = rng.Uniform(4, 7);
  return n;
}

// One frame's settings of the effect.
struct FrameState {
  double brightness = 1;
  double hue = 0;
  double magnification = 1;
  double blur = 0;  // box radius in reference units
};

FrameState StateAt(int label, const Nuisance& n, double progress) {
  FrameState state;
  state.brightness = n.gain;
  state.magnification = n.magnification;
  // The second class of a reversed pair plays the first backwards.
  const bool reversed = label % 2 == 1 && label / 2 != 3;
  const double p = reversed ? 1 - progress : progress;
  switch (label / 2) {
    case 0:  // fade
      state.brightness = n.fade_low + (n.fade_high - n.fade_low) * p;
      break;
    case 1:  // hue
      state.hue = n.hue_start + 2 * kPi * n.hue_turns * p;
      break;
    case 2:  // zoom
      state.magnification = n.zoom_from * std::pow(n.zoom_ratio, p);
      break;
    case 3: {  // flicker: whole cycles over the clip, so it starts and ends alike
      const int cycles = label % 2 == 0 ? 1 : 4;
      state.brightness =
          n.flicker_mid + n.flicker_amplitude * std::cos(2 * kPi * cycles * p + n.flicker_phase);
      break;
    }
    default:  // focus: the blur clears
      state.blur = n.blur_radius * (1 - p);
      break;
  }
  return state;
}

// The pattern (0..1) of the texture seen at `magnification`, one float per pixel.
void RenderPattern(const Nuisance& n, double magnification, std::vector<float>& pattern) {
  const int width = n.format.width;
  const int height = n.format.height;
  const double units_per_pixel =
      kReferenceSide / std::min(width, height) / magnification;  // texture units
  // sin(fx u + fy v + phase) = sin(fx u) cos(fy v + phase) + cos(fx u) sin(fy v + phase): the
  // per-column and per-row factors make each pixel a few multiplications.
  std::vector<std::array<double, 6>> columns(width);
  std::vector<std::array<double, 6>> rows(height);
  for (int x = 0; x < width; ++x) {
    const double u = n.centre_u + (x + 0.5 - width / 2.0) * units_per_pixel;
    for (int k = 0; k < 3; ++k) {
      columns[x][2 * k] = n.gratings[k].amplitude * std::sin(n.gratings[k].fx * u);
      columns[x][2 * k + 1] = n.gratings[k].amplitude * std::cos(n.gratings[k].fx * u);
    }
  }
  for (int y = 0; y < height; ++y) {
    const double v = n.centre_v + (y + 0.5 - height / 2.0) * units_per_pixel;
    for (int k = 0; k < 3; ++k) {
      const double angle = n.gratings[k].fy * v + n.gratings[k].phase;
      rows[y][2 * k] = std::cos(angle);
      rows[y][2 * k + 1] = std::sin(angle);
    }
  }
  pattern.resize(static_cast<size_t>(width) * height);
  const double slope = 0.5 * n.sharpness;
  for (int y = 0; y < height; ++y) {
    const auto& row = rows[y];
    for (int x = 0; x < width; ++x) {
      const auto& column = columns[x];
      double sum = 0;
      for (int k = 0; k < 6; ++k) sum += column[k] * row[k];
      // A clipped ramp: flat areas with sharp edges, which blur and scale visibly change.
      pattern[static_cast<size_t>(y) * width + x] =
          static_cast<float>(std::clamp(0.5 + slope * sum, 0.0, 1.0));
    }
  }
}

// Box filter of radius `radius` pixels (fractional: the outermost taps weigh its fraction) along
// `count` samples `stride` apart, edges clamped.
void BoxLine(float* data, int count, int stride, double radius, std::vector<double>& prefix,
             std::vector<float>& line) {
  const int whole = static_cast<int>(radius);
  const double fraction = radius - whole;
  const int margin = whole + 1;
  line.resize(count + 2 * margin);
  for (int i = 0; i < count + 2 * margin; ++i) {
    line[i] = data[static_cast<size_t>(std::clamp(i - margin, 0, count - 1)) * stride];
  }
  prefix.resize(line.size() + 1);
  prefix[0] = 0;
  for (size_t i = 0; i < line.size(); ++i) prefix[i + 1] = prefix[i] + line[i];
  const double norm = 1.0 / (2 * whole + 1 + 2 * fraction);
  for (int x = 0; x < count; ++x) {
    // line[x + margin] is sample x; the window is [x + 1, x + 2 * whole + 1] of line.
    const double inner = prefix[x + 2 * whole + 2] - prefix[x + 1];
    const double outer = fraction * (line[x] + line[x + 2 * margin]);
    data[static_cast<size_t>(x) * stride] = static_cast<float>((inner + outer) * norm);
  }
}

// Two separable box passes: close enough to a Gaussian, and cheap at any radius.
void Blur(std::vector<float>& image, int width, int height, double radius) {
  std::vector<double> prefix;
  std::vector<float> line;
  for (int pass = 0; pass < 2; ++pass) {
    for (int y = 0; y < height; ++y) {
      BoxLine(&image[static_cast<size_t>(y) * width], width, 1, radius, prefix, line);
    }
    for (int x = 0; x < width; ++x) BoxLine(&image[x], height, width, radius, prefix, line);
  }
}

uint8_t ToByte(double value) { return static_cast<uint8_t>(std::clamp(value, 0.0, 255.0) + 0.5); }

}  // namespace

const std::vector<std::string>& SyntheticLabels() {
  static const std::vector<std::string> labels = {
      "fade_in",  "fade_out",     "hue_forward",  "hue_backward", "zoom_in",
      "zoom_out", "flicker_slow", "flicker_fast", "focus_in",     "focus_out"};
  return labels;
}

SyntheticVideoFormat DescribeSyntheticVideo(int label, int index, uint64_t seed,
                                            const SyntheticVideoOptions& options) {
  return Draw(label / 2, index, seed, options).format;
}

std::vector<media::RgbImage> MakeSyntheticVideo(int label, int index, uint64_t seed,
                                                const SyntheticVideoOptions& options) {
  if (label < 0 || label >= kNumClasses) return {};
  const Nuisance n = Draw(label / 2, index, seed, options);
  const int width = n.format.width;
  const int height = n.format.height;
  const int num_frames = n.format.num_frames;
  const double pixels_per_unit = std::min(width, height) / kReferenceSide;
  const bool reversed = label % 2 == 1 && label / 2 != 3;

  std::vector<float> pattern;
  double pattern_magnification = -1;
  std::vector<float> blurred;
  std::vector<media::RgbImage> frames(num_frames);
  for (int f = 0; f < num_frames; ++f) {
    const double progress = num_frames > 1 ? static_cast<double>(f) / (num_frames - 1) : 0;
    const FrameState state = StateAt(label, n, progress);
    if (state.magnification != pattern_magnification) {
      RenderPattern(n, state.magnification, pattern);
      pattern_magnification = state.magnification;
    }
    const std::vector<float>* shown = &pattern;
    const double radius = state.blur * pixels_per_unit;
    if (radius > 0.01) {
      blurred = pattern;
      Blur(blurred, width, height, radius);
      shown = &blurred;
    }
    // Colour is affine in the pattern, and hue rotation and brightness are linear in colour.
    Rgb offset = RotateHue(n.dark, state.hue);
    Rgb difference = RotateHue(
        {n.light[0] - n.dark[0], n.light[1] - n.dark[1], n.light[2] - n.dark[2]}, state.hue);
    for (int c = 0; c < 3; ++c) {
      offset[c] *= state.brightness;
      difference[c] *= state.brightness;
    }
    // Noise is seeded by the frame's place in the effect, so a reversed class gets the very
    // frames of its partner backwards.
    const int time = reversed ? num_frames - 1 - f : f;
    Rng noise(Mix(n.noise_seed, static_cast<uint64_t>(time)));
    const double noise_scale = n.noise / 255.0;
    uint64_t bits = 0;
    int bits_left = 0;

    media::RgbImage& image = frames[f];
    image.width = width;
    image.height = height;
    image.rgb.resize(static_cast<size_t>(3) * width * height);
    for (size_t i = 0; i < shown->size(); ++i) {
      const double s = (*shown)[i];
      for (int c = 0; c < 3; ++c) {
        if (bits_left == 0) {
          bits = noise.Next();
          bits_left = 4;
        }
        // Triangular noise in [-noise, noise] from two random bytes.
        const int sum = static_cast<int>(bits & 0xFF) + static_cast<int>((bits >> 8) & 0xFF);
        bits >>= 16;
        --bits_left;
        image.rgb[3 * i + c] = ToByte(offset[c] + difference[c] * s + (sum - 255) * noise_scale);
      }
    }
  }
  return frames;
}

}  // namespace vidclf::train
