// stats_kernels_avx2.cc — the statistics kernels built for the "avx2" instruction set
// (compile options in CMakeLists.txt; see stats_kernels_impl.h).
#define TS_STATS_ISA avx2
#define TS_STATS_VECTOR_BYTES 32
#include "stats/stats_kernels_impl.h"

namespace trainscope::stats_internal {

const KernelTable kAvx2Kernels = {"avx2", &avx2::Summarize, &avx2::Histogram};

}  // namespace trainscope::stats_internal
