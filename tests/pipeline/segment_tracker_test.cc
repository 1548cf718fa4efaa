#include "pipeline/segment_tracker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vidclf::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

// One second per span, two labels; `first` and `second` are their scores span by span.
struct Timeline {
  std::vector<float> first;
  std::vector<float> second;
};

// Every event of `timeline`, as "start|end label from-to" with times in seconds.
// With `handover` >= 0, before that span the open segments move to a new tracker (Open, Restore),
// as a registered source's do across a restart.
std::vector<std::string> Events(const Timeline& timeline, const SegmentOptions& options,
                                std::vector<Segment>* ended = nullptr, int handover = -1) {
  std::optional<SegmentTracker> tracker(std::in_place, 2, options);
  std::vector<std::string> out;
  auto note = [&](const std::vector<SegmentEvent>& events) {
    for (const SegmentEvent& event : events) {
      const bool start = event.kind == SegmentEvent::Kind::kStart;
      out.push_back(std::string(start ? "start " : "end ") + std::to_string(event.segment.label) +
                    " " + std::to_string(static_cast<int>(event.segment.start_seconds)) + "-" +
                    std::to_string(static_cast<int>(event.segment.end_seconds)));
      if (!start && ended != nullptr) ended->push_back(event.segment);
    }
  };
  for (size_t i = 0; i < timeline.first.size(); ++i) {
    if (static_cast<int>(i) == handover) {
      const std::vector<SegmentTracker::OpenSegment> open = tracker->Open();
      tracker.emplace(2, options);
      EXPECT_TRUE(tracker->Restore(open).ok());
    }
    const float scores[] = {timeline.first[i], timeline.second[i]};
    note(tracker->Add(static_cast<double>(i), static_cast<double>(i + 1), scores));
  }
  note(tracker->Finish());
  return out;
}

SegmentOptions Options(double min_seconds, double max_gap_seconds) {
  SegmentOptions options;
  options.enter_score = 0.5f;
  options.hysteresis = 0.2f;
  options.min_seconds = min_seconds;
  options.max_gap_seconds = max_gap_seconds;
  return options;
}

TEST(SegmentTracker, OpensAtTheThresholdAndHoldsThroughTheHysteresis) {
  // Label 0 enters at 2 s, hovers between 0.3 and 0.5 (held), drops at 6 s.
  const Timeline timeline{{0.1f, 0.4f, 0.6f, 0.35f, 0.45f, 0.7f, 0.1f, 0.1f},
                          {0, 0, 0, 0, 0, 0, 0, 0}};
  std::vector<Segment> ended;
  EXPECT_THAT(Events(timeline, Options(1, 0), &ended), ElementsAre("start 0 2-3", "end 0 2-6"));
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_THAT(ended[0].peak_score, FloatNear(0.7f, 1e-6));
  EXPECT_THAT(ended[0].mean_score, FloatNear((0.6f + 0.35f + 0.45f + 0.7f) / 4, 1e-6));
}

TEST(SegmentTracker, DropsWhatIsShorterThanTheMinimumAndNeverAnnouncesIt) {
  const Timeline timeline{{0.9f, 0.9f, 0.1f, 0.9f, 0.9f, 0.9f, 0.1f}, {0, 0, 0, 0, 0, 0, 0}};
  EXPECT_THAT(Events(timeline, Options(3, 0)), ElementsAre("start 0 3-6", "end 0 3-6"));
}

TEST(SegmentTracker, BridgesGapsUpToTheBound) {
  // Dips of 1 s and 2 s: a 1 s bridge keeps the first, not the second.
  const Timeline timeline{{0.9f, 0.9f, 0.0f, 0.9f, 0.0f, 0.0f, 0.9f, 0.9f},
                          {0, 0, 0, 0, 0, 0, 0, 0}};
  EXPECT_THAT(Events(timeline, Options(1, 1)),
              ElementsAre("start 0 0-1", "end 0 0-4", "start 0 6-7", "end 0 6-8"));
  // A hole between spans counts as a dip.
  SegmentTracker tracker(1, Options(1, 1));
  const float high[] = {0.9f};
  EXPECT_EQ(tracker.Add(0, 1, high).size(), 1u);  // starts
  const std::vector<SegmentEvent> after_hole = tracker.Add(3, 4, high);
  ASSERT_EQ(after_hole.size(), 2u);
  EXPECT_EQ(after_hole[0].kind, SegmentEvent::Kind::kEnd);
  EXPECT_EQ(after_hole[0].segment.end_seconds, 1);
  EXPECT_EQ(after_hole[1].kind, SegmentEvent::Kind::kStart);
  EXPECT_EQ(after_hole[1].segment.start_seconds, 3);
}

