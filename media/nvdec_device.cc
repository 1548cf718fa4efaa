#include "media/nvdec_device.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/thread_name.h"

extern "C" {
#include <libavutil/hwcontext.h>
}

namespace vidclf::media {
namespace {

// AV_CUDA_USE_PRIMARY_CONTEXT of libavutil/hwcontext_cuda.h, which cannot be included without
// CUDA's own headers.
constexpr int kUsePrimaryContext = 1 << 0;

// Frame threads of an NVDEC decoder only parse and keep submissions in flight; each adds a
// decode surface, and NVDEC holds at most 32 (H.264's 16 references, 2 of libavcodec's and
// kExtraFrames beside these).
constexpr int kMaxNvdecThreads = 4;
// Decoded frames that the conversion holds while the decoder goes on (ConversionWorker).
constexpr int kExtraFrames = 4;

}  // namespace

absl::StatusOr<int> CudaDeviceIndex(absl::string_view name) {
  absl::string_view index = name;
  int cuda_index = 0;
  if (name != "cuda" && (!absl::ConsumePrefix(&index, "cuda:") ||
                         !absl::SimpleAtoi(index, &cuda_index) || cuda_index < 0)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", name, "\" names no GPU; cuda:N does"));
  }
  return cuda_index;
}

absl::string_view DescribeGpuFallback(absl::string_view reason) {
  if (reason == kNoGpuFallback) return "no GPU decodes video for this server";
  if (reason == kCodecFallback) return "NVDEC has no decoder for the video's codec";
  if (reason == kSessionsFallback) return "every NVDEC session this server allows was in use";
  if (reason == kFormatFallback) {
    return "NVDEC does not decode the video's profile, chroma format or bit depth";
  }
  if (reason == kCpuFasterChoice) {
    return "a lone call of H.264 at 720p or more decodes faster on the CPU's cores than on one "
           "NVDEC decoder";
  }
  return reason;
}

int GpuPictureDevice(const NvdecDevice* nvdec, bool wanted) {
  return wanted && nvdec != nullptr && nvdec->shares_models_context() ? nvdec->index() : -1;
}

NvdecDevice::Session::~Session() {
  if (device_ != nullptr) --device_->sessions_in_use_;
}

NvdecDevice::Session::Session(Session&& other) noexcept
    : device_(std::exchange(other.device_, nullptr)), cpu_reason_(std::move(other.cpu_reason_)) {}

NvdecDevice::Session& NvdecDevice::Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    if (device_ != nullptr) --device_->sessions_in_use_;
    device_ = std::exchange(other.device_, nullptr);
    cpu_reason_ = std::move(other.cpu_reason_);
  }
  return *this;
}

absl::StatusOr<std::unique_ptr<NvdecDevice>> NvdecDevice::Open(int cuda_index, int max_sessions) {
  AVBufferRef* context = nullptr;
  const std::string index = std::to_string(cuda_index);
  int result = av_hwdevice_ctx_create(&context, AV_HWDEVICE_TYPE_CUDA, index.c_str(), nullptr,
                                      kUsePrimaryContext);
  // libavutil asks the primary context for blocking synchronisation, which it cannot once
  // LibTorch has made it with its own flags: a context of its own then.
  bool primary_context = true;
  if (result == AVERROR(ENOTSUP)) {
    result = av_hwdevice_ctx_create(&context, AV_HWDEVICE_TYPE_CUDA, index.c_str(), nullptr, 0);
    primary_context = false;
  }
  if (result < 0) {
    return AvError(absl::StatusCode::kFailedPrecondition,
                   absl::StrCat("cannot open cuda:", cuda_index,
                                " for decoding (it needs an NVIDIA GPU and the driver's "
                                "libcuda.so.1 and libnvcuvid.so.1)"),
                   result);
  }
  return std::unique_ptr<NvdecDevice>(
      new NvdecDevice(context, cuda_index, primary_context, std::max(1, max_sessions)));
}

absl::StatusOr<std::unique_ptr<NvdecDevice>> NvdecDevice::Open(absl::string_view name,
                                                               int max_sessions) {
  absl::StatusOr<int> cuda_index = CudaDeviceIndex(name);
  if (!cuda_index.ok()) return cuda_index.status();
  return Open(*cuda_index, max_sessions);
}

NvdecDevice::NvdecDevice(AVBufferRef* context, int cuda_index, bool primary_context,
                         int max_sessions)
    : context_(context),
      index_(cuda_index),
      name_(absl::StrCat("cuda:", cuda_index)),
      primary_context_(primary_context),
      max_sessions_(max_sessions) {}

NvdecDevice::~NvdecDevice() {
  {
    std::lock_guard<std::mutex> lock(closing_mutex_);
    stopping_ = true;
  }
  closing_wanted_.notify_all();
  for (std::thread& closer : closers_) closer.join();
  av_buffer_unref(&context_);
}

bool NvdecDevice::CanDecode(const AVCodec& codec) {
  for (int i = 0;; ++i) {
    const AVCodecHWConfig* config = avcodec_get_hw_config(&codec, i);
    if (config == nullptr) return false;
    if (config->device_type == AV_HWDEVICE_TYPE_CUDA &&
        (config->methods & AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX) != 0) {
      return true;
    }
  }
}

bool NvdecDevice::CpuDecodesFasterAlone(const AVCodecParameters& stream) {
  return stream.codec_id == AV_CODEC_ID_H264 &&
         static_cast<int64_t>(stream.width) * stream.height >= int64_t{1280} * 720;
}

NvdecDevice::Session NvdecDevice::Attach(AVCodecContext& decoder, const AVCodec& codec) const {
  Session session;
  if (!CanDecode(codec)) {
    session.cpu_reason_ = kCodecFallback;
    return session;
  }
  if (++sessions_in_use_ > max_sessions_) {
    --sessions_in_use_;
    session.cpu_reason_ = kSessionsFallback;
    return session;
  }
  session.device_ = this;
  // libavcodec's default get_format picks the device's pixel format when the stream's profile
  // allows it, and the software one otherwise.
  decoder.hw_device_ctx = av_buffer_ref(context_);
  decoder.extra_hw_frames = kExtraFrames;
  decoder.thread_count = decoder.thread_count == 0
                             ? kMaxNvdecThreads
                             : std::min(decoder.thread_count, kMaxNvdecThreads);
  return session;
}

void NvdecDevice::Close(CodecContextPtr decoder, Session session) const {
  std::lock_guard<std::mutex> lock(closing_mutex_);
  to_close_.emplace_back(std::move(decoder), std::move(session));
  if (idle_closers_ == 0) {
    closers_.emplace_back([this] {
      NameThisThread("vidclf-nvdecoff");
      CloseDecoders();
    });
  } else {
    closing_wanted_.notify_one();
  }
}

void NvdecDevice::CloseDecoders() const {
  std::unique_lock<std::mutex> lock(closing_mutex_);
  while (true) {
    ++idle_closers_;
    closing_wanted_.wait(lock, [this] { return !to_close_.empty() || stopping_; });
    --idle_closers_;
    if (to_close_.empty()) return;  // stopping, with nothing left
    auto [decoder, session] = std::move(to_close_.front());
    to_close_.pop_front();
    lock.unlock();
    decoder.reset();
    session = Session();
    lock.lock();
  }
}

}  // namespace vidclf::media
