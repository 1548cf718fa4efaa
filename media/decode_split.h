// Where the wanted frames of a clip split between two decoders running side by side. Internal to
// the clip decoder.
#ifndef VIDCLF_MEDIA_DECODE_SPLIT_H_
#define VIDCLF_MEDIA_DECODE_SPLIT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vidclf::media {

// Frames a decoder decodes to produce `wanted` (ascending presentation indices) when it seeks to
// the keyframe before a wanted frame whenever that keyframe lies past the frame before: for each
// wanted frame, the frames from where the decoder starts on it through the frame itself. Frames
// that skipping non-reference frames saves are counted too.
int64_t FramesToDecode(const std::vector<int64_t>& keyframes, const std::vector<int64_t>& wanted);

// The index in `wanted` from which a second decoder can take over: a keyframe lies after the
// wanted frame before it and at or before the one at it, so that neither decoder needs a frame
// the other decodes; among such points, the one that splits FramesToDecode most evenly. 0 (no
// split) when there is none, or when the larger part would still hold more than `max_share` of
// the frames to decode, as with one keyframe before every wanted frame but the first few.
size_t SplitAtKeyframe(const std::vector<int64_t>& keyframes, const std::vector<int64_t>& wanted,
                       double max_share);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_DECODE_SPLIT_H_
