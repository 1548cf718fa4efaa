// Binding a thread's LibTorch intra-op threads to CPUs: each thread of its team ends up on the CPU
// of its number, a refusal says why, and only processes that own the CPUs they budget are offered
// any.
#include "model/thread_affinity.h"

#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace vidclf::model {
namespace {

using ::testing::HasSubstr;

// The CPUs the calling thread may run on.
std::vector<int> CpusOfThisThread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

TEST(ThreadAffinityTest, OffersTheCpusOnlyToAProcessThatBudgetsThemAll) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  EXPECT_EQ(allowed, CpusOfThisThread());
  const int cores = static_cast<int>(allowed.size());
  EXPECT_EQ(DedicatedCpus(cores), allowed);
  EXPECT_TRUE(DedicatedCpus(cores + 1).empty());
  EXPECT_TRUE(DedicatedCpus(cores - 1).empty());
}

TEST(ThreadAffinityTest, BindsEachIntraOpThreadToTheCpuOfItsNumber) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "one CPU: every thread runs on it anyway";
  // The last two CPUs, so that the 0th thread moves off the first.
  const std::vector<int> cpus(allowed.end() - 2, allowed.end());
  std::mutex mutex;
  std::vector<std::vector<int>> seen;
  absl::Status bound;
  int threads = 0;
  // A thread of its own, as the batcher's: binding stays with the thread and its team.
  std::thread([&] {
    bound = BindIntraOpThreadsOfThisThread(cpus);
    threads = at::get_num_threads();
    // The team LibTorch's kernels run on: OpenMP's, with the count the binding set.
#pragma omp parallel
    {
      std::lock_guard<std::mutex> lock(mutex);
      seen.push_back(CpusOfThisThread());
    }
  }).join();
  ASSERT_TRUE(bound.ok()) << bound;
  EXPECT_EQ(threads, 2);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(std::set<std::vector<int>>(seen.begin(), seen.end()),
            (std::set<std::vector<int>>{{cpus[0]}, {cpus[1]}}));
  // The caller's own threads are left as they were.
  EXPECT_EQ(CpusOfThisThread(), allowed);
  EXPECT_EQ(BindIntraOpThreadsOfThisThread({}).code(), absl::StatusCode::kInvalidArgument);
}

// A CPU the process may not run on (here one the machine lacks) is named in the refusal.
TEST(ThreadAffinityTest, SaysWhichCpuRefusedAThread) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const int missing = CPU_SETSIZE - 1;
  ASSERT_EQ(std::count(allowed.begin(), allowed.end(), missing), 0);
  absl::Status bound;
  std::thread([&] { bound = BindIntraOpThreadsOfThisThread({allowed[0], missing}); }).join();
  EXPECT_EQ(bound.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bound.message(), HasSubstr(absl::StrCat("CPU ", missing, ": Invalid argument")));
}

}  // namespace
}  // namespace vidclf::model
