#include "server/sources/source_checkpoint.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/json_text.h"
#include "model/heads/head_state_codec.h"

namespace vidclf::sources {
namespace {

constexpr int kVersion = 1;

}  // namespace

std::string EncodeCheckpoint(const engine::StreamCheckpoint& checkpoint,
                             const SourceCounters& counters, const std::vector<std::string>& labels,
                             absl::Time taken) {
  nlohmann::json open_segments = nlohmann::json::array();
  for (const pipeline::SegmentTracker::OpenSegment& segment : checkpoint.open_segments) {
    open_segments.push_back(
        {{"label", segment.label},
         {"announced", segment.announced},
         {"start", segment.start},
         {"last_held", segment.last_held},
         {"weighted_score", segment.weighted_score},
         {"held_seconds", segment.held_seconds},
         {"peak", segment.peak},
         {"name", segment.label >= 0 && segment.label < static_cast<int>(labels.size())
                      ? labels[static_cast<size_t>(segment.label)]
                      : ""}});
  }
  const nlohmann::json header = {{"version", kVersion},
                                 {"fingerprint", checkpoint.fingerprint},
                                 {"frames_stepped", checkpoint.frames_stepped},
                                 {"next_frame_index", checkpoint.next_frame_index},
                                 {"next_frame_seconds", checkpoint.next_frame_seconds},
                                 {"open_segments", std::move(open_segments)},
                                 {"frames", counters.frames},
                                 {"reconnects", counters.reconnects},
                                 {"taken_unix_nanos", absl::ToUnixNanos(taken)}};
  return JsonText(header) + "\n" + model::EncodeHeadState(checkpoint.head_state);
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
    // Checkpoints written before these fields were kept have none.
    saved.counters.frames = std::max<int64_t>(0, header.value("frames", int64_t{0}));
    saved.counters.reconnects = std::max<int64_t>(0, header.value("reconnects", int64_t{0}));
    for (const nlohmann::json& segment : header.value("open_segments", nlohmann::json::array())) {
      saved.checkpoint.open_segments.push_back(
          {segment.at("label").get<int>(), segment.at("announced").get<bool>(),
           segment.at("start").get<double>(), segment.at("last_held").get<double>(),
           segment.at("weighted_score").get<double>(), segment.at("held_seconds").get<double>(),
           segment.at("peak").get<float>()});
      saved.open_segment_labels.push_back(segment.value("name", ""));
    }
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
