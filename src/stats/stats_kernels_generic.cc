// stats_kernels_generic.cc — the statistics kernels built for the "generic" instruction set
// (compile options in CMakeLists.txt; see stats_kernels_impl.h).
#define TS_STATS_ISA generic
#define TS_STATS_VECTOR_BYTES 16
#include "stats/stats_kernels_impl.h"

namespace trainscope::stats_internal {

const KernelTable kGenericKernels = {"generic", &generic::Summarize, &generic::Histogram};

}  // namespace trainscope::stats_internal
