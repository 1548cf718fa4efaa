#include "server/heap.h"

#ifdef VIDCLF_JEMALLOC
#include <jemalloc/jemalloc.h>

#define VIDCLF_STRINGIFY_(x) #x
#define VIDCLF_STRINGIFY(x) VIDCLF_STRINGIFY_(x)

// jemalloc reads this when it starts. Its background thread purges pages freed for a while (10 s,
// the default decay) without waiting for the next allocation, so a server that stays busy at a
// steady load still hands a burst's memory back. Thread caches keep blocks of up to 128 KiB, not
// 32: the heads' joined step over many streams frees and makes tensors of that size at every
// step, which through the arena made it 1.7 times as slow as on glibc; 4 of each size, not 20,
// so that the many threads' caches hold little (docs/code-measurements.md). MALLOC_CONF in the
// environment overrides each setting it names.
extern "C" {
// NOLINTNEXTLINE(readability-identifier-naming): the name jemalloc looks for.
const char* malloc_conf = "background_thread:true,tcache_max:131072,tcache_nslots_large:4";
}
#else
#include <malloc.h>

#include "model/tensor_heap.h"
#endif

namespace vidclf::heap {

#ifdef VIDCLF_JEMALLOC

void Prepare() {}

void ReleaseFree() {
  mallctl("arena." VIDCLF_STRINGIFY(MALLCTL_ARENAS_ALL) ".purge", nullptr, nullptr, nullptr, 0);
}

std::string Describe() {
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl("version", &version, &size, nullptr, 0) != 0) return "jemalloc";
  return std::string("jemalloc ") + version;
}

#else

void Prepare() {
  mallopt(M_ARENA_MAX, 1);
  model::TuneHeapForTensors();
}

void ReleaseFree() { malloc_trim(0); }

std::string Describe() { return "glibc"; }

#endif

}  // namespace vidclf::heap
