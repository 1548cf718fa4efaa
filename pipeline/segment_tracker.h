// Segments of a timeline from scores over time: what happened when. For each label on its own, a
// segment opens where the label's score reaches `enter_score`, stays open while the score stays
// at or above `enter_score - hysteresis`, bridges dips below that shorter than
// `max_gap_seconds`, and counts once it has lasted `min_seconds`. Fed span by span in time
// order, the tracker says when each segment starts and ends as soon as that is known, so that one
// tracker serves a whole recording (every segment at its end) and a live feed (start and end
// events as they happen) alike, in memory that does not grow with the timeline.
#ifndef VIDCLF_PIPELINE_SEGMENT_TRACKER_H_
#define VIDCLF_PIPELINE_SEGMENT_TRACKER_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace vidclf::pipeline {

struct SegmentOptions {
  float enter_score = 0.5f;
  // A segment stays open while its label's score is at least enter_score - hysteresis, so that
  // scores hovering about the threshold do not cut it into pieces.
  float hysteresis = 0.1f;
  // Shorter segments are dropped (and never announced).
  double min_seconds = 1.0;
  // Dips below the staying score at most this long are bridged: the segment goes on.
  double max_gap_seconds = 0.5;
};

// Why `options` cannot be used, naming the field.
absl::Status CheckSegmentOptions(const SegmentOptions& options);

struct Segment {
  int label = 0;
  double start_seconds = 0;
  double end_seconds = 0;
  // Over the spans the segment held at or above its staying score, weighted by their lengths.
  float mean_score = 0;
  float peak_score = 0;
};

struct SegmentEvent {
  enum class Kind { kStart, kEnd };
  Kind kind = Kind::kStart;
  // At kStart, the segment so far (it has lasted min_seconds); at kEnd, the whole segment.
  Segment segment;
};

class SegmentTracker {
 public:
  // Labels are 0 .. num_labels - 1; `options` must pass CheckSegmentOptions.
  SegmentTracker(int num_labels, const SegmentOptions& options);

  // The scores of every label over [start_seconds, end_seconds). Spans come in time order
  // without overlapping; a span that leaves a hole after the previous one counts the hole as a
  // dip. Returns the events the span settles, ends first (they lie before it).
  std::vector<SegmentEvent> Add(double start_seconds, double end_seconds,
                                absl::Span<const float> scores);

  // The timeline has ended: the open segments that lasted min_seconds end where their label was
  // last above its staying score.
  std::vector<SegmentEvent> Finish();

  // A label's segment in progress: what a checkpoint keeps so that a timeline can go on in
  // another tracker (a registered source across a restart) without announcing it again.
  struct OpenSegment {
    int label = 0;
    bool announced = false;  // its kStart has been returned
    double start = 0;
    double last_held = 0;  // end of the last span at or above the staying score
    double weighted_score = 0;
    double held_seconds = 0;
    float peak = 0;
  };
  std::vector<OpenSegment> Open() const;
  // The segment `open` is, ended where it last held: how a stream that cannot go on from a
  // checkpoint ends the segments it had announced.
  static Segment EndOf(const OpenSegment& open);
  // Takes over segments Open() returned, as though the spans that opened them had been added
  // here; INVALID_ARGUMENT for a label out of range or twice, or values that are not finite.
  absl::Status Restore(absl::Span<const OpenSegment> open);

 private:
  struct LabelState {
    bool open = false;
    bool announced = false;
    double start = 0;
    double last_held = 0;
    double weighted_score = 0;
    double held_seconds = 0;
    float peak = 0;
  };

  Segment SegmentOf(int label, const LabelState& state) const;

  const SegmentOptions options_;
  std::vector<LabelState> labels_;
};

}  // namespace vidclf::pipeline

#endif  // VIDCLF_PIPELINE_SEGMENT_TRACKER_H_
