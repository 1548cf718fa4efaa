#include "server/service/model_info.h"

#include "common/json_text.h"
#include "model/model_config.h"

namespace vidclf::service {

vidclf::v1::ModelInfo ModelInfoOf(const engine::ModelRepository::Entry& entry,
                                  const std::string& default_model) {
  const model::VideoModel& model = *entry.model;
  const model::ModelConfig& config = model.config();
  // model.json's own spelling of the head's options, so that the two never disagree.
  nlohmann::json head = model::ModelConfigToJson(config)["head"];
  head.erase("type");

  vidclf::v1::ModelInfo info;
  info.set_name(config.name);
  info.set_version(config.version);
  for (const std::string& version : entry.versions) info.add_versions(version);
  for (const std::string& label : config.labels) info.add_labels(label);
  vidclf::v1::ModelInput* input = info.mutable_input();
  input->set_num_frames(config.input.num_frames);
  input->set_resize_shorter_side(config.input.resize_shorter_side);
  input->set_crop_size(config.input.crop_size);
  for (float mean : config.input.mean) input->add_mean(mean);
  for (float std : config.input.std) input->add_std(std);
  input->set_default_sampling("uniform");
  info.set_backbone(config.backbone);
  info.set_head(model::HeadTypeName(config.head));
  if (config.head == model::HeadType::kTransformer) {
    info.set_attention(config.transformer.attention.type);
    info.set_attention_options_json(JsonText(head["attention"]));
    for (const std::string& type : config.transformer.attention_substitutions) {
      info.add_attention_substitutions(type);
    }
    head.erase("attention");
    head.erase("attention_substitutions");
  }
  info.set_head_options_json(JsonText(head));
  vidclf::v1::ModelStreaming* streaming = info.mutable_streaming();
  if (model.has_recurrent_step()) {
    streaming->set_mode("recurrent");
  } else {
    streaming->set_mode("sliding_window");
    streaming->set_window_frames(static_cast<uint32_t>(config.streaming.window_frames));
    streaming->set_stride_frames(static_cast<uint32_t>(config.streaming.stride_frames));
  }
  if (config.segmentation.has_value()) {
    info.mutable_segmentation()->set_frames_per_second(config.segmentation->frames_per_second);
  }
  info.set_is_default(config.name == default_model);
  info.set_provenance_json(JsonText(config.provenance));
  info.set_metrics_json(JsonText(config.metrics));
  return info;
}

}  // namespace vidclf::service
