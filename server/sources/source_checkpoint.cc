#include "server/sources/source_checkpoint.h"

#include <nlohmann/json.hpp>

#include "model/heads/head_state_codec.h"

namespace vidclf::sources {
namespace {

constexpr int kVersion = 1;

}  // namespace

std::string EncodeCheckpoint(const engine::StreamCheckpoint& checkpoint, absl::Time taken) {
  const nlohmann::json header = {{"version", kVersion},
                                 {"fingerprint", checkpoint.fingerprint},
                                 {"frames_stepped", checkpoint.frames_stepped},
                                 {"next_frame_index", checkpoint.next_frame_index},
                                 {"next_frame_seconds", checkpoint.next_frame_seconds},
                                 {"taken_unix_nanos", absl::ToUnixNanos(taken)}};
  return header.dump() + "\n" + model::EncodeHeadState(checkpoint.head_state);
}

absl::StatusOr<SavedCheckpoint> DecodeCheckpoint(absl::string_view bytes,
                                                 const torch::Device& device) {
  const size_t newline = bytes.find('\n');
  if (newline == absl::string_view::npos) {
    return absl::InvalidArgumentError("the checkpoint has no header");
  }
  const nlohmann::json header =
      nlohmann::json::parse(bytes.substr(0, newline), nullptr, /*allow_exceptions=*/false);
  if (!header.is_object() || header.value("version", 0) != kVersion) {
    return absl::InvalidArgumentError("the checkpoint is of another version");
  }
  SavedCheckpoint saved;
  try {
    saved.checkpoint.fingerprint = header.at("fingerprint").get<std::string>();
    saved.checkpoint.frames_stepped = header.at("frames_stepped").get<int64_t>();
    saved.checkpoint.next_frame_index = header.at("next_frame_index").get<int64_t>();
    saved.checkpoint.next_frame_seconds = header.at("next_frame_seconds").get<double>();
    saved.taken = absl::FromUnixNanos(header.at("taken_unix_nanos").get<int64_t>());
  } catch (const nlohmann::json::exception& error) {
    return absl::InvalidArgumentError("the checkpoint's header is incomplete");
  }
  absl::StatusOr<model::HeadState> state =
      model::DecodeHeadState(bytes.substr(newline + 1), device);
  if (!state.ok()) return state.status();
  saved.checkpoint.head_state = *std::move(state);
  return saved;
}

}  // namespace vidclf::sources
