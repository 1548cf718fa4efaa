#include "train/segment_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/json_text.h"

namespace vidclf::train {
namespace {

using nlohmann::json;

absl::StatusOr<double> NumberField(const json& object, const char* name, const std::string& where) {
  const auto field = object.find(name);
  if (field == object.end() || !field->is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"", name, "\" must be a number"));
  }
  const double value = field->get<double>();
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"", name, "\" must be finite"));
  }
  return value;
}

absl::StatusOr<std::optional<double>> OptionalScore(const json& object, const char* name,
                                                    const std::string& where) {
  if (!object.contains(name)) return std::nullopt;
  absl::StatusOr<double> score = NumberField(object, name, where);
  if (!score.ok()) return score.status();
  if (*score < 0 || *score > 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"", name, "\" must be in [0, 1]"));
  }
  return *score;
}

absl::StatusOr<NamedSegment> ParseSegment(const json& object, const std::string& where) {
  if (!object.is_object()) return absl::InvalidArgumentError(where + " must be an object");
  NamedSegment segment;
  const auto label = object.find("label");
  if (label == object.end() || !label->is_string() || label->get<std::string>().empty()) {
    return absl::InvalidArgumentError(where + ": \"label\" must be a non-empty string");
  }
  segment.label = label->get<std::string>();
  absl::StatusOr<double> start = NumberField(object, "start_seconds", where);
  if (!start.ok()) return start.status();
  absl::StatusOr<double> end = NumberField(object, "end_seconds", where);
  if (!end.ok()) return end.status();
  if (*start < 0 || *end <= *start) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": needs 0 <= start_seconds < end_seconds; got ", *start, " and ", *end));
  }
  segment.start_seconds = *start;
  segment.end_seconds = *end;
  for (auto [name, score] : {std::pair{"mean_score", &segment.mean_score},
                             std::pair{"peak_score", &segment.peak_score}}) {
    absl::StatusOr<std::optional<double>> value = OptionalScore(object, name, where);
    if (!value.ok()) return value.status();
    *score = *value;
  }
  return segment;
}

constexpr char kFormats[] =
    "expected {\"videos\": [...]} (vidclf-train synth --timeline's truth.json), the JSON lines "
    "of `vidclf classify --from-list LIST --segments`, or those of `vidclf segments VIDEO --json`";

void SortByStart(std::vector<NamedSegment>& segments) {
  std::stable_sort(segments.begin(), segments.end(),
                   [](const NamedSegment& a, const NamedSegment& b) {
                     return a.start_seconds < b.start_seconds;
                   });
}

// A video's "segments" array, sorted by start.
absl::Status ReadSegments(const json& segments, const std::string& where,
                          std::vector<NamedSegment>* out) {
  for (size_t s = 0; s < segments.size(); ++s) {
    absl::StatusOr<NamedSegment> segment =
        ParseSegment(segments[s], absl::StrCat(where, " segments[", s, "]"));
    if (!segment.ok()) return segment.status();
    segment->position = static_cast<int>(s);
    out->push_back(*std::move(segment));
  }
  SortByStart(*out);
  return absl::OkStatus();
}

