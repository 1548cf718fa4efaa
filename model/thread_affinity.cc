#include "model/thread_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "model/torch_threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace vidclf::model {

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

std::vector<int> DedicatedCpus(int cores) {
  std::vector<int> cpus = AllowedCpus();
  if (static_cast<int>(cpus.size()) != cores) cpus.clear();
  return cpus;
}

absl::Status BindIntraOpThreadsOfThisThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::InvalidArgumentError("no CPU to bind intra-op threads to");
  const int threads = static_cast<int>(cpus.size());
  SetIntraOpThreadsOfThisThread(threads);
#ifdef _OPENMP
  // OpenMP keeps a team's threads for the next parallel region of the same thread: each binds
  // itself once, here, by its number in the team.
  std::atomic<int> team{0};
  // Each thread writes only its own slot: pthread_setaffinity_np's error for cpus[i].
  std::vector<int> errors(threads, 0);
#pragma omp parallel num_threads(threads)
  {
    team = omp_get_num_threads();
    const int number = omp_get_thread_num();
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[number], &set);
    errors[number] = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  if (team != threads) {
    return absl::FailedPreconditionError(
        absl::StrCat("OpenMP ran ", team.load(), " of the ", threads,
                     " intra-op threads asked for (OMP_THREAD_LIMIT or OMP_DYNAMIC may cap it)"));
  }
  for (int i = 0; i < threads; ++i) {
    if (errors[i] != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("binding a thread to CPU ", cpus[i], ": ", std::strerror(errors[i])));
    }
  }
  return absl::OkStatus();
#else
  return absl::UnimplementedError("LibTorch's intra-op threads are not OpenMP's in this build");
#endif
}

}  // namespace vidclf::model
