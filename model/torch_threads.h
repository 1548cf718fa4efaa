// How many intra-op threads LibTorch runs: for the process, and for the calling thread alone.
#ifndef VIDCLF_MODEL_TORCH_THREADS_H_
#define VIDCLF_MODEL_TORCH_THREADS_H_

#include <string>

namespace vidclf::model {

// Sets `threads` intra-op threads for LibTorch and returns a line naming the BLAS and thread count
// in use, for the start-up log.
std::string ConfigureTorchThreads(int threads);

// Sets the LibTorch intra-op threads of the calling thread alone. at::set_num_threads also sets
// the count that every thread takes at its first parallel call, and a thread that had not made one
// yet would take that count over this one's.
void SetIntraOpThreadsOfThisThread(int threads);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_TORCH_THREADS_H_
