#include "train/synthetic_videos.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

namespace vidclf::train {
namespace {

constexpr double kPi = 3.14159265358979323846;

// A smooth random colour texture: a base colour plus a few sinusoidal waves per channel.
struct Texture {
  std::array<double, 3> base;
  std::array<std::array<double, 4>, 3> wave;  // amplitude, x frequency, y frequency, phase

  std::array<double, 3> At(int x, int y) const {
    std::array<double, 3> rgb;
    for (int c = 0; c < 3; ++c) {
      const auto& [amplitude, fx, fy, phase] = wave[c];
      rgb[c] = base[c] + amplitude * std::sin(fx * x + fy * y + phase);
    }
    return rgb;
  }
};

// Rotates a colour about the grey axis by `angle` radians: a hue rotation that keeps brightness.
std::array<double, 3> RotateHue(const std::array<double, 3>& rgb, double angle) {
  const double c = std::cos(angle);
  const double s = std::sin(angle);
  const double k = (1 - c) / 3;
  const double t = s / std::sqrt(3.0);
  return {(c + k) * rgb[0] + (k - t) * rgb[1] + (k + t) * rgb[2],
          (k + t) * rgb[0] + (c + k) * rgb[1] + (k - t) * rgb[2],
          (k - t) * rgb[0] + (k + t) * rgb[1] + (c + k) * rgb[2]};
}

uint8_t ToByte(double value) {
  return static_cast<uint8_t>(std::clamp(std::lround(value), 0L, 255L));
}

}  // namespace

const std::vector<std::string>& SyntheticLabels() {
  static const std::vector<std::string> labels = {"fade_in", "fade_out", "hue_forward",
                                                  "hue_backward"};
  return labels;
}

std::vector<media::RgbImage> MakeSyntheticVideo(int label, int index, uint64_t seed,
                                                const SyntheticVideoOptions& options) {
  std::mt19937_64 rng(seed * 1000003ULL + static_cast<uint64_t>(label) * 7919ULL +
                      static_cast<uint64_t>(index));
  auto uniform = [&rng](double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng);
  };
  static constexpr std::array<std::array<int, 2>, 3> kSizes = {{{160, 120}, {128, 96}, {176, 144}}};
  const auto [width, height] = kSizes[rng() % kSizes.size()];
  const int num_frames =
      options.min_frames + static_cast<int>(rng() % (options.max_frames - options.min_frames + 1));

  Texture texture;
  for (int c = 0; c < 3; ++c) {
    texture.base[c] = uniform(60, 200);
    texture.wave[c] = {uniform(20, 60), uniform(0.02, 0.15), uniform(0.02, 0.15),
                       uniform(0, 2 * kPi)};
  }
  const double low = uniform(0.05, 0.25);  // darkest brightness of a fade
  const double high = uniform(0.8, 1.0);   // brightest
  const double turns = uniform(0.5, 1.0);  // hue turns over the whole video
  const double start_hue = uniform(0, 2 * kPi);
  std::normal_distribution<double> noise(0, 4);

  std::vector<media::RgbImage> frames(num_frames);
  for (int f = 0; f < num_frames; ++f) {
    const double progress = num_frames > 1 ? static_cast<double>(f) / (num_frames - 1) : 0;
    double brightness = 1;
    double hue = 0;
    switch (label) {
      case 0:
        brightness = low + (high - low) * progress;
        break;
      case 1:
        brightness = high - (high - low) * progress;
        break;
      case 2:
        hue = start_hue + 2 * kPi * turns * progress;
        break;
      default:
        hue = start_hue - 2 * kPi * turns * progress;
        break;
    }
    media::RgbImage& image = frames[f];
    image.width = width;
    image.height = height;
    image.rgb.resize(3 * width * height);
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        const std::array<double, 3> rgb = RotateHue(texture.At(x, y), hue);
        uint8_t* pixel = &image.rgb[3 * (y * width + x)];
        for (int c = 0; c < 3; ++c) pixel[c] = ToByte(rgb[c] * brightness + noise(rng));
      }
    }
  }
  return frames;
}

}  // namespace vidclf::train
