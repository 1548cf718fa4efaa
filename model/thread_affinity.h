// Binding a thread's LibTorch intra-op threads to CPUs of their own.
//
// Left to the kernel, two intra-op threads of a KVM guest's two vCPUs took turns on one CPU for
// milliseconds after an idle spell (docs/code-measurements.md, "Binding the backbone's threads").
#ifndef VIDCLF_MODEL_THREAD_AFFINITY_H_
#define VIDCLF_MODEL_THREAD_AFFINITY_H_

#include <vector>

#include "absl/status/status.h"

namespace vidclf::model {

// The CPUs the calling thread may run on (its affinity mask, which threads inherit from the one
// that made them), in increasing order: the process's, when called from a thread that was never
// bound, as the engine and the server do at start-up.
std::vector<int> AllowedCpus();

// AllowedCpus() when there are exactly `cores` of them: the process then owns the CPUs it budgets
// (a dedicated cpuset, or the whole machine). Empty otherwise: a process that shares a larger set
// with others, or runs on fewer CPUs than it budgets, leaves placement to the kernel.
std::vector<int> DedicatedCpus(int cores);

// Runs this thread's LibTorch intra-op work on cpus.size() threads, the i-th bound to cpus[i]
// (this thread is the 0th, and stays bound to cpus[0] afterwards). Says why when a thread could not
// be bound: OpenMP ran fewer threads, a CPU is not this process's to use, or LibTorch's intra-op
// threads are not OpenMP's (only the count is set then). Empty `cpus` does nothing.
absl::Status BindIntraOpThreadsOfThisThread(const std::vector<int>& cpus);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_THREAD_AFFINITY_H_