TEST(SegmentTracker, FollowsEachLabelOnItsOwnAndEndsBeforeStarting) {
  const Timeline timeline{{0.9f, 0.9f, 0.1f, 0.1f}, {0.1f, 0.1f, 0.9f, 0.9f}};
  EXPECT_THAT(Events(timeline, Options(1, 0)),
              ElementsAre("start 0 0-1", "end 0 0-2", "start 1 2-3", "end 1 2-4"));
}

TEST(SegmentTracker, AHundredThousandSpansGiveASegmentPerBurst) {
  SegmentTracker tracker(3, Options(1, 0));
  size_t events = 0;
  for (int i = 0; i < 100000; ++i) {
    const float scores[] = {i % 10 >= 5 ? 0.9f : 0.0f, 0.0f, 0.0f};
    events += tracker.Add(i, i + 1, scores).size();
  }
  EXPECT_EQ(events, 2u * 10000 - 1);  // the last segment is still open
  EXPECT_EQ(tracker.Finish().size(), 1u);
}

TEST(SegmentTracker, OpenSegmentsGoOnInAnotherTrackerAsInOne) {
  // Two labels overlapping, a bridged dip, a segment too short to announce: handed over before
  // every span, the events are those of one tracker, and nothing is announced twice.
  const Timeline timeline{{0.1f, 0.6f, 0.7f, 0.2f, 0.8f, 0.9f, 0.1f, 0.1f, 0.6f, 0.1f},
                          {0.7f, 0.8f, 0.9f, 0.9f, 0.2f, 0.1f, 0.6f, 0.7f, 0.8f, 0.1f}};
  const SegmentOptions options = Options(/*min_seconds=*/2, /*max_gap_seconds=*/1);
  std::vector<Segment> whole;
  const std::vector<std::string> expected = Events(timeline, options, &whole);
  ASSERT_FALSE(expected.empty());
  for (int handover = 0; handover <= static_cast<int>(timeline.first.size()); ++handover) {
    std::vector<Segment> ended;
    EXPECT_EQ(Events(timeline, options, &ended, handover), expected) << "handover " << handover;
    ASSERT_EQ(ended.size(), whole.size());
    for (size_t i = 0; i < ended.size(); ++i) {
      EXPECT_THAT(ended[i].mean_score, FloatNear(whole[i].mean_score, 1e-6));
      EXPECT_THAT(ended[i].peak_score, FloatNear(whole[i].peak_score, 1e-6));
    }
  }
}

TEST(SegmentTracker, RestoreRefusesWhatNoTrackerOpened) {
  SegmentTracker tracker(2, Options(1, 0));
  const SegmentTracker::OpenSegment label_out_of_range{/*label=*/2};
  EXPECT_THAT(tracker.Restore({label_out_of_range}).message(), HasSubstr("out of range"));
  const SegmentTracker::OpenSegment first{/*label=*/0};
  EXPECT_THAT(tracker.Restore({first, first}).message(), HasSubstr("repeated"));
  SegmentTracker::OpenSegment not_finite{/*label=*/1};
  not_finite.start = std::nan("");
  EXPECT_THAT(tracker.Restore({not_finite}).message(), HasSubstr("not finite"));
  EXPECT_TRUE(tracker.Open().empty());
}

TEST(SegmentTracker, OptionsAreChecked) {
  SegmentOptions options;
  EXPECT_TRUE(CheckSegmentOptions(options).ok());
  options.hysteresis = 0.6f;
  EXPECT_THAT(CheckSegmentOptions(options).message(), HasSubstr("hysteresis"));
  options = SegmentOptions{};
  options.enter_score = 0;
  EXPECT_THAT(CheckSegmentOptions(options).message(), HasSubstr("threshold"));
  options = SegmentOptions{};
  options.max_gap_seconds = -1;
  EXPECT_THAT(CheckSegmentOptions(options).message(), HasSubstr("largest gap bridged"));
}

}  // namespace
}  // namespace vidclf::pipeline
