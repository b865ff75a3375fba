// nvml_types.h — the subset of the NVML C ABI that trainscope uses, declared here because NVML
// headers are not a build dependency (the library is dlopen()ed at run time). Values and
// layouts follow NVIDIA's nvml.h; they are part of a stable ABI and must match it exactly.
// Shared by the wrapper (C++) and the fake library used in tests (C).
#ifndef TRAINSCOPE_SYSMON_NVML_TYPES_H_
#define TRAINSCOPE_SYSMON_NVML_TYPES_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef int nvmlReturn_t;  // an enum in nvml.h; int-sized
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvmlDevice_st* nvmlDevice_t;

typedef struct nvmlMemory_st {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu;     // % of the sample period with a kernel running
  unsigned int memory;  // % of the sample period with device memory being read or written
} nvmlUtilization_t;

typedef int nvmlTemperatureSensors_t;
enum { NVML_TEMPERATURE_GPU = 0 };

typedef int nvmlClockType_t;
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };

// nvmlDeviceGetComputeRunningProcesses (v1) fills this:
typedef struct nvmlProcessInfo_v1_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes; NVML_VALUE_NOT_AVAILABLE if unknown
} nvmlProcessInfo_v1_t;
// ..._v2 and ..._v3 fill this (nvmlProcessInfo_t / nvmlProcessInfo_v2_t in nvml.h):
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;      // 0xFFFFFFFF unless MIG
  unsigned int computeInstanceId;  // 0xFFFFFFFF unless MIG
} nvmlProcessInfo_t;
#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ULL)

#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96

// ---- GPM (GPU performance monitoring, Hopper and newer) ----
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;

enum {
  NVML_GPM_METRIC_GRAPHICS_UTIL = 1,
  NVML_GPM_METRIC_SM_UTIL = 2,
  NVML_GPM_METRIC_SM_OCCUPANCY = 3,
  NVML_GPM_METRIC_INTEGER_UTIL = 4,
  NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
  NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6,
  NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7,
  NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9,
  NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
};

typedef struct {
  unsigned int metricId;    // in
  nvmlReturn_t nvmlReturn;  // out
  double value;             // out, valid iff nvmlReturn == NVML_SUCCESS
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;  // out
} nvmlGpmMetric_t;

// nvml.h sizes metrics[] with NVML_GPM_METRIC_MAX, which grew between releases (98, 210, 333)
// without a version change, so the library can only rely on numMetrics; we still size the
// array at the largest known value so any library sees at least the struct it expects.
#define TS_GPM_MAX_METRICS 333
typedef struct {
  unsigned int version;  // NVML_GPM_METRICS_GET_VERSION
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[TS_GPM_MAX_METRICS];
} nvmlGpmMetricsGet_t;
#define NVML_GPM_METRICS_GET_VERSION 1

typedef struct {
  unsigned int version;  // NVML_GPM_SUPPORT_VERSION
  unsigned int isSupportedDevice;
} nvmlGpmSupport_t;
#define NVML_GPM_SUPPORT_VERSION 1

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TRAINSCOPE_SYSMON_NVML_TYPES_H_
