#include "model/thread_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>

#include "model/video_model.h"

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

bool BindIntraOpThreadsOfThisThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  const int threads = static_cast<int>(cpus.size());
  SetIntraOpThreadsOfThisThread(threads);
#ifdef _OPENMP
  // OpenMP keeps a team's threads for the next parallel region of the same thread: each binds
  // itself once, here, by its number in the team.
  std::atomic<int> bound{0};
  std::atomic<int> team{0};
#pragma omp parallel num_threads(threads)
  {
    team = omp_get_num_threads();
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[omp_get_thread_num()], &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0) ++bound;
  }
  return team == threads && bound == threads;
#else
  return false;
#endif
}

}  // namespace vidclf::model
