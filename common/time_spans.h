// The time covered by spans that may overlap, such as batches that ran side by side.
#ifndef VIDCLF_COMMON_TIME_SPANS_H_
#define VIDCLF_COMMON_TIME_SPANS_H_

#include <algorithm>
#include <vector>

#include "absl/time/time.h"

namespace vidclf {

// [start, end); one that ends before it starts covers nothing.
struct TimeSpan {
  absl::Time start;
  absl::Time end;
};

// The length of the spans' union: time covered by two spans at once counts once.
inline absl::Duration CoveredTime(std::vector<TimeSpan> spans) {
  std::sort(spans.begin(), spans.end(),
            [](const TimeSpan& a, const TimeSpan& b) { return a.start < b.start; });
  absl::Duration covered;
  absl::Time covered_until = absl::InfinitePast();
  for (const TimeSpan& span : spans) {
    const absl::Time from = std::max(span.start, covered_until);
    if (span.end > from) covered += span.end - from;
    covered_until = std::max(covered_until, span.end);
  }
  return covered;
}

}  // namespace vidclf

#endif  // VIDCLF_COMMON_TIME_SPANS_H_
