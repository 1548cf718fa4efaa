#include "server/service/inference_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tensor_bytes.h"
#include "media/quoted_text.h"

namespace vidclf::service {
namespace {

using inference::InferParameter;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

constexpr int64_t kMaxCount = 1 << 20;  // top_k, num_frames, stride_frames
// A sequence_id string's length: the messages that name a sequence quote it whole.
constexpr size_t kLongestSequenceId = 128;

// A tensor of every model, as metadata and configuration describe it.
struct TensorSpec {
  const char* name;
  const char* datatype;
  inference::DataType type;  // the datatype in the configuration's terms
  int64_t size;              // -1: any
};
// VIDEO is described as BYTES, one element; UINT8, one element per byte, is taken too. A request
// has VIDEO or URI, not both.
constexpr TensorSpec kInputs[] = {
    {kVideoInput, "BYTES", inference::TYPE_STRING, 1},
    {kUriInput, "BYTES", inference::TYPE_STRING, 1},
};
constexpr TensorSpec kOutputs[] = {
    {kLabelsOutput, "BYTES", inference::TYPE_STRING, -1},
    {kScoresOutput, "FP32", inference::TYPE_FP32, -1},
    {kFrameTimesOutput, "FP32", inference::TYPE_FP32, -1},
};

absl::StatusOr<int64_t> IntegerParameter(absl::string_view name, const InferParameter& value,
                                         int64_t low, int64_t high) {
  int64_t integer = 0;
  if (value.has_int64_param()) {
    integer = value.int64_param();
  } else if (value.has_uint64_param()) {
    integer = static_cast<int64_t>(
        std::min<uint64_t>(value.uint64_param(), std::numeric_limits<int64_t>::max()));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("request parameter ", name, " must be an integer (int64_param)"));
  }
  if (integer < low || integer > high) {
    return absl::InvalidArgumentError(absl::StrCat("request parameter ", name, " is ", integer,
                                                   "; it must be from ", low, " to ", high));
  }
  return integer;
}

absl::StatusOr<double> NumberParameter(absl::string_view name, const InferParameter& value) {
  double number = 0;
  if (value.has_double_param()) {
    number = value.double_param();
  } else if (value.has_int64_param()) {
    number = static_cast<double>(value.int64_param());
  } else if (value.has_uint64_param()) {
    number = static_cast<double>(value.uint64_param());
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "request parameter ", name, " must be a number (double_param or int64_param)"));
  }
  if (!std::isfinite(number)) {
    return absl::InvalidArgumentError(
        absl::StrCat("request parameter ", name, " must be a finite number"));
  }
  return number;
}

absl::StatusOr<bool> BoolParameter(absl::string_view name, const InferParameter& value) {
  if (value.has_bool_param()) return value.bool_param();
  return absl::InvalidArgumentError(
      absl::StrCat("request parameter ", name, " must be a boolean (bool_param)"));
}

absl::StatusOr<std::string> StringParameter(absl::string_view name, const InferParameter& value) {
  if (value.has_string_param()) return value.string_param();
  return absl::InvalidArgumentError(
      absl::StrCat("request parameter ", name, " must be a string (string_param)"));
}

