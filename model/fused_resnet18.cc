#include "model/fused_resnet18.h"

#include <ATen/Context.h>

#include <algorithm>
#include <mutex>

#include "model/onednn_resnet18.h"

namespace vidclf::model {
namespace {

bool SameTensor(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.is_mkldnn() != b.is_mkldnn()) return false;
  // oneDNN's blocked tensors compare through their plain layout.
  const torch::Tensor plain_a = a.is_mkldnn() ? a.to_dense() : a;
  const torch::Tensor plain_b = b.is_mkldnn() ? b.to_dense() : b;
  return plain_a.options().device() == plain_b.options().device() &&
         plain_a.scalar_type() == plain_b.scalar_type() && plain_a.sizes() == plain_b.sizes() &&
         plain_a.strides() == plain_b.strides() && torch::equal(plain_a, plain_b);
}

}  // namespace

std::shared_ptr<const FusedResNet18> FusedResNet18::Shared(
    const ResNet18& resnet, const torch::Device& device, torch::Dtype dtype, bool channels_last,
    bool winograd, const std::optional<Int8Calibration>& int8) {
  // Folding first and comparing the result is exact, and needs no digest of the weights; the
  // fresh copy is dropped when an equal one is live.
  auto fresh =
      std::make_shared<const FusedResNet18>(resnet, device, dtype, channels_last, winograd, int8);
  static std::mutex mutex;
  static std::vector<std::weak_ptr<const FusedResNet18>> live;
  std::lock_guard<std::mutex> lock(mutex);
  live.erase(
      std::remove_if(live.begin(), live.end(), [](const auto& weak) { return weak.expired(); }),
      live.end());
  for (const auto& weak : live) {
    std::shared_ptr<const FusedResNet18> existing = weak.lock();
    if (existing && existing->SameAs(*fresh)) return existing;
  }
  live.push_back(fresh);
  return fresh;
}

FusedResNet18::FusedResNet18(const ResNet18& resnet, const torch::Device& device,
                             torch::Dtype dtype, bool channels_last, bool winograd,
                             const std::optional<Int8Calibration>& int8)
    : channels_last_(channels_last),
      onednn_(device.is_cpu() && dtype == torch::kFloat && at::hasMKLDNN()) {
  const FoldedResNet18 folded = FoldBatchNorms(resnet);
  if (int8) {
    TORCH_CHECK(device.is_cpu(), "the int8 backbone runs on the CPU only");
    onednn_ = channels_last_ = winograd_ = false;
    primitives_ = std::make_unique<OneDnnResNet18>(folded, *int8);
    return;
  }
  winograd_ =
      winograd && device.is_cpu() && dtype == torch::kFloat && OneDnnResNet18::WinogradAvailable();
  const bool cpu_bf16 =
      device.is_cpu() && dtype == torch::kBFloat16 && OneDnnResNet18::Bf16Available();
  if (winograd_ || cpu_bf16) {  // the graph holds the only copy of the weights
    onednn_ = false;
    channels_last_ = false;
    primitives_ = std::make_unique<OneDnnResNet18>(folded, winograd_, dtype);
    return;
  }
  const torch::TensorOptions placement = torch::TensorOptions().device(device).dtype(dtype);
  stem_ = Place(folded.stem, placement);
  for (const FoldedBlock& block : folded.blocks) {
    FoldedBlock placed;
    placed.conv1 = Place(block.conv1, placement);
    placed.conv2 = Place(block.conv2, placement);
    if (block.downsample) placed.downsample = Place(*block.downsample, placement);
    blocks_.push_back(std::move(placed));
  }
}

FusedResNet18::~FusedResNet18() = default;

FoldedConvolution FusedResNet18::Place(const FoldedConvolution& folded,
                                       const torch::TensorOptions& placement) const {
  FoldedConvolution placed = folded;
  placed.weight = folded.weight.to(placement).contiguous();
  placed.bias = folded.bias.to(placement);
  if (onednn_) {
    placed.weight = at::mkldnn_reorder_conv2d_weight(placed.weight.to_mkldnn(),
                                                     {placed.padding, placed.padding},
                                                     {placed.stride, placed.stride}, {1, 1}, 1);
  } else if (channels_last_) {
    placed.weight = placed.weight.contiguous(torch::MemoryFormat::ChannelsLast);
  }
  return placed;
}

torch::Tensor FusedResNet18::Convolve(const torch::Tensor& x, const FoldedConvolution& conv) const {
  if (onednn_) {
    return at::mkldnn_convolution(x, conv.weight, conv.bias, {conv.padding, conv.padding},
                                  {conv.stride, conv.stride}, {1, 1}, 1);
  }
  return at::conv2d(x, conv.weight, conv.bias, {conv.stride, conv.stride},
                    {conv.padding, conv.padding});
}

std::vector<const FoldedConvolution*> FusedResNet18::Convolutions() const {
  std::vector<const FoldedConvolution*> convolutions = {&stem_};
  for (const FoldedBlock& block : blocks_) {
    convolutions.push_back(&block.conv1);
    convolutions.push_back(&block.conv2);
    if (block.downsample) convolutions.push_back(&*block.downsample);
  }
  return convolutions;
}

bool FusedResNet18::SameAs(const FusedResNet18& other) const {
  if (channels_last_ != other.channels_last_ || onednn_ != other.onednn_ ||
      uses_winograd() != other.uses_winograd() ||
      (primitives_ == nullptr) != (other.primitives_ == nullptr)) {
    return false;
  }
  if (primitives_) return primitives_->SameWeights(*other.primitives_);
  const std::vector<const FoldedConvolution*> mine = Convolutions();
  const std::vector<const FoldedConvolution*> theirs = other.Convolutions();
  if (mine.size() != theirs.size()) return false;
  for (size_t i = 0; i < mine.size(); ++i) {
    if (mine[i]->stride != theirs[i]->stride || mine[i]->padding != theirs[i]->padding ||
        !SameTensor(mine[i]->weight, theirs[i]->weight) ||
        !SameTensor(mine[i]->bias, theirs[i]->bias)) {
      return false;
    }
  }
  return true;
}

torch::Tensor FusedResNet18::forward(const torch::Tensor& frames) const {
  TORCH_CHECK(frames.dim() == 4 && frames.size(1) == 3,
              "ResNet18 expects frames shaped [N, 3, H, W]; got ", frames.sizes());
  if (primitives_) return primitives_->forward(frames);
  torch::Tensor x = onednn_          ? frames.to_mkldnn()
                    : channels_last_ ? frames.contiguous(torch::MemoryFormat::ChannelsLast)
                                     : frames;
  // Every intermediate below is this forward's own, so ReLU and the residual add run in place.
  x = Convolve(x, stem_).relu_();
  x = at::max_pool2d(x, /*kernel_size=*/{3, 3}, /*stride=*/{2, 2}, /*padding=*/{1, 1});
  for (const FoldedBlock& block : blocks_) {
    torch::Tensor out = Convolve(Convolve(x, block.conv1).relu_(), block.conv2);
    out.add_(block.downsample ? Convolve(x, *block.downsample) : x);
    x = out.relu_();
  }
  x = at::adaptive_avg_pool2d(x, {1, 1});
  if (onednn_) x = x.to_dense();
  return x.flatten(1);
}

}  // namespace vidclf::model
