"""The checks of bench/gpu_check.py, one module per area; CHECK_FUNCS maps a check name to its function."""
from .env_nvml import check_env, check_nvml
from .memory import check_cuda_oom
from .summaries import check_summaries
from .training import check_amp, check_compile, check_sync

CHECK_FUNCS = {"env": check_env, "nvml": check_nvml, "summaries": check_summaries,
               "sync": check_sync, "compile": check_compile, "amp": check_amp,
               "cuda_oom": check_cuda_oom}