// The request's parameters into `settings`; the sampling's values are checked as vidclf.v1's
// are, when the engine's input is made from them.
absl::Status ApplyParameters(const ModelInferRequest& request,
                             vidclf::v1::ClassifyRequest* settings) {
  vidclf::v1::SamplingOptions* sampling = settings->mutable_sampling();
  for (const auto& [name, value] : request.parameters()) {
    absl::Status status;
    if (name == "top_k") {
      absl::StatusOr<int64_t> top_k = IntegerParameter(name, value, 1, kMaxCount);
      if (top_k.ok()) settings->set_top_k(static_cast<uint32_t>(*top_k));
      status = top_k.status();
    } else if (name == "num_frames") {
      absl::StatusOr<int64_t> frames = IntegerParameter(name, value, 1, kMaxCount);
      if (frames.ok()) sampling->set_num_frames(static_cast<uint32_t>(*frames));
      status = frames.status();
    } else if (name == "stride_frames") {
      absl::StatusOr<int64_t> stride = IntegerParameter(name, value, 1, kMaxCount);
      if (stride.ok()) sampling->set_stride_frames(static_cast<uint32_t>(*stride));
      status = stride.status();
    } else if (name == "frames_per_second" || name == "start_seconds") {
      absl::StatusOr<double> number = NumberParameter(name, value);
      if (number.ok() && name == "frames_per_second") sampling->set_frames_per_second(*number);
      if (number.ok() && name == "start_seconds") sampling->set_start_seconds(*number);
      status = number.status();
    } else if (name == "snap_to_keyframes" || name == "skip_loop_filter") {
      absl::StatusOr<bool> flag = BoolParameter(name, value);
      if (flag.ok() && name == "snap_to_keyframes") sampling->set_snap_to_keyframes(*flag);
      if (flag.ok() && name == "skip_loop_filter") sampling->set_skip_loop_filter(*flag);
      status = flag.status();
    } else if (name == "sampling" || name == "attention") {
      absl::StatusOr<std::string> text = StringParameter(name, value);
      if (text.ok() && name == "sampling") sampling->set_strategy(*text);
      if (text.ok() && name == "attention") settings->set_attention(*text);
      status = text.status();
    } else {
      status = absl::InvalidArgumentError(absl::StrCat(
          "unknown request parameter ", media::QuoteInput(name),
          ": vidclf takes top_k, num_frames, sampling, frames_per_second, stride_frames, "
          "start_seconds, snap_to_keyframes, skip_loop_filter and attention"));
    }
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// The number of elements `shape` holds; INVALID_ARGUMENT for a negative dimension.
absl::StatusOr<int64_t> ElementCount(absl::string_view input,
                                     const google::protobuf::RepeatedField<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", input, " has shape [", absl::StrJoin(shape, ","),
                       "]: a request's dimensions are sizes, not -1"));
    }
    count = dim == 0 || count <= std::numeric_limits<int64_t>::max() / dim
                ? count * dim
                : std::numeric_limits<int64_t>::max();
  }
  return count;
}

// The one element of a BYTES input, from raw contents (its length as 4 little-endian bytes, then
// the bytes) or from contents.bytes_contents.
absl::StatusOr<absl::string_view> OneBytesElement(const ModelInferRequest& request,
                                                  absl::string_view input) {
  const ModelInferRequest::InferInputTensor& tensor = request.inputs(0);
  absl::StatusOr<int64_t> count = ElementCount(input, tensor.shape());
  if (!count.ok()) return count.status();
  if (*count != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", input, " has shape [", absl::StrJoin(tensor.shape(), ","), "] (", *count,
        " elements); it takes one element, shape [1]: send one video per request"));
  }
  if (request.raw_input_contents_size() == 0) {
    if (tensor.contents().bytes_contents_size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input ", input, " (BYTES, shape [1]) holds ", tensor.contents().bytes_contents_size(),
          " elements in contents.bytes_contents; it must hold one"));
    }
    return absl::string_view(tensor.contents().bytes_contents(0));
  }
  const absl::string_view raw = request.raw_input_contents(0);
  const uint64_t length = raw.size() >= 4 ? LittleEndian32(raw, 0) : 0;
  if (raw.size() < 4 || raw.size() - 4 != length) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw_input_contents for input ", input,
                     " (BYTES) must be one element: its length as 4 "
                     "little-endian bytes, then that many bytes; it holds ",
                     raw.size(), " bytes",
                     raw.size() >= 4 ? absl::StrCat(" and its length prefix says ", length) : ""));
  }
  return raw.substr(4);
}

// A VIDEO input of UINT8 elements, one per byte of the file.
absl::Status ReadUint8Video(const ModelInferRequest& request, InferRequestParts* parts) {
  const ModelInferRequest::InferInputTensor& tensor = request.inputs(0);
  absl::StatusOr<int64_t> count = ElementCount(kVideoInput, tensor.shape());
  if (!count.ok()) return count.status();
  const int64_t held = request.raw_input_contents_size() > 0
                           ? static_cast<int64_t>(request.raw_input_contents(0).size())
                           : tensor.contents().uint_contents_size();
  if (held != *count) {
    return absl::InvalidArgumentError(
        absl::StrCat("input VIDEO (UINT8) has shape [", absl::StrJoin(tensor.shape(), ","), "], ",
                     *count, " elements, but holds ", held, ": give the file's size as its shape"));
  }
  if (request.raw_input_contents_size() > 0) {
    parts->video_view = request.raw_input_contents(0);
    return absl::OkStatus();
  }
  parts->copied_video.reserve(static_cast<size_t>(held));
  for (uint32_t value : tensor.contents().uint_contents()) {
    if (value > 255) {
      return absl::InvalidArgumentError(absl::StrCat("input VIDEO (UINT8) holds ", value,
                                                     " in contents.uint_contents: not a byte"));
    }
    parts->copied_video.push_back(static_cast<char>(value));
  }
  return absl::OkStatus();
}

