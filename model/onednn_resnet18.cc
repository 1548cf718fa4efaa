#include "model/onednn_resnet18.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>

#ifdef VIDCLF_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace vidclf::model {

#ifdef VIDCLF_HAVE_DNNL
namespace {

using dnnl::memory;

const dnnl::engine& CpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Every primitive takes its scratchpad from the caller, so that calls on several threads can run
// the same primitive at once.
dnnl::primitive_attr UserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

memory::desc Any(const memory::dims& dims, memory::data_type type) {
  return memory::desc(dims, type, memory::format_tag::any);
}

// Winograd's F(4x4, 3x3) transforms each 3x3 kernel into 6x6: four times the weights to read.
// Where a batch's frames are small, a convolution reads its weights more than it computes: in one
// run of `ONEDNN_VERBOSE=1 vidclf-backbone-bench` (16 frames), Winograd took 1.48x the direct
// kernel's time on 4x4 frames of 512 channels and 1.78x on 7x7 of 256, where it took 0.63x on
// 28x28 of 64 and 0.68x on 14x14 of 128.
constexpr int64_t kWinogradMinSide = 14;

// float32 and bf16 activations stay in oneDNN's 16-channel blocks from the stem to the pooling,
// as LibTorch's oneDNN calls keep them: left to choose, oneDNN picked its brgconv kernels and
// plain layouts for the direct convolutions here, which took 1.7x as long on 4x4 frames of 512
// channels (same run) and cost a reorder at every change of kernel. oneDNN's int8 kernels read
// and write channels-last (NHWC) only, float32 outputs too (`int8`: an int8 graph's activations):
// in 16-channel blocks it ran its reference kernels, about 100 times slower.
memory::desc Activations(const memory::dims& dims, memory::data_type type, bool int8) {
  return memory::desc(dims, type, int8 ? memory::format_tag::nhwc : memory::format_tag::nChw16c);
}

// oneDNN's type for activations and weights in `dtype` (float32 or bfloat16).
memory::data_type DataType(torch::Dtype dtype) {
  TORCH_CHECK(dtype == torch::kFloat || dtype == torch::kBFloat16,
              "oneDNN's ResNet18 runs float32 or bfloat16, not ", dtype);
  return dtype == torch::kFloat ? memory::data_type::f32 : memory::data_type::bf16;
}

// Copies `from` into `to`, converting the layout, before returning.
void ReorderNow(memory from, memory to) {
  dnnl::stream stream(CpuEngine());
  dnnl::reorder(from, to).execute(stream, from, to);
  stream.wait();
}

}  // namespace

struct OneDnnResNet18::Graph {
  struct Convolution {
    int64_t out_channels = 0, in_channels = 0, kernel = 0, stride = 1, padding = 0;
    memory::data_type type = memory::data_type::f32;  // of its weights
    // Of its input and output: the weights', but in int8 a ReLU's output and every block's input
    // are u8, the frames s8, and a downsample's output and the sum onto it float32.
    memory::data_type src_type = memory::data_type::f32, dst_type = memory::data_type::f32;
    torch::Tensor bias;  // float32 on the CPU; in int8, in units of the accumulator
    bool winograd = false;
    // int8 only: the accumulator to the output's units, per output channel; the residual's units
    // to the output's; the stem's frames to its input's units.
    std::vector<float> output_scales;
    float sum_scale = 1, input_scale = 1;
    // Where the output is float32 (a sum onto a downsampled residual), the scale of its
    // quantization to u8 that follows; 0 elsewhere.
    float requantize_scale = 0;
    torch::Tensor plain_int8;  // the quantized weights, plain, for layouts other than stored
    // The only full copy of the weights, in the direct kernels' layout, made at construction and
    // never changed after: the folded plain weights are not kept.
    memory::desc stored_layout;
    memory stored;
    // The weights in each other layout a primitive asked for (Winograd's), reordered once.
    std::vector<std::pair<memory::desc, memory>> weights;
  };
  // An argument of a step: one of the plan's constants (weights, biases) or one of a call's
  // buffers.
  struct Ref {
    bool constant = false;
    int index = 0;
  };
  struct Step {
    dnnl::primitive primitive;
    std::vector<std::pair<int, Ref>> args;
    int scratchpad = -1;  // a call's buffer, or none
  };
  // What one input shape runs: buffer 0 is the call's frames (NHWC), buffer 1 its features.
  struct Plan {
    std::vector<memory::desc> buffers;
    std::vector<memory> constants;
    std::vector<Step> steps;
    // For each step, the call's buffers no later step uses: freed once it has run, so that a call
    // holds a few activations at a time, as LibTorch's fused path does, not all of them.
    std::vector<std::vector<int>> last_uses;
  };

