// The statistic every benchmark here reports: on a shared, noisy machine the median of repeated
// runs is steadier than the mean.
#ifndef VIDCLF_BENCH_MEDIAN_H_
#define VIDCLF_BENCH_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace vidclf::bench {

// The upper median of `values`, which must not be empty.
inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace vidclf::bench

#endif  // VIDCLF_BENCH_MEDIAN_H_
