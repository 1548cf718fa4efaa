// What a decode is asked for (ClipOptions) and what it returns (DecodedClip, or frames handed to a
// FrameSink as they come): the vocabulary shared by every decoder in media/ and its callers.
#ifndef VIDCLF_MEDIA_CLIP_OPTIONS_H_
#define VIDCLF_MEDIA_CLIP_OPTIONS_H_

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/cancellation.h"
#include "media/frame_buffer.h"
#include "media/frame_converter.h"
#include "media/frame_sampler.h"
#include "media/nvdec_device.h"
#include "media/uri_allowlist.h"

namespace vidclf::media {

class DecoderPool;

// Receives the kept frames one by one as soon as each is converted, while decoding goes on, so
// that a consumer (the backbone) can start on the first frames (ClipOptions::frame_sink).
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // A decoding pass begins, which hands over at most `frames` frames: the frames given before are
  // void. A second pass happens rarely, when a decoder rewrites timestamps and frames must be
  // counted instead.
  virtual void StartPass(int64_t /*frames*/) {}
  // Frame `slot` (0, 1, ... in presentation order) is converted; `frame` (FrameConverter::Output)
  // is valid only during the call unless it has an owner. Called from one thread at a time, but
  // not always the same one, and not always in slot order: two decoders may hand over the two
  // halves of a clip side by side (split_at_keyframes). An error stops the decoding with it.
  virtual absl::Status Frame(int64_t slot, const FrameBuffer& frame, double timestamp_seconds) = 0;
};

struct ClipOptions {
  // Which frames to keep (frame_sampler.h); uniform 16 by default.
  SamplingOptions sampling;
  // Resize, crop and normalisation of each kept frame.
  PreprocessOptions preprocess;
  // Inputs larger than this are refused (RESOURCE_EXHAUSTED).
  int64_t max_input_bytes = 256LL << 20;
  // Videos whose frames are larger than this (in either dimension) are refused before decoding.
  int max_frame_side = 8192;
  // Videos with more frames than this are refused (RESOURCE_EXHAUSTED).
  int64_t max_total_frames = 200000;
  // Videos lasting longer than this (last frame's presentation time) are refused
  // (RESOURCE_EXHAUSTED). 0: no limit.
  double max_duration_seconds = 4 * 3600;
  // Decoder threads; 0 lets libavcodec choose from the number of cores.
  int decoder_threads = 0;
  // Wall-clock budget for reading and decoding; past it, DEADLINE_EXCEEDED. 0: no budget.
  int64_t decode_timeout_ms = 0;
  // Sparse sampling decodes less: seek to the keyframe before a wanted frame when one lies ahead
  // (containers with a seek index), and let the decoder drop non-reference frames that are not
  // wanted. Both need presentation timestamps on every packet; the output is the same either
  // way, so these exist to measure the saving and to test that sameness.
  bool seek_to_keyframes = true;
  bool skip_unwanted_non_reference_frames = true;
  // With seeking and at least 2 decoder_threads (0, libavcodec's choice, never splits), decode
  // the wanted frames with two decoders side by side, each with half the threads, when a keyframe
  // splits them into two runs of similar work (decode_split.h) and the input seeks exactly (MP4,
  // Matroska and WebM, or a single-pass source's kept packets; not MPEG-TS).
  // Frame threads of one decoder wait on each other's rows; the runs of two decoders share
  // nothing. Frames up to 4K UHD only, as each decoder holds its own references. Same output
  // either way. Neither splits nor near seeks on NVDEC, where a decoder's setting up costs more
  // (sampled_decode.cc).
  bool split_at_keyframes = true;
  // Convert kept frames on a thread of their own while the next ones decode (one thread more
  // than decoder_threads). Off: on the decoding thread, between frames.
  bool convert_while_decoding = true;
  // When set, decoding stops between packets once it is cancelled, with its reason. Must outlive
  // the call.
  const CancellationToken* cancellation = nullptr;
  // When set, kept frames go to the sink as they are converted and DecodedClip::pixels stays
  // empty: the clip holds only a few frames at a time. Must outlive the call.
  FrameSink* frame_sink = nullptr;
  // The URIs a VideoSource::Uri may name (Demuxer::OpenUri's rules); null allows none. Must
  // outlive the call.
  const UriAllowlist* uri_allowlist = nullptr;
  // Decodes on this GPU where it can (NvdecDevice::Attach); null: on the CPU. Must outlive the
  // call.
  const NvdecDevice* nvdec = nullptr;
  // Takes decoders from this pool and gives them back after the clip, kept set up (one thread
  // each, no split between two); null: each clip opens its own. Must outlive the call.
  DecoderPool* decoder_pool = nullptr;
  // With `nvdec`: decodes on the CPU, with `decoder_threads` and no pool, a clip that the CPU
  // decodes faster (NvdecDevice::CpuDecodesFasterAlone), saying so as DecodedClip::gpu_fallback
  // kCpuFasterChoice. For a call that decodes alone, with every core.
  bool cpu_when_faster = false;
  // With a frame sink, frames decoded on `nvdec` go to it as NVDEC wrote them, NV12 or P010 planes
  // in the GPU's memory (FrameBuffer::GpuPicture), for a consumer on that GPU to convert
  // (pipeline/frame_tensor.h) with no copy to the host; other formats, and frames decoded on the
  // CPU, are converted on the host. Off: every frame is converted on the host.
  bool hand_over_gpu_pictures = false;
};