  std::vector<Convolution> convolutions;  // the stem, then each block's conv1, conv2, downsample
  struct Block {
    int conv1 = 0, conv2 = 0, downsample = -1;
  };
  std::vector<Block> blocks;
  // In int8, the last block's output units to float32, for the average pooling.
  float dequantize_scale = 0;
  std::mutex mutex;
  // By frames, height, width, input type and intra-op threads: a primitive splits its work among
  // the threads there were when it was made, whatever the thread that runs it has.
  std::map<std::tuple<int64_t, int64_t, int64_t, memory::data_type, int>,
           std::shared_ptr<const Plan>>
      plans;

  // The plan for `n` frames of `h` x `w` in `input` (f32 or bf16, NHWC), on as many threads as
  // the calling thread's intra-op setting.
  std::shared_ptr<const Plan> PlanFor(int64_t n, int64_t h, int64_t w, memory::data_type input);
};

namespace {

using Graph = OneDnnResNet18::Graph;

memory::desc PlainWeights(const Graph::Convolution& conv,
                          memory::data_type type = memory::data_type::f32) {
  return memory::desc({conv.out_channels, conv.in_channels, conv.kernel, conv.kernel}, type,
                      memory::format_tag::oihw);
}

// A reorder's attributes: the caller's scratchpad, and values multiplied by `scale`.
dnnl::primitive_attr ScaledReorder(float scale) {
  dnnl::primitive_attr attr = UserScratchpad();
  if (scale != 1) attr.set_output_scales(0, {scale});
  return attr;
}

// The output's dims of `conv` on input dims `in`.
memory::dims OutputDims(const Graph::Convolution& conv, const memory::dims& in) {
  const int64_t k = conv.kernel, stride = conv.stride, pad = conv.padding;
  return {in[0], conv.out_channels, (in[2] + 2 * pad - k) / stride + 1,
          (in[3] + 2 * pad - k) / stride + 1};
}

// `conv` with `algorithm` on input dims `in`, weights in the layout its kernel prefers. The stem
// reads the frames in whichever layout its kernel prefers; the others read and write 16-channel
// blocks.
dnnl::convolution_forward::primitive_desc ConvolutionPrimitive(const Graph::Convolution& conv,
                                                               dnnl::algorithm algorithm,
                                                               const memory::dims& in, bool stem,
                                                               const dnnl::primitive_attr& attr) {
  const dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, algorithm,
      stem ? Any(in, conv.src_type)
           : Activations(in, conv.src_type, conv.type == memory::data_type::s8),
      Any({conv.out_channels, conv.in_channels, conv.kernel, conv.kernel}, conv.type),
      memory::desc({conv.out_channels}, memory::data_type::f32, memory::format_tag::x),
      Activations(OutputDims(conv, in), conv.dst_type, conv.type == memory::data_type::s8),
      {conv.stride, conv.stride}, {conv.padding, conv.padding}, {conv.padding, conv.padding});
  return dnnl::convolution_forward::primitive_desc(desc, attr, CpuEngine());
}

// Builds one Plan, step by step, in the order the steps run.
class PlanBuilder {
 public:
  PlanBuilder(Graph::Plan* plan, std::vector<Graph::Convolution>* convolutions)
      : plan_(*plan), convolutions_(*convolutions) {}

  int Buffer(const memory::desc& desc) {
    plan_.buffers.push_back(desc);
    return static_cast<int>(plan_.buffers.size()) - 1;
  }

  // Copies buffer `from` into buffer `to`, converting the layout and type, values multiplied by
  // `scale`.
  void Reorder(int from, int to, float scale = 1) {
    const dnnl::reorder::primitive_desc pd(CpuEngine(), plan_.buffers[from], CpuEngine(),
                                           plan_.buffers[to], ScaledReorder(scale));
    Add(dnnl::reorder(pd), {{DNNL_ARG_FROM, Call(from)}, {DNNL_ARG_TO, Call(to)}},
        pd.scratchpad_desc());
  }