// The one input's data is in raw_input_contents (one entry) or in its contents, not both, and it
// has no parameters of its own.
absl::Status CheckDataPlacement(const ModelInferRequest& request) {
  const ModelInferRequest::InferInputTensor& tensor = request.inputs(0);
  if (request.raw_input_contents_size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("raw_input_contents holds ",
                                                   request.raw_input_contents_size(),
                                                   " entries for one input; it must hold one"));
  }
  if (request.raw_input_contents_size() == 1 && tensor.has_contents()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", media::QuoteInput(tensor.name()),
                     " has both contents and raw_input_contents; send its data in one of them"));
  }
  if (!tensor.parameters().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", media::QuoteInput(tensor.name()),
                     " takes no parameters; top_k, sampling and the others are the request's"));
  }
  return absl::OkStatus();
}

absl::Status ReadInput(const ModelInferRequest& request, InferRequestParts* parts) {
  if (request.inputs_size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ModelInfer takes one input, VIDEO (the encoded video file) or URI (a video for the "
        "server to read); the request has ",
        request.inputs_size()));
  }
  if (absl::Status status = CheckDataPlacement(request); !status.ok()) return status;
  const ModelInferRequest::InferInputTensor& tensor = request.inputs(0);
  if (tensor.name() == kVideoInput) {
    if (tensor.datatype() == "UINT8") return ReadUint8Video(request, parts);
    if (tensor.datatype() != "BYTES") {
      return absl::InvalidArgumentError(absl::StrCat(
          "input VIDEO must be BYTES (one element: the file) or UINT8 (one element per byte of "
          "the file); it is ",
          media::QuoteInput(tensor.datatype())));
    }
    absl::StatusOr<absl::string_view> video = OneBytesElement(request, kVideoInput);
    if (!video.ok()) return video.status();
    parts->video_view = *video;
    return absl::OkStatus();
  }
  if (tensor.name() == kUriInput) {
    if (tensor.datatype() != "BYTES") {
      return absl::InvalidArgumentError(
          absl::StrCat("input URI must be BYTES (one element: the URI); it is ",
                       media::QuoteInput(tensor.datatype())));
    }
    absl::StatusOr<absl::string_view> uri = OneBytesElement(request, kUriInput);
    if (!uri.ok()) return uri.status();
    if (uri->empty()) return absl::InvalidArgumentError("input URI is empty");
    parts->settings.set_uri(std::string(*uri));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown input ", media::QuoteInput(tensor.name()),
                                                 ": vidclf's models take VIDEO or URI"));
}

absl::Status ReadOutputs(const ModelInferRequest& request, InferRequestParts* parts) {
  if (request.outputs().empty()) {
    parts->outputs = {kLabelsOutput, kScoresOutput, kFrameTimesOutput};
    return absl::OkStatus();
  }
  std::set<std::string> seen;
  for (const ModelInferRequest::InferRequestedOutputTensor& output : request.outputs()) {
    const std::string& name = output.name();
    if (name != kLabelsOutput && name != kScoresOutput && name != kFrameTimesOutput) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown output ", media::QuoteInput(name),
                       ": vidclf's models answer LABELS, SCORES and FRAME_TIMES"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("output ", name, " is asked for twice"));
    }
    if (!output.parameters().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("output ", name,
                       " takes no parameters; the request parameter top_k sets how many "
                       "labels come back"));
    }
    parts->outputs.push_back(name);
  }
  return absl::OkStatus();
}