// Allocates without zeroing what a vector grows by. Every float of a clip is written by the
// conversion; zeroing them first took 150 ms on the decoding thread for a clip of 1800 frames at
// 112x112 (270 MB), about 14% of decoding the video.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>& /*other*/) noexcept {}
  template <typename U>
  void construct(U* element) noexcept {
    ::new (static_cast<void*>(element)) U;  // default-initialised: left as it is
  }
  template <typename U, typename... Args>
  void construct(U* element, Args&&... args) {
    ::new (static_cast<void*>(element)) U(std::forward<Args>(args)...);
  }
};

using PixelBuffer = std::vector<float, UninitializedAllocator<float>>;

// A sampled clip: T preprocessed frames, laid out [T, 3, crop, crop] in `pixels`, or
// [T, crop, crop, 3] when options.preprocess.channels_last (empty with a frame sink).
struct DecodedClip {
  PixelBuffer pixels;
  int64_t num_frames = 0;
  int crop_size = 0;
  // Index of each kept frame in the video's frame sequence, and its presentation time in seconds
  // from the start of the stream.
  std::vector<int64_t> frame_indices;
  std::vector<double> timestamps_seconds;
  // What the input holds: every frame, or those read before the sampling was settled (a strategy
  // with a frame count stops reading once it has its frames, which is how a live source ends).
  int64_t total_frames = 0;
  int source_width = 0;
  int source_height = 0;
  // Wall-clock split of the work: demuxing and decoding, and the conversion of kept frames. The
  // conversion overlaps the decoding when it runs on its own thread, so the two may add up to
  // more than the call took; decode_seconds excludes only the time decoding waited for it.
  double decode_seconds = 0;
  double preprocess_seconds = 0;
  // Frames the decoder produced (fewer than total_frames when seeking and skipping paid off),
  // and seeks to keyframes.
  int64_t frames_decoded = 0;
  int64_t frames_decoded_on_gpu = 0;
  int64_t seeks = 0;
  // Where the frames were decoded: "cpu", or the GPU's name (NvdecDevice::name) when any frame
  // was decoded there; and, with ClipOptions::nvdec set, why it was the CPU (nvdec_device.h).
  std::string decoded_on = "cpu";
  std::string gpu_fallback;
  // Decoders that ran side by side (ClipOptions::split_at_keyframes).
  int decoders = 1;
  // Sources that arrive in a stream only: the container could not be demuxed before its end (an MP4
  // whose moov box follows the media data), so the whole input was buffered first.
  bool buffered_whole_input = false;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_CLIP_OPTIONS_H_
