#include "model/tensor_heap.h"

#include <malloc.h>

namespace vidclf::model {

void TuneHeapForTensors() {
  mallopt(M_MMAP_THRESHOLD, kTensorHeapMmapBytes);
  mallopt(M_TRIM_THRESHOLD, kTensorHeapTrimBytes);
}

}  // namespace vidclf::model
