// Runs a job per index on a few threads, each thread taking the next index as it finishes one.
#ifndef VIDCLF_TRAIN_PARALLEL_JOBS_H_
#define VIDCLF_TRAIN_PARALLEL_JOBS_H_

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace vidclf::train {

// Calls job(i) for every i in [0, count) on `threads` threads (at least one, at most count) and
// returns when all are done. job(i) returns false to stop: indices not yet taken are skipped.
template <typename Job>
void RunParallelJobs(int count, int threads, Job job) {
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next++; i < count; i = next++) {
      if (!job(i)) next = count;
    }
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < std::clamp(threads, 1, std::max(count, 1)); ++t) workers.emplace_back(work);
  for (std::thread& worker : workers) worker.join();
}

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_PARALLEL_JOBS_H_
