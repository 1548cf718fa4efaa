#include "server/http/infer_json.h"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/json_text.h"
#include "common/tensor_bytes.h"
#include "media/quoted_text.h"

namespace vidclf::http {
namespace {

using nlohmann::json;

// Objects and arrays within one another: a request needs a few, a tensor's data one per
// dimension.
constexpr int kMaxJsonDepth = 32;

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("the infer request's JSON: ", what));
}

// A JSON value as a request parameter.
absl::StatusOr<inference::InferParameter> ParameterOf(const std::string& name, const json& value) {
  inference::InferParameter parameter;
  if (value.is_boolean()) {
    parameter.set_bool_param(value.get<bool>());
  } else if (value.is_number_integer()) {
    parameter.set_int64_param(value.get<int64_t>());
  } else if (value.is_number()) {
    parameter.set_double_param(value.get<double>());
  } else if (value.is_string()) {
    parameter.set_string_param(value.get<std::string>());
  } else {
    return Malformed(absl::StrCat("parameter ", name, " is not a boolean, number or string"));
  }
  return parameter;
}

// The elements of a tensor's "data", nested arrays flattened, into `contents`: strings for
// BYTES, integers for the others.
absl::Status AddData(const json& data, const std::string& input,
                     inference::InferTensorContents* contents) {
  if (data.is_array()) {
    for (const json& element : data) {
      if (absl::Status status = AddData(element, input, contents); !status.ok()) return status;
    }
    return absl::OkStatus();
  }
  if (data.is_string()) {
    contents->add_bytes_contents(data.get<std::string>());
  } else if (data.is_number_unsigned() && data.get<uint64_t>() <= UINT32_MAX) {
    contents->add_uint_contents(static_cast<uint32_t>(data.get<uint64_t>()));
  } else {
    return Malformed(absl::StrCat("input ", input,
                                  "'s data holds an element that is neither a string nor an "
                                  "unsigned integer"));
  }
  return absl::OkStatus();
}

// A BYTES output's elements, or an FP32 output's, from their raw contents.
json RawToJson(const std::string& datatype, const std::string& raw) {
  if (datatype == "BYTES") return BytesElements(raw);
  return Fp32Elements(raw);
}

json ParameterToJson(const inference::InferParameter& parameter) {
  switch (parameter.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam:
      return parameter.bool_param();
    case inference::InferParameter::kInt64Param:
      return parameter.int64_param();
    case inference::InferParameter::kDoubleParam:
      return parameter.double_param();
    case inference::InferParameter::kUint64Param:
      return parameter.uint64_param();
    default:
      return parameter.string_param();
  }
}

}  // namespace

