// A GPU's video decoders (NVDEC), reached through libavcodec's cuda hwaccel. libavcodec loads
// libcuda.so.1 and libnvcuvid.so.1 from the NVIDIA driver when a device is opened, so the same
// build decodes on the CPU where they are missing.
#ifndef VIDCLF_MEDIA_NVDEC_DEVICE_H_
#define VIDCLF_MEDIA_NVDEC_DEVICE_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "media/av_util.h"

namespace vidclf::media {

// Why a decoder that could have used a GPU decodes on the CPU (metric label values).
inline constexpr char kNoGpuFallback[] = "no_gpu";       // no device could be opened
inline constexpr char kCodecFallback[] = "codec";        // NVDEC has no decoder for the codec
inline constexpr char kSessionsFallback[] = "sessions";  // the device's sessions are all in use
inline constexpr char kFormatFallback[] = "format";      // the stream's profile, chroma or depth
// Chosen, not forced: a lone call the CPU decodes faster (ClipOptions::cpu_when_faster).
inline constexpr char kCpuFasterChoice[] = "cpu_faster";

// The index N of a device named "cuda:N" ("cuda": 0); INVALID_ARGUMENT for any other name.
absl::StatusOr<int> CudaDeviceIndex(absl::string_view name);

// What a fallback reason above means, for the log.
absl::string_view DescribeGpuFallback(absl::string_view reason);

class NvdecDevice;

// The device whose pictures a decoder on `nvdec` hands over as they are, in its memory, when that
// is `wanted` (ClipOptions::hand_over_gpu_pictures): its index where the models' kernels can
// address them (NvdecDevice::shares_models_context); -1, converted on the host, otherwise.
int GpuPictureDevice(const NvdecDevice* nvdec, bool wanted);

// Thread-safe. Must outlive the decoders it was attached to.
class NvdecDevice {
 public:
  // A place among the device's decoding sessions, held while a decoder uses it. Inactive (a
  // decoder on the CPU) when default-constructed or when Attach gives none.
  class Session {
   public:
    Session() = default;
    ~Session();
    Session(Session&& other) noexcept;
    Session& operator=(Session&& other) noexcept;
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    bool active() const { return device_ != nullptr; }
    // The device of an active session.
    const NvdecDevice* device() const { return device_; }
    // Why the decoder decodes on the CPU; empty when active.
    const std::string& cpu_reason() const { return cpu_reason_; }

   private:
    friend class NvdecDevice;
    const NvdecDevice* device_ = nullptr;
    std::string cpu_reason_;
  };

  // Opens CUDA device `cuda_index` for decoding in its primary context, the one LibTorch uses,
  // so that the frames it decodes are addressable by the models' kernels: open it before
  // LibTorch first uses the device, as it otherwise takes a context of its own. At most
  // `max_sessions` decoders use it at once; past that, decoders stay on the CPU.
  // FAILED_PRECONDITION with libav's reason when there is no such device or the driver cannot be
  // loaded.
  static absl::StatusOr<std::unique_ptr<NvdecDevice>> Open(int cuda_index, int max_sessions);
  // Open for a device named "cuda:N" ("cuda": cuda:0); INVALID_ARGUMENT for another name.
  static absl::StatusOr<std::unique_ptr<NvdecDevice>> Open(absl::string_view name,
                                                           int max_sessions);
  ~NvdecDevice();
  NvdecDevice(const NvdecDevice&) = delete;
  NvdecDevice& operator=(const NvdecDevice&) = delete;

  // "cuda:0".
  const std::string& name() const { return name_; }
  // The N of cuda:N.
  int index() const { return index_; }
  // Whether the frames it decodes are addressable by the models' kernels: it decodes in the
  // device's primary context, LibTorch's (not so when LibTorch made that context first).
  bool shares_models_context() const { return primary_context_; }
  int sessions_in_use() const { return sessions_in_use_.load(); }

  // Whether libavcodec has an NVDEC path for `codec` (the stream's profile may still have none).
  static bool CanDecode(const AVCodec& codec);
  // Whether the CPU's cores, all given to one call, decode `stream` faster than one NVDEC decoder:
  // H.264 of 1280x720 pixels or more. On an H200 with 16 cores a 720p H.264 call took 76 ms on the
  // CPU against 108 on NVDEC, one NVDEC decoder's rate; HEVC (60 ms against 205) and 320x240
  // H.264 (16 against 22) were faster on NVDEC even alone (docs/gpu-serving-benchmark.md, machine
  // 7).
  static bool CpuDecodesFasterAlone(const AVCodecParameters& stream);

  // Sets up `decoder` (allocated for `codec`, not yet opened) to decode on this device when
  // libavcodec has an NVDEC path for the codec and a session is free. The stream's own profile
  // may still turn NVDEC down when the decoder opens or meets its first frame; libavcodec then
  // decodes on the CPU (DecodedClip::frames_decoded_on_gpu stays 0).
  Session Attach(AVCodecContext& decoder, const AVCodec& codec) const;

  // Frees `decoder`, attached with `session`, on a thread of the device's and then gives the
  // session back. Freeing an NVDEC decoder waits for the GPU to take it down (up to 0.25 s on an
  // H200, docs/gpu-serving-benchmark.md), which a call need not wait for. Decoders are freed side
  // by side, as the driver takes them down side by side.
  void Close(CodecContextPtr decoder, Session session) const;

 private:
  NvdecDevice(AVBufferRef* context, int cuda_index, bool primary_context, int max_sessions);
  // A closing thread: frees the decoders handed to Close until the device goes.
  void CloseDecoders() const;

  AVBufferRef* context_;  // owned: the hwdevice context
  const int index_;
  const std::string name_;
  const bool primary_context_;
  const int max_sessions_;
  mutable std::atomic<int> sessions_in_use_{0};

  mutable std::mutex closing_mutex_;
  mutable std::condition_variable closing_wanted_;
  mutable std::deque<std::pair<CodecContextPtr, Session>> to_close_;
  mutable int idle_closers_ = 0;
  mutable bool stopping_ = false;
  mutable std::vector<std::thread> closers_;  // one more whenever none is idle
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_NVDEC_DEVICE_H_
