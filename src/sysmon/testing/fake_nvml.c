/* fake_nvml.c — a stand-in for libnvidia-ml.so.1 used by the sysmon tests. It exports the NVML
 * symbols trainscope resolves and serves values from a script named by $FAKE_NVML_SCRIPT, read
 * at nvmlInit_v2. One directive per line, '#' starts a comment:
 *
 *   devices 2                          number of GPUs (default 1)
 *   init_fail NVML_ERROR_DRIVER_NOT_LOADED   nvmlInit_v2 returns this
 *   gpu 0 name NVIDIA H100 80GB HBM3   the rest of the line
 *   gpu 0 util 35 | mem_util 20 | mem_total B | mem_used B | power_mw 250000 |
 *         power_limit_mw 700000 | temp 61 | sm_clock 1980
 *   gpu 0 gpm 1                        GPM supported; then sm_util / sm_occupancy /
 *                                      tensor_util / dram_util give the GPM values
 *   gpu 0 proc 1234 1048576            a compute process and its GPU memory (repeatable)
 *   gpu 0 unsupported power            that getter answers NVML_ERROR_NOT_SUPPORTED
 *   fail_after 5 NVML_ERROR_GPU_IS_LOST  after 5 successful device queries, every device
 *                                      query returns this error
 *   proc_api 2                         the _v3 process call answers FUNCTION_NOT_FOUND
 *
 *   gpu 0 util_step 5                  utilisation grows by 5 on every call
 *
 * Test-only helpers:
 * fakeNvmlInitCount(), fakeNvmlShutdownCount(), fakeNvmlGpmSamplesLive().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sysmon/nvml_types.h"

#define FAKE_MAX_GPUS 16
#define FAKE_MAX_PROCS 256

enum { G_UTIL, G_MEMORY, G_POWER, G_POWER_LIMIT, G_TEMP, G_CLOCK, G_PROCS, G_GPM, G_NUM };

struct FakeGpu {
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  unsigned int util, mem_util, util_step, power_mw, power_limit_mw, temp, sm_clock;
  unsigned long long mem_total, mem_used;
  int gpm;
  double sm_util, sm_occupancy, tensor_util, dram_util;
  int unsupported[G_NUM];
  unsigned int nprocs;
  unsigned int proc_pid[FAKE_MAX_PROCS];
  unsigned long long proc_mem[FAKE_MAX_PROCS];
  unsigned int calls;
};

struct nvmlGpmSample_st {
  int device;
  unsigned long long serial;
};

static struct FakeGpu g_gpus[FAKE_MAX_GPUS];
static unsigned int g_count = 1;
static int g_initialized = 0;
static nvmlReturn_t g_init_result = NVML_SUCCESS;
static long g_fail_after = -1;
static nvmlReturn_t g_fail_error = NVML_ERROR_UNKNOWN;
static long g_queries = 0;
static int g_proc_api = 3;
static int g_init_calls = 0, g_shutdown_calls = 0, g_gpm_live = 0;
static unsigned long long g_gpm_serial = 0;

static const struct {
  const char* name;
  nvmlReturn_t value;
} kErrors[] = {
    {"NVML_SUCCESS", NVML_SUCCESS},
    {"NVML_ERROR_UNINITIALIZED", NVML_ERROR_UNINITIALIZED},
    {"NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
    {"NVML_ERROR_NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
    {"NVML_ERROR_DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
    {"NVML_ERROR_TIMEOUT", NVML_ERROR_TIMEOUT},
    {"NVML_ERROR_GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
    {"NVML_ERROR_UNKNOWN", NVML_ERROR_UNKNOWN},
};

static nvmlReturn_t ParseError(const char* s) {
  for (size_t i = 0; i < sizeof(kErrors) / sizeof(kErrors[0]); ++i) {
    if (strcmp(s, kErrors[i].name) == 0) return kErrors[i].value;
  }
  return (nvmlReturn_t)atoi(s);
}

static int MetricIndex(const char* s) {
  static const char* names[G_NUM] = {"util", "memory", "power", "power_limit",
                                     "temp", "clock",  "procs", "gpm"};
  for (int i = 0; i < G_NUM; ++i) {
    if (strcmp(s, names[i]) == 0) return i;
  }
  return -1;
}

static void Reset(void) {
  memset(g_gpus, 0, sizeof(g_gpus));
  for (int i = 0; i < FAKE_MAX_GPUS; ++i)
    snprintf(g_gpus[i].name, sizeof(g_gpus[i].name), "Fake GPU %d", i);
  g_count = 1;
  g_init_result = NVML_SUCCESS;
  g_fail_after = -1;
  g_fail_error = NVML_ERROR_UNKNOWN;
  g_queries = 0;
  g_proc_api = 3;
}

static void ParseGpuLine(struct FakeGpu* g, const char* key, char* rest) {
  char* end = NULL;
  double v = strtod(rest, &end);
  if (strcmp(key, "name") == 0) {
    size_t n = strcspn(rest, "\r\n");
    if (n >= sizeof(g->name)) n = sizeof(g->name) - 1;
    memcpy(g->name, rest, n);
    g->name[n] = '\0';
  } else if (strcmp(key, "util") == 0)
    g->util = (unsigned)v;
  else if (strcmp(key, "util_step") == 0)
    g->util_step = (unsigned)v;
  else if (strcmp(key, "mem_util") == 0)
    g->mem_util = (unsigned)v;
  else if (strcmp(key, "mem_total") == 0)
    g->mem_total = strtoull(rest, NULL, 10);
  else if (strcmp(key, "mem_used") == 0)
    g->mem_used = strtoull(rest, NULL, 10);
  else if (strcmp(key, "power_mw") == 0)
    g->power_mw = (unsigned)v;
  else if (strcmp(key, "power_limit_mw") == 0)
    g->power_limit_mw = (unsigned)v;
  else if (strcmp(key, "temp") == 0)
    g->temp = (unsigned)v;
  else if (strcmp(key, "sm_clock") == 0)
    g->sm_clock = (unsigned)v;
  else if (strcmp(key, "gpm") == 0)
    g->gpm = (int)v;
  else if (strcmp(key, "sm_util") == 0)
    g->sm_util = v;
  else if (strcmp(key, "sm_occupancy") == 0)
    g->sm_occupancy = v;
  else if (strcmp(key, "tensor_util") == 0)
    g->tensor_util = v;
  else if (strcmp(key, "dram_util") == 0)
    g->dram_util = v;
  else if (strcmp(key, "proc") == 0 && g->nprocs < FAKE_MAX_PROCS) {
    unsigned long long pid = 0, mem = 0;
    if (sscanf(rest, "%llu %llu", &pid, &mem) == 2) {
      g->proc_pid[g->nprocs] = (unsigned)pid;
      g->proc_mem[g->nprocs] = mem;
      ++g->nprocs;
    }
  } else if (strcmp(key, "unsupported") == 0) {
    char what[32] = {0};
    if (sscanf(rest, "%31s", what) == 1 && MetricIndex(what) >= 0)
      g->unsupported[MetricIndex(what)] = 1;
  }
}

static void LoadScript(void) {
  Reset();
  const char* path = getenv("FAKE_NVML_SCRIPT");
  if (path == NULL) return;
  FILE* f = fopen(path, "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    char* hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char word[64] = {0}, key[64] = {0}, arg[128] = {0};
    int pos = 0;
    if (sscanf(line, "%63s %n", word, &pos) != 1) continue;
    char* rest = line + pos;
    if (strcmp(word, "devices") == 0) {
      g_count = (unsigned)atoi(rest);
      if (g_count > FAKE_MAX_GPUS) g_count = FAKE_MAX_GPUS;
    } else if (strcmp(word, "init_fail") == 0 && sscanf(rest, "%127s", arg) == 1) {
      g_init_result = ParseError(arg);
    } else if (strcmp(word, "fail_after") == 0) {
      long n = 0;
      if (sscanf(rest, "%ld %127s", &n, arg) == 2) {
        g_fail_after = n;
        g_fail_error = ParseError(arg);
      }
    } else if (strcmp(word, "proc_api") == 0) {
      g_proc_api = atoi(rest);
    } else if (strcmp(word, "gpu") == 0) {
      int idx = -1, pos2 = 0;
      if (sscanf(rest, "%d %63s %n", &idx, key, &pos2) >= 2 && idx >= 0 && idx < FAKE_MAX_GPUS) {
        ParseGpuLine(&g_gpus[idx], key, rest + pos2);
      }
    }
  }
  fclose(f);
}

/* Common checks for a device query: initialised, valid handle, scripted failure. */
static nvmlReturn_t Query(nvmlDevice_t device, struct FakeGpu** out, int metric) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  struct FakeGpu* g = (struct FakeGpu*)device;
  if (g < g_gpus || g >= g_gpus + g_count) return NVML_ERROR_INVALID_ARGUMENT;
  if (g_fail_after >= 0 && g_queries >= g_fail_after) return g_fail_error;
  if (metric >= 0 && g->unsupported[metric]) return NVML_ERROR_NOT_SUPPORTED;
  ++g_queries;
  *out = g;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
  ++g_init_calls;
  LoadScript();
  if (g_init_result != NVML_SUCCESS) return g_init_result;
  g_initialized = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  ++g_shutdown_calls;
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  g_initialized = 0;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  for (size_t i = 0; i < sizeof(kErrors) / sizeof(kErrors[0]); ++i) {
    if (kErrors[i].value == r) return kErrors[i].name;
  }
  return "NVML_ERROR_OTHER";
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *count = g_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (index >= g_count || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *device = (nvmlDevice_t)&g_gpus[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  struct FakeGpu* g = NULL;
  nvmlReturn_t r = Query(device, &g, -1);
  if (r != NVML_SUCCESS) return r;
  if (length <= strlen(g->name)) return NVML_ERROR_INSUFFICIENT_SIZE;
  strcpy(name, g->name);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* u) {
  struct FakeGpu* g = NULL;
  nvmlReturn_t r = Query(device, &g, G_UTIL);
  if (r != NVML_SUCCESS) return r;
  u->gpu = g->util + g->util_step * g->calls++;
  u->memory = g->mem_util;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* m) {
  struct FakeGpu* g = NULL;
  nvmlReturn_t r = Query(device, &g, G_MEMORY);
  if (r != NVML_SUCCESS) return r;
  m->total = g->mem_total;
  m->used = g->mem_used;
  m->free = g->mem_total > g->mem_used ? g->mem_total - g->mem_used : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* mw) {
  struct FakeGpu* g = NULL;
  nvmlReturn_t r = Query(device, &g, G_POWER);
  if (r == NVML_SUCCESS) *mw = g->power_mw;
  return r;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* mw) {
  struct FakeGpu* g = NULL;
  nvmlReturn_t r = Query(device, &g, G_POWER_LIMIT);
  if (r == NVML_SUCCESS) *mw = g->power_limit_mw;
  return r;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                      unsigned int* temp) {
  struct FakeGpu* g = NULL;
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t r = Query(device, &g, G_TEMP);
  if (r == NVML_SUCCESS) *temp = g->temp;
  return r;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  struct FakeGpu* g = NULL;
  if (type != NVML_CLOCK_SM) return NVML_ERROR_INVALID_ARGUMENT; /* trainscope asks for SM */
  nvmlReturn_t r = Query(device, &g, G_CLOCK);
  if (r == NVML_SUCCESS) *mhz = g->sm_clock;
  return r;
}

static nvmlReturn_t Processes(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos,
                              nvmlProcessInfo_v1_t* infos_v1) {
  struct FakeGpu* g = NULL;
  nvmlReturn_t r = Query(device, &g, G_PROCS);
  if (r != NVML_SUCCESS) return r;
  if (*count < g->nprocs) {
    *count = g->nprocs;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned int i = 0; i < g->nprocs; ++i) {
    if (infos) {
      infos[i].pid = g->proc_pid[i];
      infos[i].usedGpuMemory = g->proc_mem[i];
      infos[i].gpuInstanceId = 0xFFFFFFFFu;
      infos[i].computeInstanceId = 0xFFFFFFFFu;
    } else {
      infos_v1[i].pid = g->proc_pid[i];
      infos_v1[i].usedGpuMemory = g->proc_mem[i];
    }
  }
  *count = g->nprocs;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* n,
                                                     nvmlProcessInfo_t* p) {
  if (g_proc_api < 3) return NVML_ERROR_FUNCTION_NOT_FOUND;
  return Processes(d, n, p, NULL);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int* n,
                                                     nvmlProcessInfo_t* p) {
  if (g_proc_api < 2) return NVML_ERROR_FUNCTION_NOT_FOUND;
  return Processes(d, n, p, NULL);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int* n,
                                                  nvmlProcessInfo_v1_t* p) {
  return Processes(d, n, NULL, p);
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* support) {
  struct FakeGpu* g = NULL;
  if (support == NULL || support->version != NVML_GPM_SUPPORT_VERSION)
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t r = Query(device, &g, -1);
  if (r != NVML_SUCCESS) return r;
  support->isSupportedDevice = g->gpm ? 1u : 0u;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  *sample = (nvmlGpmSample_t)calloc(1, sizeof(struct nvmlGpmSample_st));
  if (*sample == NULL) return NVML_ERROR_MEMORY;
  ++g_gpm_live;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  if (sample == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  free(sample);
  --g_gpm_live;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  struct FakeGpu* g = NULL;
  nvmlReturn_t r = Query(device, &g, G_GPM);
  if (r != NVML_SUCCESS) return r;
  sample->device = (int)(g - g_gpus);
  sample->serial = ++g_gpm_serial;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* m) {
  if (m == NULL || m->version != NVML_GPM_METRICS_GET_VERSION || m->sample1 == NULL ||
      m->sample2 == NULL || m->sample1->device != m->sample2->device ||
      m->sample1->serial >= m->sample2->serial) {
    return NVML_ERROR_INVALID_ARGUMENT; /* the real library wants two ordered samples */
  }
  struct FakeGpu* g = &g_gpus[m->sample2->device];
  for (unsigned int i = 0; i < m->numMetrics; ++i) {
    m->metrics[i].nvmlReturn = NVML_SUCCESS;
    switch (m->metrics[i].metricId) {
      case NVML_GPM_METRIC_SM_UTIL:
        m->metrics[i].value = g->sm_util;
        break;
      case NVML_GPM_METRIC_SM_OCCUPANCY:
        m->metrics[i].value = g->sm_occupancy;
        break;
      case NVML_GPM_METRIC_ANY_TENSOR_UTIL:
        m->metrics[i].value = g->tensor_util;
        break;
      case NVML_GPM_METRIC_DRAM_BW_UTIL:
        m->metrics[i].value = g->dram_util;
        break;
      default:
        m->metrics[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        break;
    }
  }
  return NVML_SUCCESS;
}

int fakeNvmlInitCount(void) { return g_init_calls; }
int fakeNvmlShutdownCount(void) { return g_shutdown_calls; }
int fakeNvmlGpmSamplesLive(void) { return g_gpm_live; }
