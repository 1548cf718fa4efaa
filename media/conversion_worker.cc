#include "media/conversion_worker.h"

#include <utility>

#include "common/thread_name.h"
#include "media/clip_limits.h"

namespace vidclf::media {

ConversionWorker::ConversionWorker(FrameConverter& converter, bool own_thread)
    : converter_(converter), own_thread_(own_thread) {}

ConversionWorker::~ConversionWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    waiting_.clear();
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Status ConversionWorker::Convert(Job& job) {
  absl::Status status =
      job.out == nullptr ? absl::OkStatus() : converter_.Convert(*job.frame, job.out);
  job.frame.reset();  // hand the buffers back to the decoder's pool
  if (status.ok() && job.converted) status = job.converted();
  return status;
}

absl::Status ConversionWorker::Submit(AVFrame& frame, float* out,
                                      std::function<absl::Status()> converted) {
  Job job{FramePtr(av_frame_alloc()), out, std::move(converted)};
  if (!job.frame) return absl::ResourceExhaustedError("out of memory");
  av_frame_move_ref(job.frame.get(), &frame);
  const auto start = DecodeClock::now();
  if (!own_thread_) {
    if (!error_.ok()) return error_;
    error_ = Convert(job);
    const double seconds = SecondsSince(start);
    converting_seconds_ += seconds;
    waiting_seconds_ += seconds;
    return error_;
  }
  if (!thread_.joinable()) {
    thread_ = std::thread([this] {
      NameThisThread("vidclf-convert");
      Run();
    });
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return waiting_.size() < kMaxWaitingFrames || !error_.ok(); });
  waiting_seconds_ += SecondsSince(start);
  if (!error_.ok()) return error_;
  waiting_.push_back(std::move(job));
  lock.unlock();
  changed_.notify_all();
  return absl::OkStatus();
}

absl::Status ConversionWorker::Finish() {
  const auto start = DecodeClock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return (waiting_.empty() && !converting_) || !error_.ok(); });
  waiting_seconds_ += SecondsSince(start);
  return error_;
}

double ConversionWorker::converting_seconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return converting_seconds_;
}

void ConversionWorker::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return !waiting_.empty() || stopping_; });
    if (stopping_) return;
    Job job = std::move(waiting_.front());
    waiting_.pop_front();
    converting_ = true;
    lock.unlock();
    changed_.notify_all();  // a slot is free
    const auto start = DecodeClock::now();
    const absl::Status status = Convert(job);
    const double seconds = SecondsSince(start);
    lock.lock();
    converting_ = false;
    converting_seconds_ += seconds;
    if (!status.ok() && error_.ok()) {
      error_ = status;
      waiting_.clear();
    }
    changed_.notify_all();
  }
}

}  // namespace vidclf::media