  // Buffer `from` in layout `want`: itself when it has it, else a converted copy, its values
  // multiplied by `scale`.
  int Ensure(int from, const memory::desc& want, float scale = 1) {
    if (plan_.buffers[from] == want && scale == 1) return from;
    const int to = Buffer(want);
    Reorder(from, to, scale);
    return to;
  }

  // Convolution `index` of buffer `src`. With `residual` set, its output is added to that
  // buffer's contents, in place where the layouts agree; ReLU follows when `relu`. Returns the
  // output's buffer.
  int Convolve(int index, int src, bool relu, std::optional<int> residual = std::nullopt) {
    Graph::Convolution& conv = convolutions_[index];
    const memory::dims in = plan_.buffers[src].dims();
    const memory::dims out = OutputDims(conv, in);
    dnnl::post_ops ops;
    if (residual) ops.append_sum(conv.sum_scale);
    if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr = UserScratchpad();
    attr.set_post_ops(ops);
    if (!conv.output_scales.empty()) attr.set_output_scales(1 << 1, conv.output_scales);
    auto make = [&](dnnl::algorithm algorithm) {
      return ConvolutionPrimitive(conv, algorithm, in, /*stem=*/index == 0, attr);
    };
    const bool winograd = conv.winograd && out[2] >= kWinogradMinSide;
    dnnl::convolution_forward::primitive_desc pd;
    try {
      pd = make(winograd ? dnnl::algorithm::convolution_winograd
                         : dnnl::algorithm::convolution_direct);
    } catch (const dnnl::error&) {
      if (!winograd) throw;
      pd = make(dnnl::algorithm::convolution_direct);  // no Winograd kernel for this shape
    }
    const int input = Ensure(src, pd.src_desc(), conv.input_scale);
    const int dst = residual ? Ensure(*residual, pd.dst_desc()) : Buffer(pd.dst_desc());
    Add(dnnl::convolution_forward(pd),
        {{DNNL_ARG_SRC, Call(input)},
         {DNNL_ARG_WEIGHTS, Constant(Weights(conv, pd.weights_desc()))},
         {DNNL_ARG_BIAS,
          Constant(memory(pd.bias_desc(), CpuEngine(), conv.bias.data_ptr<float>()))},
         {DNNL_ARG_DST, Call(dst)}},
        pd.scratchpad_desc());
    return dst;
  }

  // Pooling of buffer `src` with a square `kernel`; returns the output's buffer.
  int Pool(int src, dnnl::algorithm algorithm, int64_t kernel, int64_t stride, int64_t pad) {
    const memory::dims in = plan_.buffers[src].dims();
    const memory::dims out = {in[0], in[1], (in[2] + 2 * pad - kernel) / stride + 1,
                              (in[3] + 2 * pad - kernel) / stride + 1};
    const dnnl::pooling_forward::desc desc(
        dnnl::prop_kind::forward_inference, algorithm, plan_.buffers[src],
        Any(out, plan_.buffers[src].data_type()), {stride, stride}, {kernel, kernel}, {pad, pad},
        {pad, pad});
    const dnnl::pooling_forward::primitive_desc pd(desc, UserScratchpad(), CpuEngine());
    const int dst = Buffer(pd.dst_desc());
    Add(dnnl::pooling_forward(pd), {{DNNL_ARG_SRC, Call(src)}, {DNNL_ARG_DST, Call(dst)}},
        pd.scratchpad_desc());
    return dst;
  }

 private:
  static Graph::Ref Call(int buffer) { return Graph::Ref{false, buffer}; }
  Graph::Ref Constant(memory value) {
    plan_.constants.push_back(std::move(value));
    return Graph::Ref{true, static_cast<int>(plan_.constants.size()) - 1};
  }

  void Add(dnnl::primitive primitive, std::vector<std::pair<int, Graph::Ref>> args,
           const memory::desc& scratchpad) {
    Graph::Step step{std::move(primitive), std::move(args)};
    if (scratchpad.get_size() > 0) step.scratchpad = Buffer(scratchpad);
    plan_.steps.push_back(std::move(step));
  }

