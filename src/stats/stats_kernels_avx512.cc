// stats_kernels_avx512.cc — the statistics kernels built for the "avx512" instruction set:
// AVX-512 F/VL/BW/DQ on 256-bit vectors (compile options in CMakeLists.txt; see
// stats_kernels_impl.h). The vectors stay 256 bits wide; what AVX-512 adds here is comparisons
// into mask registers (sign counts by popcnt) and 32 vector registers.
#define TS_STATS_ISA avx512
#define TS_STATS_VECTOR_BYTES 32
#include "stats/stats_kernels_impl.h"

namespace trainscope::stats_internal {

const KernelTable kAvx512Kernels = {"avx512", &avx512::Summarize, &avx512::Histogram};

}  // namespace trainscope::stats_internal