// JSON lines as the client writes them: `classify --from-list --segments` a line per video
// ({"source": ..., "code": "OK", "segments": [...]}), `segments --json` a line per segment of one
// video (and per window, which is skipped), whose name is left empty.
absl::StatusOr<std::vector<VideoSegments>> ParseJsonLines(const std::string& text) {
  std::vector<VideoSegments> videos;
  std::optional<VideoSegments> unnamed;
  std::set<std::string> names;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = absl::StrCat("line ", number);
    const json object = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded() || !object.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " is not a JSON object; ", kFormats));
    }
    if (object.contains("window")) continue;
    const auto source = object.find("source");
    if (source == object.end()) {
      if (!videos.empty()) {
        return absl::InvalidArgumentError(where + " has no \"source\", as the lines before it");
      }
      absl::StatusOr<NamedSegment> segment = ParseSegment(object, where);
      if (!segment.ok()) return segment.status();
      if (!unnamed) unnamed.emplace();
      segment->position = static_cast<int>(unnamed->segments.size());
      unnamed->segments.push_back(*std::move(segment));
      continue;
    }
    if (unnamed || !source->is_string() || source->get<std::string>().empty()) {
      return absl::InvalidArgumentError(
          where + ": \"source\" must be a non-empty string, on every line or on none");
    }
    VideoSegments& video = videos.emplace_back();
    video.video = source->get<std::string>();
    if (!names.insert(video.video).second) {
      return absl::InvalidArgumentError(absl::StrCat("video ", video.video, " is named twice"));
    }
    const std::string place = absl::StrCat(where, " (", video.video, ")");
    const auto segments = object.find("segments");
    if (segments == object.end() || !segments->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(
          place, " has no segments: classified without --segments, or it failed (code ",
          object.value("code", std::string("unknown")), ")"));
    }
    if (absl::Status status = ReadSegments(*segments, place, &video.segments); !status.ok()) {
      return status;
    }
  }
  if (unnamed) {
    SortByStart(unnamed->segments);
    videos.push_back(*std::move(unnamed));
  }
  if (videos.empty()) return absl::InvalidArgumentError(absl::StrCat("no segments; ", kFormats));
  return videos;
}

}  // namespace

absl::StatusOr<std::vector<VideoSegments>> ParseSegmentFile(const std::string& text) {
  const json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || (document.is_object() && !document.contains("videos"))) {
    return ParseJsonLines(text);
  }
  const auto videos = document.is_object() ? document.find("videos") : document.end();
  if (videos == document.end() || !videos->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("no \"videos\" array; ", kFormats));
  }
  std::vector<VideoSegments> parsed;
  std::set<std::string> names;
  for (size_t v = 0; v < videos->size(); ++v) {
    const json& object = (*videos)[v];
    std::string where = absl::StrCat("videos[", v, "]");
    const auto name = object.is_object() ? object.find("video") : object.end();
    if (name == object.end() || !name->is_string() || name->get<std::string>().empty()) {
      return absl::InvalidArgumentError(where + ": \"video\" must be a non-empty string");
    }
    VideoSegments& video = parsed.emplace_back();
    video.video = name->get<std::string>();
    if (!names.insert(video.video).second) {
      return absl::InvalidArgumentError(absl::StrCat("video ", video.video, " is named twice"));
    }
    where = absl::StrCat(where, " (", video.video, ")");
    if (object.contains("duration_seconds")) {
      absl::StatusOr<double> duration = NumberField(object, "duration_seconds", where);
      if (!duration.ok()) return duration.status();
      if (*duration <= 0) return absl::InvalidArgumentError(where + ": duration must be positive");
      video.duration_seconds = *duration;
    }
    const auto segments = object.find("segments");
    if (segments == object.end() || !segments->is_array()) {
      return absl::InvalidArgumentError(where + ": \"segments\" must be an array");
    }
    if (absl::Status status = ReadSegments(*segments, where, &video.segments); !status.ok()) {
      return status;
    }
  }
  return parsed;
}

absl::StatusOr<std::vector<VideoSegments>> ReadSegmentFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<std::vector<VideoSegments>> videos = ParseSegmentFile(text.str());
  if (!videos.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", videos.status().message()));
  }
  return videos;
}

std::string SegmentFileText(const std::vector<VideoSegments>& videos) {
  std::string text = "{\"videos\": [\n";
  for (size_t v = 0; v < videos.size(); ++v) {
    nlohmann::ordered_json video = {{"video", videos[v].video}};
    if (videos[v].duration_seconds) video["duration_seconds"] = *videos[v].duration_seconds;
    nlohmann::ordered_json segments = nlohmann::ordered_json::array();
    for (const NamedSegment& segment : videos[v].segments) {
      nlohmann::ordered_json object = {{"label", segment.label},
                                       {"start_seconds", segment.start_seconds},
                                       {"end_seconds", segment.end_seconds}};
      if (segment.mean_score) object["mean_score"] = *segment.mean_score;
      if (segment.peak_score) object["peak_score"] = *segment.peak_score;
      segments.push_back(std::move(object));
    }
    video["segments"] = std::move(segments);
    absl::StrAppend(&text, "  ", JsonText(video), v + 1 < videos.size() ? ",\n" : "\n");
  }
  return text + "]}\n";
}

}  // namespace vidclf::train