  // The weights of `conv` in layout `want`: the stored copy, or one reordered on first use from
  // a plain float32 copy, as Winograd's layouts are made only from those: the stored one's, or in
  // int8 the kept quantized weights' (integers, exact in float32), as layouts with compensation
  // cannot be read back and int8 layouts are made from float32 ones.
  static memory Weights(Graph::Convolution& conv, const memory::desc& want) {
    if (conv.stored_layout == want) return conv.stored;
    for (const auto& [layout, weights] : conv.weights) {
      if (layout == want) return weights;
    }
    memory plain(PlainWeights(conv), CpuEngine());
    if (conv.plain_int8.defined()) {
      const torch::Tensor levels = conv.plain_int8.to(torch::kFloat);
      ReorderNow(memory(PlainWeights(conv), CpuEngine(), levels.data_ptr<float>()), plain);
    } else {
      ReorderNow(conv.stored, plain);
    }
    memory to(want, CpuEngine());
    ReorderNow(plain, to);
    conv.weights.emplace_back(want, to);
    return to;
  }

  Graph::Plan& plan_;
  std::vector<Graph::Convolution>& convolutions_;
};

}  // namespace

std::shared_ptr<const Graph::Plan> Graph::PlanFor(int64_t n, int64_t h, int64_t w,
                                                  memory::data_type input) {
  std::lock_guard<std::mutex> lock(mutex);
  auto& cached = plans[{n, h, w, input, torch::get_num_threads()}];
  if (cached) return cached;
  auto plan = std::make_shared<Plan>();
  PlanBuilder build(plan.get(), &convolutions);
  const int frames = build.Buffer(memory::desc({n, 3, h, w}, input, memory::format_tag::nhwc));
  const int features =
      build.Buffer(memory::desc({n, 512, 1, 1}, memory::data_type::f32, memory::format_tag::nchw));
  int x = build.Convolve(0, frames, /*relu=*/true);
  x = build.Pool(x, dnnl::algorithm::pooling_max, 3, 2, 1);
  for (const Block& block : blocks) {
    // Without a downsample, the block's input is its residual, and the last convolution adds
    // onto it in place: nothing reads it after the first convolution.
    const int residual = block.downsample < 0 ? x : build.Convolve(block.downsample, x, false);
    const int inner = build.Convolve(block.conv1, x, /*relu=*/true);
    x = build.Convolve(block.conv2, inner, /*relu=*/true, residual);
    if (const float scale = convolutions[block.conv2].requantize_scale; scale != 0) {
      x = build.Ensure(x, Activations(plan->buffers[x].dims(), memory::data_type::u8, true), scale);
    }
  }
  const memory::dims last = plan->buffers[x].dims();
  TORCH_CHECK(last[2] == last[3], "oneDNN ResNet18 expects square frames; got ", h, "x", w);
  if (dequantize_scale != 0) {  // int8: pooled in float32, as rounding the mean would lose bits
    x = build.Ensure(x, Activations(last, memory::data_type::f32, false), dequantize_scale);
  }
  x = build.Pool(x, dnnl::algorithm::pooling_avg_exclude_padding, last[2], 1, 0);
  build.Reorder(x, features);
  std::vector<int> last_step(plan->buffers.size(), -1);
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    for (const auto& [name, ref] : plan->steps[i].args) {
      if (!ref.constant) last_step[ref.index] = static_cast<int>(i);
    }
    if (plan->steps[i].scratchpad >= 0) last_step[plan->steps[i].scratchpad] = static_cast<int>(i);
  }
  plan->last_uses.resize(plan->steps.size());
  for (size_t buffer = 2; buffer < last_step.size(); ++buffer) {  // 0 and 1 are the caller's
    if (last_step[buffer] >= 0) plan->last_uses[last_step[buffer]].push_back(buffer);
  }
  cached = std::move(plan);
  return cached;
}

