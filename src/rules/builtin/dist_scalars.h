// Scalars the PyTorch hook records in distributed jobs, one home for their names: written by
// python/trainscope/_comm_timing.py (exported to Python as trainscope._core.COMM_WAIT), read by
// the straggler rule and the report. docs/distributed.md describes them.
#pragma once

namespace trainscope::rules {

// Microseconds a DDP rank's backward waited, after its last gradient bucket was handed over,
// for the gradient all-reduce to complete (the part of "backward" that is waiting for other
// ranks, not work). One per TRAIN step of a DistributedDataParallel model.
inline constexpr char kCommWaitScalar[] = "dist/comm_wait_us";

}  // namespace trainscope::rules
