#include "pipeline/segment_tracker.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace vidclf::pipeline {

absl::Status CheckSegmentOptions(const SegmentOptions& options) {
  if (!std::isfinite(options.enter_score) || options.enter_score <= 0 || options.enter_score > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the segment threshold ", options.enter_score, " is not in (0, 1]"));
  }
  if (!std::isfinite(options.hysteresis) || options.hysteresis < 0 ||
      options.hysteresis >= options.enter_score) {
    return absl::InvalidArgumentError(absl::StrCat("the hysteresis ", options.hysteresis,
                                                   " is not in [0, the threshold ",
                                                   options.enter_score, ")"));
  }
  for (const auto& [name, seconds] :
       {std::pair<const char*, double>{"minimum segment length", options.min_seconds},
        {"largest gap bridged", options.max_gap_seconds}}) {
    if (!std::isfinite(seconds) || seconds < 0 || seconds > 86400) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", name, " of ", seconds, " s is not in [0, 86400]"));
    }
  }
  return absl::OkStatus();
}

SegmentTracker::SegmentTracker(int num_labels, const SegmentOptions& options)
    : options_(options), labels_(static_cast<size_t>(std::max(num_labels, 0))) {}

Segment SegmentTracker::SegmentOf(int label, const LabelState& state) const {
  return EndOf({label, state.announced, state.start, state.last_held, state.weighted_score,
                state.held_seconds, state.peak});
}

Segment SegmentTracker::EndOf(const OpenSegment& open) {
  Segment segment;
  segment.label = open.label;
  segment.start_seconds = open.start;
  segment.end_seconds = open.last_held;
  segment.mean_score = open.held_seconds > 0
                           ? static_cast<float>(open.weighted_score / open.held_seconds)
                           : open.peak;
  segment.peak_score = open.peak;
  return segment;
}

std::vector<SegmentEvent> SegmentTracker::Add(double start_seconds, double end_seconds,
                                              absl::Span<const float> scores) {
  std::vector<SegmentEvent> starts;
  std::vector<SegmentEvent> ends;
  const float staying = options_.enter_score - options_.hysteresis;
  const double length = std::max(end_seconds - start_seconds, 0.0);
  for (size_t label = 0; label < labels_.size() && label < scores.size(); ++label) {
    LabelState& state = labels_[label];
    const float score = scores[label];
    // A segment ends at its last held span once a dip (or a hole between spans) outlasts the
    // bridge.
    auto end_if_past_bridge = [&](double dip_end) {
      if (dip_end - state.last_held <= options_.max_gap_seconds) return;
      if (state.announced) {
        ends.push_back({SegmentEvent::Kind::kEnd, SegmentOf(static_cast<int>(label), state)});
      }
      state = LabelState{};
    };
    if (state.open) end_if_past_bridge(start_seconds);
    if (!state.open) {
      if (score < options_.enter_score) continue;
      state = LabelState{};
      state.open = true;
      state.start = start_seconds;
    } else if (score < staying) {
      end_if_past_bridge(end_seconds);
      continue;
    }
    state.last_held = end_seconds;
    state.weighted_score += static_cast<double>(score) * length;
    state.held_seconds += length;
    state.peak = std::max(state.peak, score);
    if (!state.announced && state.last_held - state.start >= options_.min_seconds) {
      state.announced = true;
      starts.push_back({SegmentEvent::Kind::kStart, SegmentOf(static_cast<int>(label), state)});
    }
  }
  ends.insert(ends.end(), starts.begin(), starts.end());
  return ends;
}

std::vector<SegmentEvent> SegmentTracker::Finish() {
  std::vector<SegmentEvent> ends;
  for (size_t label = 0; label < labels_.size(); ++label) {
    LabelState& state = labels_[label];
    if (state.open && state.announced) {
      ends.push_back({SegmentEvent::Kind::kEnd, SegmentOf(static_cast<int>(label), state)});
    }
    state = LabelState{};
  }
  return ends;
}

std::vector<SegmentTracker::OpenSegment> SegmentTracker::Open() const {
  std::vector<OpenSegment> open;
  for (size_t label = 0; label < labels_.size(); ++label) {
    const LabelState& state = labels_[label];
    if (!state.open) continue;
    open.push_back({static_cast<int>(label), state.announced, state.start, state.last_held,
                    state.weighted_score, state.held_seconds, state.peak});
  }
  return open;
}

absl::Status SegmentTracker::Restore(absl::Span<const OpenSegment> open) {
  std::vector<LabelState> labels(labels_.size());
  for (const OpenSegment& segment : open) {
    if (segment.label < 0 || static_cast<size_t>(segment.label) >= labels.size() ||
        labels[static_cast<size_t>(segment.label)].open) {
      return absl::InvalidArgumentError(
          absl::StrCat("an open segment's label ", segment.label, " is out of range or repeated"));
    }
    for (const double value : {segment.start, segment.last_held, segment.weighted_score,
                               segment.held_seconds, static_cast<double>(segment.peak)}) {
      if (!std::isfinite(value)) {
        return absl::InvalidArgumentError("an open segment's times or scores are not finite");
      }
    }
    labels[static_cast<size_t>(segment.label)] = {true,
                                                  segment.announced,
                                                  segment.start,
                                                  segment.last_held,
                                                  segment.weighted_score,
                                                  segment.held_seconds,
                                                  segment.peak};
  }
  labels_ = std::move(labels);
  return absl::OkStatus();
}

}  // namespace vidclf::pipeline