// A ModelStreamInfer request's parameters into `parts`: the sequence's, the start's head
// options, a picture's time.
absl::Status ApplyStreamParameters(const ModelInferRequest& request, StreamRequestParts* parts) {
  vidclf::v1::StreamConfig& config = parts->config;
  bool has_sequence = false;
  for (const auto& [name, value] : request.parameters()) {
    absl::Status status;
    if (name == "sequence_id") {
      has_sequence = true;
      parts->sequence_id = value;
      if (value.has_int64_param() && value.int64_param() != 0) {
        parts->sequence = absl::StrCat(value.int64_param());
      } else if (value.has_uint64_param() && value.uint64_param() != 0) {
        parts->sequence = absl::StrCat(value.uint64_param());
      } else if (value.has_string_param() && !value.string_param().empty() &&
                 value.string_param().size() <= kLongestSequenceId) {
        parts->sequence = absl::StrCat("'", absl::CHexEscape(value.string_param()), "'");
      } else {
        status = absl::InvalidArgumentError(
            absl::StrCat("request parameter sequence_id must be a non-zero integer or a string of "
                         "1 to ",
                         kLongestSequenceId, " bytes"));
      }
    } else if (name == "sequence_start" || name == "sequence_end") {
      absl::StatusOr<bool> flag = BoolParameter(name, value);
      if (flag.ok()) (name == "sequence_start" ? parts->start : parts->end) = *flag;
      status = flag.status();
    } else if (name == "top_k" || name == "emit_every_frames" || name == "embed_stride") {
      absl::StatusOr<int64_t> count = IntegerParameter(name, value, 1, kMaxCount);
      if (count.ok() && name == "top_k") config.set_top_k(static_cast<uint32_t>(*count));
      if (count.ok() && name == "emit_every_frames") {
        config.set_emit_every_frames(static_cast<uint32_t>(*count));
      }
      if (count.ok() && name == "embed_stride") {
        config.set_embed_stride(static_cast<uint32_t>(*count));
      }
      status = count.status();
    } else if (name == "emit_every_seconds" || name == "timestamp_seconds") {
      absl::StatusOr<double> number = NumberParameter(name, value);
      if (number.ok() && name == "emit_every_seconds") config.set_emit_every_seconds(*number);
      if (number.ok() && name == "timestamp_seconds") parts->timestamp_seconds = *number;
      status = number.status();
    } else if (name == "attention") {
      absl::StatusOr<std::string> text = StringParameter(name, value);
      if (text.ok()) config.set_attention(*text);
      status = text.status();
    } else {
      status = absl::InvalidArgumentError(
          absl::StrCat("unknown request parameter ", media::QuoteInput(name),
                       ": ModelStreamInfer takes sequence_id, sequence_start, sequence_end, top_k, "
                       "emit_every_frames, emit_every_seconds, embed_stride, attention and "
                       "timestamp_seconds"));
    }
    if (!status.ok()) return status;
  }
  if (!has_sequence) {
    return absl::InvalidArgumentError(
        "ModelStreamInfer needs the request parameter sequence_id: each live feed is a sequence, "
        "opened by sequence_start and closed by sequence_end");
  }
  const bool head_options = config.top_k() != 0 || config.emit_every_frames() != 0 ||
                            config.embed_stride() != 0 || config.emit_every_seconds() != 0 ||
                            !config.attention().empty();
  if (head_options && !parts->start) {
    return absl::InvalidArgumentError(
        "top_k, emit_every_frames, emit_every_seconds, embed_stride and attention are set by "
        "the request that starts a sequence (sequence_start), not a later one");
  }
  return absl::OkStatus();
}

void SetDoubleParameter(absl::string_view name, double value, ModelInferResponse* response) {
  (*response->mutable_parameters())[std::string(name)].set_double_param(value);
}

}  // namespace

absl::StatusOr<InferRequestParts> ParseInferRequest(const ModelInferRequest& request) {
  InferRequestParts parts;
  parts.settings.set_model(request.model_name());
  if (absl::Status status = ApplyParameters(request, &parts.settings); !status.ok()) return status;
  if (absl::Status status = ReadInput(request, &parts); !status.ok()) return status;
  if (absl::Status status = ReadOutputs(request, &parts); !status.ok()) return status;
  return parts;
}

absl::StatusOr<StreamRequestParts> ParseStreamRequest(const ModelInferRequest& request) {
  StreamRequestParts parts;
  if (absl::Status status = ApplyStreamParameters(request, &parts); !status.ok()) return status;
  parts.config.set_model(request.model_name());
  if (!request.outputs().empty()) {
    return absl::InvalidArgumentError(
        "ModelStreamInfer answers LABELS and SCORES; leave the request's outputs empty");
  }
  if (request.inputs().empty()) {
    if (parts.start || !parts.end) {
      return absl::InvalidArgumentError(
          "a ModelStreamInfer request without input only ends a sequence (sequence_end); give "
          "it VIDEO (a chunk of the feed's container) or IMAGE (one encoded picture)");
    }
    return parts;
  }
  if (request.inputs_size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ModelStreamInfer request takes one input, VIDEO or IMAGE; it has ",
                     request.inputs_size()));
  }
  if (absl::Status status = CheckDataPlacement(request); !status.ok()) return status;
  const std::string& name = request.inputs(0).name();
  if (name != kVideoInput && name != kImageInput) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown input ", media::QuoteInput(name),
        ": a live feed takes VIDEO (chunks of a streamable container) or IMAGE (encoded "
        "pictures)"));
  }
  if (request.inputs(0).datatype() != "BYTES") {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", name, " must be BYTES; it is ", media::QuoteInput(request.inputs(0).datatype())));
  }
  absl::StatusOr<absl::string_view> bytes = OneBytesElement(request, name);
  if (!bytes.ok()) return bytes.status();
  parts.bytes = *bytes;
  const bool chunk = name == kVideoInput;
  parts.data = chunk ? StreamRequestParts::Data::kChunk : StreamRequestParts::Data::kPicture;
  parts.config.set_input(chunk ? vidclf::v1::StreamConfig::CONTAINER
                               : vidclf::v1::StreamConfig::ENCODED_IMAGES);
  return parts;
}

