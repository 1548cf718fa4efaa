// The timeline of a ClassifySegments call as a PNG: the windows' scores of each label over time
// above, the segments as bars below, one row per label.
#ifndef VIDCLF_CLIENT_SEGMENTS_PLOT_H_
#define VIDCLF_CLIENT_SEGMENTS_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "vidclf/v1/video_classifier.pb.h"

namespace vidclf::client {

// Draws `windows` (each at its middle time, the labels of its top-k) and `segments`
// (SEGMENT_END events) into `path`; INTERNAL when the file cannot be written. Built with cairo, in
// builds with VIDCLF_TRAINING (which needs it too).
absl::Status DrawSegmentsPng(const std::vector<vidclf::v1::SegmentWindow>& windows,
                             const std::vector<vidclf::v1::SegmentEvent>& segments,
                             const std::string& title, const std::string& path);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_SEGMENTS_PLOT_H_
