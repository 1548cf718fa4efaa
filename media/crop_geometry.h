// Where the model's square crop lies in a decoded picture, for every converter of frames.
#ifndef VIDCLF_MEDIA_CROP_GEOMETRY_H_
#define VIDCLF_MEDIA_CROP_GEOMETRY_H_

extern "C" {
#include <libavutil/rational.h>
}

namespace vidclf::media {

// The picture as displayed (stored pixels stretched by the sample aspect ratio, then turned
// clockwise by quarter turns) has its shorter side resized to `resize_shorter_side`, and a centred
// square of `crop_size` is cut out. The resize works on the unrotated picture; the crop reads it
// through the rotation.
struct CropGeometry {
  // The unrotated picture, resized.
  int scaled_width = 0;
  int scaled_height = 0;
  // The crop's top-left corner in it.
  int crop_u = 0;
  int crop_v = 0;
};

// `sample_aspect_ratio` 0/x or x/0: square pixels. `quarter_turns` in 0..3.
CropGeometry PlaceCrop(int width, int height, AVRational sample_aspect_ratio, int quarter_turns,
                       int resize_shorter_side, int crop_size);

// The stored pixels that a crop shows, so that only they need resizing, straight to the crop's
// size. Its edges are whole stored pixels, its left and top ones on the chroma grid (every
// 2^log2_chroma_w-th column, 2^log2_chroma_h-th row) so that every plane can be addressed from
// there: each edge within half a pixel (right, bottom) or half a chroma step (left, top) of where
// resizing the whole picture would put it.
struct StoredRegion {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};
StoredRegion PlaceStoredRegion(int width, int height, const CropGeometry& geometry, int crop_size,
                               int log2_chroma_w, int log2_chroma_h);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_CROP_GEOMETRY_H_
