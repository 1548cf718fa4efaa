// Converts decoded frames on a thread of its own, so that the decoder goes on with the next
// frames meanwhile: the conversion then costs no decoding time while a core is free.
#ifndef VIDCLF_MEDIA_CONVERSION_WORKER_H_
#define VIDCLF_MEDIA_CONVERSION_WORKER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "media/av_util.h"
#include "media/frame_converter.h"

namespace vidclf::media {

// Used by one decoding thread. With `own_thread` false every frame is converted inside Submit,
// on the caller's thread, as a plain FrameConverter call would.
class ConversionWorker {
 public:
  // At most this many submitted frames wait while another is converted; Submit blocks beyond
  // it. Converting takes a fraction of decoding, so one is enough to keep the worker busy, and
  // each decoded frame held back is memory (200 MB at 8192x8192 in 10 bits).
  static constexpr size_t kMaxWaitingFrames = 1;

  // `converter` must outlive the worker and is used by the worker's thread only.
  ConversionWorker(FrameConverter& converter, bool own_thread);
  ~ConversionWorker();  // drops the frames still waiting and stops the thread
  ConversionWorker(const ConversionWorker&) = delete;
  ConversionWorker& operator=(const ConversionWorker&) = delete;

  // Takes the frame's buffers, leaving `frame` blank, and converts them into `out`, which must
  // stay valid until Finish, then runs `converted` (when set) on the converting thread; its
  // error counts as a conversion error. With `out` null the frame is not converted, only
  // `converted` runs, in turn with the others (a GPU's picture that its consumer converts). Returns
  // the first conversion error met so far; after one, frames are no longer converted.
  absl::Status Submit(AVFrame& frame, float* out,
                      std::function<absl::Status()> converted = nullptr);

  // Waits until every submitted frame is converted and returns the first error.
  absl::Status Finish();

  // Time spent converting, and time the submitting thread spent converting or waiting for the
  // worker. Final once Finish has returned.
  double converting_seconds() const;
  double waiting_seconds() const { return waiting_seconds_; }

 private:
  struct Job {
    FramePtr frame;
    float* out;
    std::function<absl::Status()> converted;
  };

  // Converts one job on the calling thread.
  absl::Status Convert(Job& job);

  void Run();  // the worker thread

  FrameConverter& converter_;
  const bool own_thread_;
  std::thread thread_;  // started by the first Submit
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  // Guarded by mutex_ when own_thread_.
  std::deque<Job> waiting_;
  bool converting_ = false;  // a job taken from waiting_ is being converted
  bool stopping_ = false;
  absl::Status error_;  // the first conversion error
  double converting_seconds_ = 0;
  // The submitting thread's own.
  double waiting_seconds_ = 0;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_CONVERSION_WORKER_H_