ModelInferResponse StreamResponseOf(const vidclf::v1::StreamPrediction& prediction,
                                    const std::string& request_id,
                                    const InferParameter& sequence_id) {
  vidclf::v1::ClassifyResponse answer;
  answer.set_model(prediction.model());
  answer.set_model_version(prediction.model_version());
  *answer.mutable_top_k() = prediction.top_k();
  ModelInferResponse response = InferResponseOf(request_id, {kLabelsOutput, kScoresOutput}, answer);
  auto& parameters = *response.mutable_parameters();
  parameters.clear();  // no stage timings: a feed's frames overlap
  parameters["sequence_id"] = sequence_id;
  parameters["first_frame"].set_int64_param(static_cast<int64_t>(prediction.first_frame()));
  parameters["last_frame"].set_int64_param(static_cast<int64_t>(prediction.last_frame()));
  parameters["first_seconds"].set_double_param(prediction.first_seconds());
  parameters["last_seconds"].set_double_param(prediction.last_seconds());
  parameters["frames_seen"].set_int64_param(static_cast<int64_t>(prediction.frames_seen()));
  parameters["frames_embedded"].set_int64_param(static_cast<int64_t>(prediction.frames_embedded()));
  parameters["latency_ms"].set_double_param(prediction.latency_ms());
  parameters["dropped_before"].set_int64_param(prediction.dropped_before());
  return response;
}

ModelInferResponse InferResponseOf(const std::string& id, const std::vector<std::string>& outputs,
                                   const vidclf::v1::ClassifyResponse& answer) {
  ModelInferResponse response;
  response.set_model_name(answer.model());
  response.set_model_version(answer.model_version());
  response.set_id(id);
  for (const std::string& name : outputs) {
    ModelInferResponse::InferOutputTensor* output = response.add_outputs();
    output->set_name(name);
    std::string* raw = response.add_raw_output_contents();
    if (name == kLabelsOutput) {
      output->set_datatype("BYTES");
      output->add_shape(answer.top_k_size());
      for (const vidclf::v1::LabelScore& entry : answer.top_k()) {
        AppendBytesElement(entry.label(), raw);
      }
    } else if (name == kScoresOutput) {
      output->set_datatype("FP32");
      output->add_shape(answer.top_k_size());
      for (const vidclf::v1::LabelScore& entry : answer.top_k()) AppendFp32(entry.score(), raw);
    } else {
      output->set_datatype("FP32");
      output->add_shape(answer.frame_timestamps_seconds_size());
      for (double seconds : answer.frame_timestamps_seconds()) {
        AppendFp32(static_cast<float>(seconds), raw);
      }
    }
  }
  const vidclf::v1::StageTimings& timings = answer.timings();
  SetDoubleParameter("decode_ms", timings.decode_ms(), &response);
  SetDoubleParameter("preprocess_ms", timings.preprocess_ms(), &response);
  SetDoubleParameter("embed_ms", timings.embed_ms(), &response);
  SetDoubleParameter("head_ms", timings.head_ms(), &response);
  SetDoubleParameter("queue_ms", timings.queue_ms(), &response);
  SetDoubleParameter("total_ms", timings.total_ms(), &response);
  return response;
}

void AddTensorMetadata(inference::ModelMetadataResponse* metadata) {
  auto describe = [](const auto& specs, auto* tensors) {
    for (const TensorSpec& spec : specs) {
      inference::ModelMetadataResponse::TensorMetadata* tensor = tensors->Add();
      tensor->set_name(spec.name);
      tensor->set_datatype(spec.datatype);
      tensor->add_shape(spec.size);
    }
  };
  describe(kInputs, metadata->mutable_inputs());
  describe(kOutputs, metadata->mutable_outputs());
}

void AddTensorConfig(inference::ModelConfig* config) {
  for (const TensorSpec& spec : kInputs) {
    inference::ModelInput* input = config->add_input();
    input->set_name(spec.name);
    input->set_data_type(spec.type);
    input->add_dims(spec.size);
    input->set_optional(true);  // one of the two
  }
  for (const TensorSpec& spec : kOutputs) {
    inference::ModelOutput* output = config->add_output();
    output->set_name(spec.name);
    output->set_data_type(spec.type);
    output->add_dims(spec.size);
  }
}

}  // namespace vidclf::service
