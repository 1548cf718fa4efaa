#include "media/fragment_guard.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace vidclf::media {
namespace {

uint64_t BigEndian(absl::string_view bytes, size_t offset, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i) value = value << 8 | static_cast<uint8_t>(bytes[offset + i]);
  return value;
}

// Boxes that may open an ISO BMFF file (or a fragment stream: styp, moof).
bool IsFirstBoxType(absl::string_view type) {
  for (absl::string_view first :
       {"ftyp", "styp", "moov", "moof", "free", "skip", "sidx", "wide", "mdat", "pnot", "uuid"}) {
    if (type == first) return true;
  }
  return false;
}

}  // namespace

bool FragmentGuard::ParseHeader() {
  if (header_.size() < 8) return false;
  uint64_t size = BigEndian(header_, 0, 4);
  const absl::string_view type = absl::string_view(header_).substr(4, 4);
  size_t header_bytes = 8;
  if (size == 1) {  // a 64-bit size follows the type
    if (header_.size() < 16) return false;
    size = BigEndian(header_, 8, 8);
    header_bytes = 16;
  }
  // A track run's sample count follows its version and flags.
  const bool track_run = type == "trun" && !container_ends_.empty();
  if (track_run && header_.size() < header_bytes + 8) return false;

  if (box_start_ == 0 && !IsFirstBoxType(type)) {
    active_ = false;
    return true;
  }
  const int64_t enclosing_end =
      container_ends_.empty() ? std::numeric_limits<int64_t>::max() : container_ends_.back();
  // Size 0: up to the end of the enclosing box, or of the file.
  int64_t end =
      size == 0
          ? enclosing_end
          : box_start_ + static_cast<int64_t>(std::min<uint64_t>(size, enclosing_end - box_start_));
  if (size != 0 && size < header_bytes) {
    // Not a box: leave the judgement to the demuxer. Past the first box, a seek may have landed
    // in media data; the next seek may find boxes again.
    if (box_start_ == 0) {
      active_ = false;
    } else {
      lost_ = true;
      skip_until_ = std::numeric_limits<int64_t>::max();
    }
    return true;
  }
  if (type == "moof" || (type == "traf" && !container_ends_.empty())) {
    container_ends_.push_back(end);
    skip_until_ = box_start_ + static_cast<int64_t>(header_bytes);
  } else {
    if (track_run && box_start_ > last_counted_run_) {
      last_counted_run_ = box_start_;
      samples_ += static_cast<int64_t>(BigEndian(header_, header_bytes + 4, 4));
      if (samples_ > max_samples_) {
        status_ = absl::ResourceExhaustedError(absl::StrCat(
            "the video's fragments declare ", samples_, " samples or more; the limit is ",
            max_samples_, " (frames of all tracks)"));
      }
    }
    skip_until_ = end;
  }
  return true;
}

void FragmentGuard::SeekTo(int64_t position) {
  // A skip over the rest of the box at hand keeps the structure known.
  if (!lost_ && header_.empty() && position >= position_ && position <= skip_until_) {
    position_ = position;
    return;
  }
  position_ = position;
  skip_until_ = position;
  header_.clear();
  container_ends_.clear();
  lost_ = false;
}

absl::Status FragmentGuard::Inspect(absl::string_view bytes) {
  while (status_.ok() && active_ && !bytes.empty()) {
    if (position_ < skip_until_) {
      const int64_t skipped = std::min<int64_t>(skip_until_ - position_, bytes.size());
      bytes.remove_prefix(skipped);
      position_ += skipped;
      continue;
    }
    if (header_.empty()) {
      box_start_ = position_;
      while (!container_ends_.empty() && box_start_ >= container_ends_.back()) {
        container_ends_.pop_back();
      }
    }
    // Gather the header one byte at a time: it is at most 24 bytes.
    header_.push_back(bytes.front());
    bytes.remove_prefix(1);
    ++position_;
    if (ParseHeader()) header_.clear();
  }
  return status_;
}

}  // namespace vidclf::media
