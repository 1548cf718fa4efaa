#include "media/frame_table.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "media/frame_sampler.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
}

namespace vidclf::media {
namespace {

using Clock = DecodeClock;

// Whether the `count` frames read so far settle the sampling: a strategy with a frame count that
// they already fill, timed by `pts` (unsorted) when every frame has one, else by the frame rate,
// as FrameTimes times them. Uniform sampling needs the whole video.
bool SamplingSettled(int64_t count, std::vector<int64_t> pts, const AVStream& stream,
                     const SamplingOptions& sampling) {
  if (sampling.strategy == SamplingStrategy::kUniform || sampling.num_frames <= 0) return false;
  std::sort(pts.begin(), pts.end());
  FrameTable prefix;
  prefix.count = count;
  prefix.pts = std::move(pts);
  return static_cast<int64_t>(SampleFrameIndices(FrameTimes(prefix, stream), sampling).size()) >=
         sampling.num_frames;
}

// Lists the video stream's frames (moving its packets into `keep` when not null). Stops early,
// at the end of input or on a read error (a truncated or damaged tail: what came before stands),
// or once the sampling is settled: a live source has no end.
absl::StatusOr<FrameTable> ReadFrameTable(AVFormatContext* format, int stream_index,
                                          Clock::time_point deadline, const ClipOptions& options,
                                          PacketList* keep) {
  // Packets arrive in decode order; reading this many past the settling one lets frames that
  // present earlier (B-frames) arrive too.
  constexpr int64_t kReorderMargin = 16;
  const AVStream& stream = *format->streams[stream_index];
  FrameTable table;
  std::vector<int64_t> key_pts;
  bool all_pts = true;
  int64_t next_settle_check = std::max(options.sampling.num_frames, 1);
  int64_t stop_at = std::numeric_limits<int64_t>::max();
  int64_t kept_bytes = 0;
  while (table.count < stop_at) {
    PacketPtr packet(av_packet_alloc());
    if (!packet) return absl::ResourceExhaustedError("out of memory");
    table.read_error = av_read_frame(format, packet.get());
    if (table.read_error < 0) break;
    if (packet->stream_index == stream_index) {
      ++table.count;
      if (packet->pts == AV_NOPTS_VALUE) all_pts = false;
      if (all_pts) {
        table.pts.push_back(packet->pts);
        if (packet->flags & AV_PKT_FLAG_KEY) key_pts.push_back(packet->pts);
      }
      if (keep != nullptr) {
        kept_bytes += packet->size;
        if (kept_bytes > options.max_input_bytes) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "the video data are over ", options.max_input_bytes, " bytes, the input limit"));
        }
        keep->push_back(std::move(packet));
      }
      // A live source's first keyframe may come without a timestamp (RTSP's does): its frames
      // are then timed by the frame rate, and the sampling settles on their count.
      if (table.count >= next_settle_check && stop_at == std::numeric_limits<int64_t>::max()) {
        // Checked at geometrically spaced counts, so that the checks cost O(n log n) in all.
        next_settle_check = table.count + std::max<int64_t>(32, table.count / 4);
        if (SamplingSettled(table.count, all_pts ? table.pts : std::vector<int64_t>(), stream,
                            options.sampling)) {
          stop_at = table.count + kReorderMargin;
        }
      }
      if (table.count > options.max_total_frames) {
        return absl::ResourceExhaustedError(
            absl::StrCat("video has more than ", options.max_total_frames, " frames, the limit"));
      }
    }
    if (auto status = CancellationStatus(options); !status.ok()) return status;
    if (table.count % 64 == 0 && PastBudget(deadline)) {
      return BudgetExceeded(options, absl::StrCat("listing frames: ", table.count, " so far"));
    }
  }
  std::sort(table.pts.begin(), table.pts.end());
  if (!all_pts || std::adjacent_find(table.pts.begin(), table.pts.end()) != table.pts.end()) {
    table.pts.clear();
    return table;
  }
  for (int64_t key : key_pts) {
    table.keyframes.push_back(std::lower_bound(table.pts.begin(), table.pts.end(), key) -
                              table.pts.begin());
  }
  std::sort(table.keyframes.begin(), table.keyframes.end());
  return table;
}

}  // namespace

std::vector<double> FrameTimes(const FrameTable& table, const AVStream& stream) {
  std::vector<double> seconds(table.count);
  if (!table.pts.empty()) {
    const int64_t origin = stream.start_time != AV_NOPTS_VALUE ? stream.start_time : 0;
    for (int64_t i = 0; i < table.count; ++i) {
      // In double: a damaged file's start time and timestamps may be far apart (the fuzzer's
      // 5120 - INT64_MIN), where the integer difference overflows.
      seconds[i] = (static_cast<double>(table.pts[i]) - static_cast<double>(origin)) *
                   av_q2d(stream.time_base);
    }
    return seconds;
  }
  // No timestamps: place frames by index at the nominal frame rate.
  const AVRational rate = stream.avg_frame_rate.num > 0 ? stream.avg_frame_rate : AVRational{25, 1};
  for (int64_t i = 0; i < table.count; ++i) {
    seconds[i] = static_cast<double>(i) * rate.den / rate.num;
  }
  return seconds;
}

absl::StatusOr<ListedVideo> ListVideo(AVFormatContext* format, Clock::time_point deadline,
                                      const ClipOptions& options, PacketList* keep) {
  ListedVideo listed;
  auto stream = FindVideoStream(format, options.max_frame_side);
  if (!stream.ok()) return stream.status();
  listed.stream = *stream;
  auto table = ReadFrameTable(format, stream->index, deadline, options, keep);
  if (!table.ok()) return table.status();
  listed.table = *std::move(table);
  if (listed.table.count == 0) return absl::InvalidArgumentError("the video stream has no frames");
  listed.times = FrameTimes(listed.table, *format->streams[stream->index]);
  if (options.max_duration_seconds > 0 && listed.times.back() > options.max_duration_seconds) {
    return absl::ResourceExhaustedError(absl::StrCat("video lasts ", listed.times.back(),
                                                     " s; the limit is ",
                                                     options.max_duration_seconds, " s"));
  }
  listed.wanted = SampleFrameIndices(listed.times, options.sampling);
  if (options.sampling.snap_to_keyframes) {
    listed.wanted =
        SnapToKeyframes(std::move(listed.wanted), listed.table.count, listed.table.keyframes);
  }
  if (listed.wanted.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no frame matches the sampling: the video ends at ", listed.times.back(), " s"));
  }
  return listed;
}

}  // namespace vidclf::media