absl::StatusOr<JsonInferRequest> ParseJsonInferRequest(absl::string_view body,
                                                       int64_t json_length) {
  if (json_length > static_cast<int64_t>(body.size())) {
    return absl::InvalidArgumentError(absl::StrCat("Inference-Header-Content-Length is ",
                                                   json_length, " but the body holds ", body.size(),
                                                   " bytes"));
  }
  const absl::string_view text = json_length < 0 ? body : body.substr(0, json_length);
  absl::string_view binary = json_length < 0 ? absl::string_view() : body.substr(json_length);
  // Arrays nested deeper than a tensor's shape could need are refused as they are read: what
  // walks the request recurses, and a body of a million '[' would end the process.
  bool too_deep = false;
  const json parsed = json::parse(
      text.begin(), text.end(),
      [&too_deep](int depth, json::parse_event_t, json&) {
        too_deep = too_deep || depth > kMaxJsonDepth;
        return !too_deep;
      },
      /*allow_exceptions=*/false);
  if (too_deep) {
    return Malformed(
        absl::StrCat("arrays and objects nest deeper than ", kMaxJsonDepth, " levels"));
  }
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Malformed(
        "the body (or its first Inference-Header-Content-Length bytes) is not a "
        "JSON object");
  }
  JsonInferRequest result;
  inference::ModelInferRequest& request = result.request;
  if (parsed.contains("id")) {
    if (!parsed["id"].is_string()) return Malformed("id is not a string");
    request.set_id(parsed["id"].get<std::string>());
  }
  if (parsed.contains("parameters")) {
    if (!parsed["parameters"].is_object()) return Malformed("parameters is not an object");
    for (const auto& [name, value] : parsed["parameters"].items()) {
      if (name == "binary_data_output") {
        if (!value.is_boolean()) return Malformed("binary_data_output is not a boolean");
        result.all_outputs_binary = value.get<bool>();
        continue;
      }
      absl::StatusOr<inference::InferParameter> parameter = ParameterOf(name, value);
      if (!parameter.ok()) return parameter.status();
      (*request.mutable_parameters())[name] = *std::move(parameter);
    }
  }
  if (!parsed.contains("inputs") || !parsed["inputs"].is_array()) {
    return Malformed("inputs, an array, is missing");
  }
  for (const json& input : parsed["inputs"]) {
    if (!input.is_object() || !input.contains("name") || !input["name"].is_string() ||
        !input.contains("datatype") || !input["datatype"].is_string() || !input.contains("shape") ||
        !input["shape"].is_array()) {
      return Malformed("each input needs a name, a datatype and a shape");
    }
    inference::ModelInferRequest::InferInputTensor* tensor = request.add_inputs();
    tensor->set_name(input["name"].get<std::string>());
    tensor->set_datatype(input["datatype"].get<std::string>());
    for (const json& dim : input["shape"]) {
      if (!dim.is_number_integer()) return Malformed("a shape holds a non-integer");
      tensor->add_shape(dim.get<int64_t>());
    }
    const json parameters = input.value("parameters", json::object());
    if (!parameters.is_object()) {
      return Malformed(absl::StrCat("the parameters of input ", media::QuoteInput(tensor->name()),
                                    " are not an object"));
    }
    if (parameters.contains("binary_data_size")) {
      const json& size = parameters["binary_data_size"];
      if (!size.is_number_unsigned() || size.get<uint64_t>() > binary.size()) {
        return Malformed(absl::StrCat("input ", tensor->name(),
                                      "'s binary_data_size is not a size within the ",
                                      binary.size(), " bytes after the JSON"));
      }
      request.add_raw_input_contents(std::string(binary.substr(0, size.get<uint64_t>())));
      binary.remove_prefix(size.get<uint64_t>());
    } else if (input.contains("data")) {
      if (absl::Status status = AddData(input["data"], tensor->name(), tensor->mutable_contents());
          !status.ok()) {
        return status;
      }
    } else {
      return Malformed(
          absl::StrCat("input ", tensor->name(), " has neither data nor a binary_data_size"));
    }
  }
  if (!binary.empty()) {
    return Malformed(absl::StrCat(binary.size(), " bytes after the JSON belong to no input"));
  }
  if (parsed.contains("outputs")) {
    if (!parsed["outputs"].is_array()) return Malformed("outputs is not an array");
    for (const json& output : parsed["outputs"]) {
      if (!output.is_object() || !output.contains("name") || !output["name"].is_string()) {
        return Malformed("each output needs a name");
      }
      const std::string name = output["name"].get<std::string>();
      request.add_outputs()->set_name(name);
      const json parameters = output.value("parameters", json::object());
      if (!parameters.is_object()) {
        return Malformed(absl::StrCat("the parameters of output ", media::QuoteInput(name),
                                      " are not an object"));
      }
      const json binary_data = parameters.value("binary_data", json(false));
      if (!binary_data.is_boolean()) {
        return Malformed(
            absl::StrCat("binary_data of output ", media::QuoteInput(name), " is not a boolean"));
      }
      if (binary_data.get<bool>()) result.binary_outputs.insert(name);
    }
  }
  return result;
}

HttpResponse JsonInferResponse(const inference::ModelInferResponse& response,
                               const JsonInferRequest& asked) {
  json answer = {{"model_name", response.model_name()},
                 {"model_version", response.model_version()},
                 {"outputs", json::array()}};
  if (!response.id().empty()) answer["id"] = response.id();
  json parameters = json::object();
  for (const auto& [name, value] : response.parameters()) parameters[name] = ParameterToJson(value);
  answer["parameters"] = parameters;
  std::string binary;
  for (int i = 0; i < response.outputs_size() && i < response.raw_output_contents_size(); ++i) {
    const auto& output = response.outputs(i);
    const std::string& raw = response.raw_output_contents(i);
    json tensor = {
        {"name", output.name()},
        {"datatype", output.datatype()},
        {"shape", json(std::vector<int64_t>(output.shape().begin(), output.shape().end()))}};
    if (asked.all_outputs_binary || asked.binary_outputs.count(output.name()) > 0) {
      tensor["parameters"] = {{"binary_data_size", raw.size()}};
      binary += raw;
    } else {
      tensor["data"] = RawToJson(output.datatype(), raw);
    }
    answer["outputs"].push_back(std::move(tensor));
  }
  HttpResponse http;
  http.body = JsonText(answer);
  if (!binary.empty()) {
    http.headers.emplace_back("Inference-Header-Content-Length", std::to_string(http.body.size()));
    http.content_type = "application/octet-stream";
    http.body += binary;
  }
  return http;
}

}  // namespace vidclf::http