bool OneDnnResNet18::WinogradAvailable() {
  try {
    const dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd,
        Any({1, 64, 8, 8}, memory::data_type::f32), Any({64, 64, 3, 3}, memory::data_type::f32),
        memory::desc({64}, memory::data_type::f32, memory::format_tag::x),
        Any({1, 64, 8, 8}, memory::data_type::f32), {1, 1}, {1, 1}, {1, 1});
    dnnl::convolution_forward::primitive_desc(desc, CpuEngine());
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool OneDnnResNet18::Bf16Available() {
  // oneDNN also runs bf16 on AVX-512 CPUs without bf16 instructions, by emulation, more slowly
  // than fp32: only the instructions count.
  const auto bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
}

bool OneDnnResNet18::Int8Available() {
  // VNNI's u8 x s8 dot products; without them oneDNN's int8 kernels gain little over fp32.
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  for (const auto vnni : {dnnl_cpu_isa_avx512_core_vnni, dnnl_cpu_isa_avx2_vnni}) {
    if ((isa & static_cast<unsigned>(vnni)) == static_cast<unsigned>(vnni)) return true;
  }
  return false;
}

namespace {

// A convolution of the folded network as one of the graph, its weights not yet stored.
Graph::Convolution MakeConvolution(const FoldedConvolution& conv, memory::data_type type) {
  Graph::Convolution convolution;
  convolution.type = convolution.src_type = convolution.dst_type = type;
  convolution.out_channels = conv.weight.size(0);
  convolution.in_channels = conv.weight.size(1);
  convolution.kernel = conv.weight.size(2);
  convolution.stride = conv.stride;
  convolution.padding = conv.padding;
  convolution.bias = conv.bias.to(torch::kCPU, torch::kFloat).contiguous();
  return convolution;
}

// Reorders `plain` (float32 or s8, oihw) into the stored layout of `conv`: the one the direct
// kernels take at 56x56, which is what they take at every size here (a plan that asks for another
// gets a copy made on first use).
void StoreWeights(Graph::Convolution& conv, bool stem, memory plain) {
  conv.stored_layout =
      ConvolutionPrimitive(conv, dnnl::algorithm::convolution_direct, {1, conv.in_channels, 56, 56},
                           stem, dnnl::primitive_attr())
          .weights_desc();
  conv.stored = memory(conv.stored_layout, CpuEngine());
  ReorderNow(plain, conv.stored);
}

}  // namespace

OneDnnResNet18::OneDnnResNet18(const FoldedResNet18& folded, bool winograd, torch::Dtype dtype)
    : graph_(std::make_unique<Graph>()) {
  const memory::data_type type = DataType(dtype);
  TORCH_CHECK(dtype == torch::kFloat || Bf16Available(),
              "this CPU has no bf16 instructions (AVX-512 BF16 or AMX) for oneDNN's bf16 kernels");
  auto add = [&](const FoldedConvolution& conv) {
    const bool stem = graph_->convolutions.empty();
    Graph::Convolution convolution = MakeConvolution(conv, type);
    // oneDNN's Winograd kernels are float32's only.
    convolution.winograd =
        winograd && dtype == torch::kFloat && convolution.kernel == 3 && conv.stride == 1;
    torch::Tensor plain = conv.weight.to(torch::kCPU, torch::kFloat).contiguous();
    StoreWeights(convolution, stem,
                 memory(PlainWeights(convolution), CpuEngine(), plain.data_ptr<float>()));
    graph_->convolutions.push_back(std::move(convolution));
    return static_cast<int>(graph_->convolutions.size()) - 1;
  };
  add(folded.stem);
  for (const FoldedBlock& block : folded.blocks) {
    Graph::Block indices;
    indices.conv1 = add(block.conv1);
    indices.conv2 = add(block.conv2);
    if (block.downsample) indices.downsample = add(*block.downsample);
    graph_->blocks.push_back(indices);
  }
}

OneDnnResNet18::OneDnnResNet18(const FoldedResNet18& folded, const Int8Calibration& calibration)
    : graph_(std::make_unique<Graph>()) {
  TORCH_CHECK(Int8Available(),
              "this CPU has no VNNI instructions (AVX-512 VNNI, AVX-VNNI or AMX) for oneDNN's "
              "int8 kernels");
  const size_t expected = 1 + 2 * folded.blocks.size() +
                          std::count_if(folded.blocks.begin(), folded.blocks.end(),
                                        [](const FoldedBlock& b) { return b.downsample; });
  TORCH_CHECK(calibration.output_max.size() == expected && calibration.input_max > 0,
              "the int8 calibration lists ", calibration.output_max.size(),
              " convolutions' ranges where the backbone has ", expected);
  TORCH_CHECK(calibration.input_mean.empty() || calibration.input_mean.size() == expected,
              "the int8 calibration lists ", calibration.input_mean.size(),
              " convolutions' input means where the backbone has ", expected);
  using T = memory::data_type;
  // A step is the value of one unit of a tensor: an int8 one's calibrated range over 127 (s8) or
  // 255 (u8, a ReLU's output); 1 for float32.
  auto step = [](float range, T type) {
    return type == T::f32 ? 1.0f : range / (type == T::u8 ? 255.0f : 127.0f);
  };
  // Adds folded convolution `conv` (calibrated as number `index`) reading `src_type` values of
  // `src_step`, writing `dst_type`; returns its index and output step.
  auto add = [&](const FoldedConvolution& conv, size_t index, T src_type, float src_step,
                 T dst_type) {
    const bool stem = graph_->convolutions.empty();
    Graph::Convolution convolution = MakeConvolution(conv, T::s8);
    convolution.src_type = src_type;
    convolution.dst_type = dst_type;
    const float out_step = step(calibration.output_max[index], dst_type);
    // Per output channel: the weights' step, the accumulator's (input step x weight step).
    const torch::Tensor weight = conv.weight.to(torch::kCPU, torch::kFloat);
    const torch::Tensor weight_step = weight.abs().amax({1, 2, 3}).clamp_min(1e-12) / 127;
    convolution.plain_int8 = (weight / weight_step.view({-1, 1, 1, 1}))
                                 .round()
                                 .clamp(-127, 127)
                                 .to(torch::kChar)
                                 .contiguous();
    if (!calibration.input_mean.empty()) {  // bias correction: int8_calibration.h
      const std::vector<float>& mean = calibration.input_mean[index];
      TORCH_CHECK(static_cast<int64_t>(mean.size()) == convolution.in_channels,
                  "the int8 calibration lists ", mean.size(), " input means of convolution ", index,
                  ", which reads ", convolution.in_channels, " channels");
      const torch::Tensor rounding =
          (convolution.plain_int8.to(torch::kFloat) * weight_step.view({-1, 1, 1, 1}) - weight)
              .sum({2, 3});
      convolution.bias -= torch::mv(rounding, torch::tensor(mean));
    }
    const torch::Tensor accumulator_step = weight_step * src_step;
    convolution.bias = (convolution.bias / accumulator_step).contiguous();
    const torch::Tensor output_scales = (accumulator_step / out_step).contiguous();
    convolution.output_scales.assign(output_scales.data_ptr<float>(),
                                     output_scales.data_ptr<float>() + output_scales.numel());
    StoreWeights(
        convolution, stem,
        memory(PlainWeights(convolution, T::s8), CpuEngine(), convolution.plain_int8.data_ptr()));
    graph_->convolutions.push_back(std::move(convolution));
    return std::make_pair(static_cast<int>(graph_->convolutions.size()) - 1, out_step);
  };
  const float input_step = step(calibration.input_max, T::s8);
  auto [stem, x_step] = add(folded.stem, 0, T::s8, input_step, T::u8);
  graph_->convolutions[stem].input_scale = 1 / input_step;
  // Every block reads and writes u8 (max pooling keeps the stem's type and step). A downsampled
  // residual is signed: it and the sum onto it are float32, and the sum is then quantized to u8,
  // so that no block output loses the bit that s8 would.
  size_t index = 1;
  for (const FoldedBlock& block : folded.blocks) {
    const size_t conv1 = index, conv2 = index + 1, downsample = index + 2;
    index += block.downsample ? 3 : 2;
    Graph::Block indices;
    float residual_step = x_step;
    const T sum_type = block.downsample ? T::f32 : T::u8;
    if (block.downsample) {
      std::tie(indices.downsample, residual_step) =
          add(*block.downsample, downsample, T::u8, x_step, sum_type);
    }
    float inner_step = 0;
    std::tie(indices.conv1, inner_step) = add(block.conv1, conv1, T::u8, x_step, T::u8);
    float sum_step = 0;
    std::tie(indices.conv2, sum_step) = add(block.conv2, conv2, T::u8, inner_step, sum_type);
    Graph::Convolution& last = graph_->convolutions[indices.conv2];
    last.sum_scale = residual_step / sum_step;
    x_step = step(calibration.output_max[conv2], T::u8);
    if (sum_type == T::f32) last.requantize_scale = 1 / x_step;
    graph_->blocks.push_back(indices);
  }
  graph_->dequantize_scale = x_step;
}

OneDnnResNet18::~OneDnnResNet18() = default;

bool OneDnnResNet18::SameWeights(const OneDnnResNet18& other) const {
  const std::vector<Graph::Convolution>& mine = graph_->convolutions;
  const std::vector<Graph::Convolution>& theirs = other.graph_->convolutions;
  if (mine.size() != theirs.size() || graph_->blocks.size() != other.graph_->blocks.size() ||
      graph_->dequantize_scale != other.graph_->dequantize_scale) {
    return false;
  }
  for (size_t i = 0; i < mine.size(); ++i) {
    const Graph::Convolution& a = mine[i];
    const Graph::Convolution& b = theirs[i];
    // The stored copies were reordered alike from the folded weights (padding zeroed): equal
    // bytes, equal weights. They never change after construction, so no lock is needed.
    if (a.out_channels != b.out_channels || a.in_channels != b.in_channels ||
        a.kernel != b.kernel || a.stride != b.stride || a.padding != b.padding ||
        a.type != b.type || a.src_type != b.src_type || a.dst_type != b.dst_type ||
        a.winograd != b.winograd || !torch::equal(a.bias, b.bias) ||
        a.output_scales != b.output_scales || a.sum_scale != b.sum_scale ||
        a.input_scale != b.input_scale || a.requantize_scale != b.requantize_scale ||
        a.stored_layout != b.stored_layout ||
        std::memcmp(a.stored.get_data_handle(), b.stored.get_data_handle(),
                    a.stored_layout.get_size()) != 0) {
      return false;
    }
  }
  return true;
}

torch::Tensor OneDnnResNet18::forward(const torch::Tensor& frames) const {
  TORCH_CHECK(frames.dim() == 4 && frames.size(1) == 3 && frames.device().is_cpu(),
              "ResNet18 expects frames shaped [N, 3, H, W] on the CPU; got ", frames.sizes());
  // bf16 frames are read as they are; any other type as float32. The first step converts them
  // to the graph's type and layout.
  const torch::Tensor input =
      (frames.scalar_type() == torch::kBFloat16 ? frames : frames.to(torch::kFloat))
          .contiguous(torch::MemoryFormat::ChannelsLast);
  const std::shared_ptr<const Graph::Plan> plan =
      graph_->PlanFor(input.size(0), input.size(2), input.size(3), DataType(input.scalar_type()));
  torch::Tensor features = torch::empty({input.size(0), 512}, torch::kFloat);
  std::vector<memory> buffers(plan->buffers.size());
  buffers[0] = memory(plan->buffers[0], CpuEngine(), input.data_ptr());
  buffers[1] = memory(plan->buffers[1], CpuEngine(), features.data_ptr<float>());
  // Allocated at first use.
  auto buffer = [&](int index) -> const memory& {
    if (!buffers[index]) buffers[index] = memory(plan->buffers[index], CpuEngine());
    return buffers[index];
  };
  dnnl::stream stream(CpuEngine());
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const Graph::Step& step = plan->steps[i];
    std::unordered_map<int, memory> args;
    for (const auto& [name, ref] : step.args) {
      args.emplace(name, ref.constant ? plan->constants[ref.index] : buffer(ref.index));
    }
    if (step.scratchpad >= 0) args.emplace(DNNL_ARG_SCRATCHPAD, buffer(step.scratchpad));
    step.primitive.execute(stream, args);
    // A CPU stream runs each primitive before execute returns: its buffers can go at once.
    for (int index : plan->last_uses[i]) buffers[index] = memory();
  }
  stream.wait();
  return features;
}

#else  // no oneDNN in this build

struct OneDnnResNet18::Graph {};

bool OneDnnResNet18::WinogradAvailable() { return false; }

bool OneDnnResNet18::Bf16Available() { return false; }

bool OneDnnResNet18::Int8Available() { return false; }

OneDnnResNet18::OneDnnResNet18(const FoldedResNet18&, bool, torch::Dtype) {
  TORCH_CHECK(false, "this build has no oneDNN");
}

OneDnnResNet18::OneDnnResNet18(const FoldedResNet18&, const Int8Calibration&) {
  TORCH_CHECK(false, "this build has no oneDNN");
}

OneDnnResNet18::~OneDnnResNet18() = default;

bool OneDnnResNet18::SameWeights(const OneDnnResNet18&) const { return false; }

torch::Tensor OneDnnResNet18::forward(const torch::Tensor&) const {
  TORCH_CHECK(false, "this build has no oneDNN");
  return {};
}

#endif

}  // namespace vidclf::model
