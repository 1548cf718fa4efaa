// Bounds the samples that the movie fragments of an MP4 input declare, before libavformat reads
// the declarations.
#ifndef VIDCLF_MEDIA_FRAGMENT_GUARD_H_
#define VIDCLF_MEDIA_FRAGMENT_GUARD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace vidclf::media {

// A track run box (trun) declares its number of samples in 4 bytes and may leave out every
// per-sample field, so a few bytes can declare millions of samples, and libavformat allocates
// index memory for each of them as it reads the box: a crafted 2 KB input made it hold 568 MB.
// The guard follows an ISO BMFF input's boxes (moof > traf > trun) as its bytes go by, in order,
// and refuses it once its track runs declare more than `max_samples` samples in all. Inputs that
// do not start with an ISO BMFF box pass untouched. Not thread-safe.
class FragmentGuard {
 public:
  explicit FragmentGuard(int64_t max_samples) : max_samples_(max_samples) {}

  // The input's next bytes. RESOURCE_EXHAUSTED, from then on, once a track run in the bytes seen
  // so far takes the total past max_samples: the demuxer must not be given these bytes.
  absl::Status Inspect(absl::string_view bytes);

  // The next bytes come from `position` of the input, where a reader that seeks (an MP4 with its
  // moov box at the end, read over HTTP) has moved. A skip over the rest of the current box keeps
  // the guard's place in the box tree; otherwise it takes `position` for the start of a top-level
  // box, as the demuxer's seeks to fragments and index boxes are. After a seek into media data it
  // reads those bytes as boxes, which at worst refuses the input, or, once they cannot be one,
  // waits for the next seek. A track run read again after a seek back is not counted twice.
  void SeekTo(int64_t position);

  int64_t samples_declared() const { return samples_; }

 private:
  // Parses the header gathered in header_; false while more bytes are needed.
  bool ParseHeader();

  const int64_t max_samples_;
  bool active_ = true;                   // false once the input is known not to be ISO BMFF
  bool lost_ = false;                    // met bytes that are not a box; waits for a seek
  int64_t position_ = 0;                 // bytes inspected so far
  int64_t skip_until_ = 0;               // the current box's contents that need no look, up to here
  int64_t box_start_ = 0;                // where the box whose header_ is being gathered starts
  std::string header_;                   // the bytes gathered of the current box's header
  std::vector<int64_t> container_ends_;  // moof, traf: where each open one ends
  int64_t samples_ = 0;
  int64_t last_counted_run_ = -1;  // where the furthest track run counted starts
  absl::Status status_;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_FRAGMENT_GUARD_H_
