#include "media/crop_geometry.h"

#include <algorithm>
#include <cmath>

namespace vidclf::media {
namespace {

// The whole stored pixels [start, start + size) nearest to [begin, end), with start a multiple
// of `align`, inside [0, limit).
void PlaceSpan(double begin, double end, int limit, int align, int& start, int& size) {
  start = static_cast<int>(std::lround(begin / align)) * align;
  start = std::clamp(start, 0, (limit - 1) / align * align);
  size = std::clamp(static_cast<int>(std::lround(end)) - start, 1, limit - start);
}

}  // namespace

CropGeometry PlaceCrop(int width, int height, AVRational sample_aspect_ratio, int quarter_turns,
                       int resize_shorter_side, int crop_size) {
  double display_width = width;
  if (sample_aspect_ratio.num > 0 && sample_aspect_ratio.den > 0) {
    display_width *= av_q2d(sample_aspect_ratio);
  }
  const bool sideways = quarter_turns % 2 == 1;
  const double shown_width = sideways ? height : display_width;
  const double shown_height = sideways ? display_width : height;
  const int shorter = resize_shorter_side;
  int shown_scaled_width = shorter;
  int shown_scaled_height = shorter;
  if (shown_width < shown_height) {
    shown_scaled_height = static_cast<int>(std::lround(shown_height * shorter / shown_width));
  } else {
    shown_scaled_width = static_cast<int>(std::lround(shown_width * shorter / shown_height));
  }
  CropGeometry geometry;
  geometry.scaled_width = sideways ? shown_scaled_height : shown_scaled_width;
  geometry.scaled_height = sideways ? shown_scaled_width : shown_scaled_height;
  const int crop = crop_size;
  const int left = (shown_scaled_width - crop) / 2;
  const int top = (shown_scaled_height - crop) / 2;
  geometry.crop_u = left;
  geometry.crop_v = top;
  if (quarter_turns == 1) {
    geometry.crop_u = top;
    geometry.crop_v = geometry.scaled_height - left - crop;
  } else if (quarter_turns == 2) {
    geometry.crop_u = geometry.scaled_width - left - crop;
    geometry.crop_v = geometry.scaled_height - top - crop;
  } else if (quarter_turns == 3) {
    geometry.crop_u = geometry.scaled_width - top - crop;
    geometry.crop_v = left;
  }
  return geometry;
}

StoredRegion PlaceStoredRegion(int width, int height, const CropGeometry& geometry, int crop_size,
                               int log2_chroma_w, int log2_chroma_h) {
  // Stored pixels per resized pixel along each axis; they differ for non-square pixels.
  const double x_scale = static_cast<double>(width) / geometry.scaled_width;
  const double y_scale = static_cast<double>(height) / geometry.scaled_height;
  StoredRegion region;
  PlaceSpan(geometry.crop_u * x_scale, (geometry.crop_u + crop_size) * x_scale, width,
            1 << log2_chroma_w, region.x, region.width);
  PlaceSpan(geometry.crop_v * y_scale, (geometry.crop_v + crop_size) * y_scale, height,
            1 << log2_chroma_h, region.y, region.height);
  return region;
}

}  // namespace vidclf::media
