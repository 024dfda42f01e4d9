/*
 * Simulated libmsprofiler.so for asc-aprof tests and demos (no NPU needed).
 *
 * Exports CANN's aclprof* symbols with the validation rules and error codes of a chosen CANN
 * version (8.0 ... 9.2, default 8.5) and chip (910B-like, platform 5, or 310B-like, platform 7),
 * writes PROF_* directories laid out like CANN's, and records "kernels" launched through
 * aprofsim_launch() so the simulated msprof.py can export CSVs from them. Every entry point takes
 * one global mutex, as the real library serialises its API.
 *
 * What depends on the version (real runs and hicann/runtime):
 *   < 8.5   run names PROF_<counter>_<local ms time>_<16 letters A-R>, no pid;
 *   >= 8.5  PROF_<counter>_<local ms time>_<8-digit pid><8 letters A-R>;
 *   < 9.0   overlapping starts accepted (the second run gets no host data);
 *   >= 9.0  a second start is a no-op, any stop stops every device;
 *   >= 9.1  aclprofStart initialises by itself (path from aclprofSetConfig(ACL_PROF_PATH) or
 *           the working directory); stop / finalize without init return 0;
 *   >= 9.2  an invalid or chip-unsupported metric fails aclprofStart with 100000 when the
 *           AICORE_METRICS bit is set (earlier versions ignore it and collect no PMU data).
 * For every version aclprofCreateConfig does not look at the metric and ORs CANN's internal
 * PROF_AICPU_MODEL bit into the data types (so a zero mask starts), and aclprofDestroyConfig fails
 * only on NULL (a pointer that is not a live config is counted, not freed: on CANN it would be a
 * double free).
 *
 * The version and chip go into every run's metadata (host/info.json and device_N/info.json.N:
 * "aprofsim_cann_version", "aprofsim_chip", and the real "platform_version" and "pid"), so the
 * export follows the collection. A clock offset shifts the simulated wall clock (run names,
 * start/end info, kernel timestamps) to model a clock stepping back. Run-to-run noise
 * (aprofsim_set_jitter, off by default) draws every kernel's duration as launched * exp(sigma * Z)
 * from a seeded generator of its own, plus rare outliers, so statistics have a known truth.
 *
 * Data files: CANN's raw formats, the files the real exporter (msprof.py export summary) needs
 * for op_summary and task_time (see docs/raw_reader.md), little-endian:
 *   device_N/data/stars_soc.data.N.slice_0        64-byte task log records: a start and an end
 *       per task (SQE type AI_CORE for AI Core, AI Vector and MIX kernels, AI_CPU, PLACE_HOLDER
 *       for control tasks), on a 1 GHz system counter anchored by dev_start.log.N and
 *       host_start.log.N at the run's CLOCK_MONOTONIC_RAW (start_info: the wall clock), so every
 *       start and duration comes back to the ns;
 *   host/data/aging.api_event.data.slice_k         40-byte node launches (level 10000, type 5);
 *   host/data/aging.compact.node_basic_info.slice_k 64-byte GE node records (task time level 1);
 *   host/data/aging.compact.task_track.slice_k     64-byte runtime tasks (device, stream, task,
 *       runtime task type, kernel name hash);
 *   host/data/unaging.additional.hash_dic.slice_k  "hash:name" lines; type_info_dic.slice_0
 *       the type names; plus info.json, sample.json, start_info, host_start.log, end_info;
 *   device_N/data/ffts_profile.data.N.slice_0     128-byte context PMU records (function 40) of
 *       every AI Core, AI Vector and MIX kernel when PMU data is collected: its main core's total
 *       cycles and the 8 event counts sim.launch encoded (sample.json names the group's events);
 * Slice k of the host files holds the k-th stopped device's tasks. Not written (no verified
 * model yet): block PMU records (function 41: a MIX kernel's slave core), tensor_info (shapes),
 * FFTS+ subtask and context_id_info records (MIX kernels are written like other kernels), ACL
 * API records.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum {
    ACL_SUCCESS = 0,
    ACL_ERROR_INVALID_PARAM = 100000,
    ACL_ERROR_UNINITIALIZE = 100001,
    ACL_ERROR_REPEAT_INITIALIZE = 100002,
    ACL_ERROR_INVALID_FILE = 100003,
    ACL_ERROR_INVALID_PROFILING_CONFIG = 100010,
    ACL_ERROR_PROF_ALREADY_RUN = 100042,
    ACL_ERROR_PROF_NOT_RUN = 100043,
    ACL_ERROR_FEATURE_UNSUPPORTED = 200006,
    ACL_ERROR_PROF_MODULES_UNSUPPORTED = 200007,
    ACL_ERROR_PROFILING_FAILURE = 500005,
};

#define MAX_DEV 64u
#define MAX_PATH_BYTES 4096u
#define MAX_SET_CONFIG_BYTES 256u
#define MAX_NAME_BYTES 1024u
#define MAX_TENSOR_BYTES 8192u

#define PROF_TASK_TIME 0x2ull
#define PROF_AICORE_METRICS 0x4ull
#define PROF_MSPROFTX 0x80ull
#define PROF_TASK_TIME_L0 0x800ull
/* Internal bit aclprofCreateConfig ORs into every config, which is why a zero mask starts. */
#define PROF_AICPU_MODEL 0x4000000000000000ull
/* Every ACL_PROF_* bit CANN 8.5 accepts; anything else is 200007 at start. */
#define PROF_SUPPORTED_MASK                                                                  \
    (0x1ull | 0x2ull | 0x4ull | 0x8ull | 0x10ull | 0x20ull | 0x40ull | 0x80ull | 0x100ull |  \
     0x200ull | 0x800ull | 0x1000ull | 0x2000ull | 0x4000ull | 0x8000ull | 0x01000000ull |     \
     PROF_AICPU_MODEL)
#define METRIC_NONE 0xFF
/* aclprofSetConfig's ACL_PROF_PATH: where a 9.1+ auto-initialising start writes. */
#define SET_CONFIG_PROF_PATH 16

/* CANN versions as major * 10 + minor. */
#define CANN_PID_IN_NAME 85
#define CANN_LPM_INFO 90 /* lpmInfoConv from 9.0 (real runs); lpmFreqConv before (a real 8.0 run) */
#define CANN_REPEAT_START_IS_NO_OP 90
#define CANN_START_INITIALISES 91
#define CANN_START_CHECKS_METRIC 92

enum chip { CHIP_910B, CHIP_310B, CHIP_COUNT };
static const char *const CHIP_NAMES[CHIP_COUNT] = {"910B", "310B"};
static const struct chip_info {
    const char *platform_version;
    unsigned ai_core_num, aiv_num, aic_mhz;
    int drv_version;        /* info.json drvVersion, as real runs of the chip show it */
    int short_level_names;  /* sample.json spells the level profLevel "l0" / "l1" (310B) */
    int unsupported_metric; /* metric the chip cannot collect (-1: none) */
} CHIPS[CHIP_COUNT] = {
    {"5", 20, 40, 1650, 467992, 0, 7}, /* A2: no PipelineExecuteUtilization */
    {"7", 1, 1, 1250, 466701, 1, 8},   /* 310B: no MemoryAccess */
};
/* The simulated system counter runs at 1 GHz (real 910B: 49.999001 MHz, a ~20 ns quantum), so a
 * launched duration in ns survives the exporter's arithmetic exactly; the exporter reads the
 * frequency from info.json, so nothing else changes. */
#define HWTS_MHZ "1000"
/* Host records' timestamps are CLOCK_MONOTONIC_RAW ns: info.json's host CPU frequency says so. */
#define HOST_CPU_MHZ "1000.000000"

#define KERNEL_STREAM 2u
#define CONTROL_STREAM 0u
/* Gap between back-to-back kernels on the simulated device clock (real data: ~1-4 us). */
#define KERNEL_GAP_NS 2000ull
#define CONTROL_DURATION_NS 20ull

/* ------------------------------------------------------------------------------------------ */
/* State                                                                                        */

enum task_kind {
    KIND_AI_CORE,
    KIND_AI_VECTOR_CORE,
    KIND_MIX_AIC,
    KIND_MIX_AIV,
    KIND_AI_CPU,
    KIND_PROFILING_ENABLE,
    KIND_PROFILING_DISABLE,
    KIND_RINGBUFFER,
    KIND_COUNT
};

static const char *const KIND_NAMES[KIND_COUNT] = {
    "AI_CORE",        "AI_VECTOR_CORE",    "MIX_AIC",
    "MIX_AIV",        "AI_CPU",            "PROFILING_ENABLE",
    "PROFILING_DISABLE", "DEVICE_RINGBUFFER_CONTROL",
};
#define FIRST_CONTROL_KIND KIND_PROFILING_ENABLE

enum sim_function { F_INIT, F_FINALIZE, F_CREATE, F_DESTROY, F_START, F_STOP, F_SET_CONFIG, F_COUNT };

static const char *const FUNCTION_NAMES[F_COUNT] = {
    "aclprofInit",  "aclprofFinalize", "aclprofCreateConfig", "aclprofDestroyConfig",
    "aclprofStart", "aclprofStop",     "aclprofSetConfig",
};

enum latency_slot { L_INIT, L_START, L_STOP, L_FINALIZE, L_COUNT };
static const char *const LATENCY_NAMES[L_COUNT] = {"init", "start", "stop", "finalize"};

typedef struct sim_config {
    uint32_t ndev;
    uint32_t devs[MAX_DEV];
    int metric;
    uint64_t data_type;
    struct sim_config *next; /* registry of live configs: lets destroy/start spot bad pointers */
} sim_config;

/* One effective aclprofStart: one PROF_* directory. Freed when nothing refers to it. */
typedef struct collection {
    char *dir;
    uint64_t data_type;
    int metric;
    int refs;        /* running devices + host ownership + host-only activity */
    int host_only;   /* started with deviceNums == 0 (MSPROFTX only) and not yet stopped */
    int dir_made;
    /* Clock anchors of the run's start_info / host_start.log / dev_start.log files. */
    uint64_t begin_ns; /* wall clock at the start (collectionTimeBegin is it in us) */
    uint64_t mono_ns;  /* CLOCK_MONOTONIC_RAW at the start, a whole number of us */
    int has_host;      /* this run owns a host/ folder (host records go there) */
    unsigned host_slices;       /* host/data slices written so far (one per stopped device) */
    uint64_t host_slot;         /* next host record timestamp slot */
    struct name_rec *names;     /* kernel names moved here when the host stream was cut */
    size_t nnames, cap_names;
    struct collection *next;
} collection;

typedef struct task_rec {
    uint64_t start_ns;
    uint64_t dur_ns;
    uint32_t task_id;
    uint32_t block_dim;
    uint16_t stream;
    uint8_t kind;
    uint32_t mhz; /* the AI Core clock at its start (0: the rated one) */
} task_rec;

typedef struct device_state {
    int running;
    collection *coll;
    uint64_t data_type;
    int metric;
    task_rec *recs;
    size_t n, cap;
    uint64_t clock_ns; /* simulated device clock: kernels run back to back from here */
    uint32_t next_task;
    uint32_t next_control_task;
} device_state;

struct name_rec {
    uint32_t device, stream, first_task, count;
    uint8_t kind;
    char *name;
    char *binary;  /* the kernel's binary name (level-0 task_time); may be NULL: same as name */
    char *tensors; /* may be NULL */
};
typedef struct name_rec name_rec;

/* The host data stream. Like CANN, only the first active collection owns host/; a stop cuts
 * the stream, so overlapping collections lose their kernel names (the 8.5 behaviour). */
typedef struct host_state {
    int refcount;
    collection *owner; /* receives names; NULL when nobody owns the host */
    int cut;           /* stream stopped while other collections still run: names dropped */
    uint64_t data_type;
    name_rec *recs;
    size_t n, cap;
} host_state;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_initialized;
static char *g_result_path;
static int g_cann = 85;           /* major * 10 + minor */
static enum chip g_chip = CHIP_910B;
static long long g_clock_offset_ns;
/* A dip of the AI Core clock (aprofsim_set_clock_dip): [start, end) in simulated wall ns at mhz;
 * mhz 0: none. */
static unsigned long long g_dip_start_ns, g_dip_end_ns;
static unsigned g_dip_mhz;
static char *g_pending_path;      /* 9.1+: ACL_PROF_PATH set before any init */
static int g_invalid_destroys;    /* destroy of a pointer that is no live config */
/* A run "another process" writes into the result path at the next effective start. */
static struct {
    int armed;
    int pid;
    char *name;
    uint32_t device, count;
    char *kernel;
} g_foreign;
static int g_device_count = 8;
static int g_cmd_mode;
static int g_repeat_start; /* 9.x: a start is effective and not yet stopped */
static long long g_latency_us[L_COUNT];
static struct {
    int code;
    int times;
} g_faults[F_COUNT];
static sim_config *g_configs;
static int g_live_configs;
static collection *g_collections;
static device_state g_dev[MAX_DEV];
static host_state g_host;
static unsigned g_prof_counter; /* per process, never reset by finalize (as in CANN) */
static uint64_t g_rng;
/* Run-to-run noise (aprofsim_set_jitter); all guarded by g_mu. */
static double g_jitter_sigma;
static double g_outlier_rate;
static double g_outlier_factor = 1.0;
static uint64_t g_jitter_state;

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                                */

static uint64_t realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The simulated host's wall clock: the real one shifted by the test's clock offset. */
static uint64_t wall_ns(void) {
    long long shifted = (long long)realtime_ns() + g_clock_offset_ns;
    return shifted > 0 ? (uint64_t)shifted : 0;
}

static uint64_t monotonic_raw_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_us(long long us) {
    if (us <= 0) return;
    struct timespec req = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&req, &req) != 0 && errno == EINTR) {
    }
}

/* Returns the injected code (and consumes one shot), or 0 when no fault is armed. */
static int take_fault(enum sim_function fn) {
    if (g_faults[fn].times <= 0) return 0;
    g_faults[fn].times--;
    return g_faults[fn].code;
}

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    int rc = vasprintf(&out, fmt, ap);
    va_end(ap);
    return rc < 0 ? NULL : out;
}

static uint64_t next_random(void) {
    if (g_rng == 0) g_rng = realtime_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9E3779B97F4A7C15ull;
    /* xorshift64*: good enough for directory-name suffixes */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}

/* splitmix64: a seeded stream of its own, so noise is reproducible whatever names are drawn. */
static uint64_t jitter_next(void) {
    uint64_t z = (g_jitter_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform on (0, 1]: never 0, so log() below is finite. */
static double jitter_uniform(void) { return (double)((jitter_next() >> 11) + 1) * 0x1.0p-53; }

/* One kernel's duration in ns: base * exp(sigma * Z), Z standard normal (Box-Muller), so the
 * median is the launched duration and log durations have standard deviation sigma; with
 * probability g_outlier_rate it also takes g_outlier_factor times as long. Caller holds g_mu. */
static uint64_t jittered_ns(double duration_us, double sigma) {
    double ns = duration_us * 1000.0;
    if (sigma > 0.0) {
        double z = sqrt(-2.0 * log(jitter_uniform())) * cos(6.283185307179586 * jitter_uniform());
        ns *= exp(sigma * z);
    }
    if (g_outlier_rate > 0.0 && jitter_uniform() <= g_outlier_rate) ns *= g_outlier_factor;
    if (!(ns < 1e15)) ns = 1e15; /* exp() of a huge draw: keep the record sane */
    uint64_t out = (uint64_t)(ns + 0.5);
    return out == 0 ? 1 : out;
}

static int make_dir(const char *path) {
    if (mkdir(path, 0750) == 0) {
        chmod(path, 0750); /* exact mode regardless of the caller's umask, like CANN */
        return 0;
    }
    return errno == EEXIST ? 0 : -1;
}

/* mkdir -p with mode 0750 for every directory created. */
static int make_dirs(const char *path) {
    size_t len = strlen(path);
    char *buf = malloc(len + 1);
    if (buf == NULL) return -1;
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char saved = buf[i];
            buf[i] = '\0';
            if (make_dir(buf) != 0) {
                free(buf);
                return -1;
            }
            buf[i] = saved;
        }
    }
    free(buf);
    return 0;
}

static int write_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, data, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += w;
        len -= (size_t)w;
    }
    return 0;
}

static int open_output(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd >= 0) fchmod(fd, 0640);
    return fd;
}

/* CANN leaves a "<file>.done" marker holding the size once a file is complete. */
static void write_done_marker(const char *path, size_t size) {
    char *done = str_printf("%s.done", path);
    if (done == NULL) return;
    int fd = open_output(done);
    if (fd >= 0) {
        char text[64];
        int n = snprintf(text, sizeof text, "filesize:%zu\n", size);
        write_all(fd, text, (size_t)n);
        close(fd);
    }
    free(done);
}

static int write_file(const char *path, const char *data) {
    int fd = open_output(path);
    if (fd < 0) return -1;
    size_t len = strlen(data);
    int rc = write_all(fd, data, len);
    close(fd);
    if (rc == 0) write_done_marker(path, len);
    return rc;
}

/* A buffered writer for the big data files: 1M task lines must be written in milliseconds. */
typedef struct out_buf {
    int fd;
    int failed;
    size_t len, total;
    char data[1 << 20];
} out_buf;

static void ob_flush(out_buf *ob) {
    if (ob->len > 0 && !ob->failed && write_all(ob->fd, ob->data, ob->len) != 0) ob->failed = 1;
    ob->total += ob->len;
    ob->len = 0;
}

static void ob_put(out_buf *ob, const char *s, size_t n) {
    if (ob->len + n > sizeof ob->data) ob_flush(ob);
    if (n > sizeof ob->data) {
        if (!ob->failed && write_all(ob->fd, s, n) != 0) ob->failed = 1;
        ob->total += n;
        return;
    }
    memcpy(ob->data + ob->len, s, n);
    ob->len += n;
}

static void ob_str(out_buf *ob, const char *s) { ob_put(ob, s, strlen(s)); }

static void ob_char(out_buf *ob, char c) { ob_put(ob, &c, 1); }

static const char *metric_name(int metric) {
    switch (metric) {
    case 0: return "ArithmeticUtilization";
    case 1: return "PipeUtilization";
    case 2: return "Memory";
    case 3: return "MemoryL0";
    case 4: return "ResourceConflictRatio";
    case 5: return "MemoryUB";
    case 6: return "L2Cache";
    case 7: return "PipelineExecuteUtilization";
    case 8: return "MemoryAccess";
    default: return "";
    }
}

/* A metric this chip can collect (0xFF, none, counts as valid). */
static int metric_supported(int metric, enum chip chip) {
    if (metric == METRIC_NONE) return 1;
    return metric >= 0 && metric <= 8 && metric != CHIPS[chip].unsupported_metric;
}

/* PMU data is collected with the AICORE_METRICS bit and a metric this chip supports. */
static int pmu_collected(uint64_t data_type, int metric) {
    return (data_type & PROF_AICORE_METRICS) && metric != METRIC_NONE && metric_supported(metric, g_chip);
}

/* sample.json's ai_core_metrics: A2 collects PipeUtilization's cube side as "PipeUtilizationExct". */
static const char *aic_metric_name(int metric, enum chip chip) {
    if (metric == 1 && chip == CHIP_910B) return "PipeUtilizationExct";
    return metric_name(metric);
}

/* The 8 (or fewer) PMU events CANN programs for a metric group: the collector's platform tables
 * (every group's default list; the 310B-like chip's own MemoryUB list; on the 910B-like chip the
 * cube side of PipeUtilization collects PipeUtilizationExct's events). sample.json names them in
 * ai_core_profiling_events / aiv_profiling_events, and the context PMU records carry their counts
 * in that order. */
static const char *const METRIC_EVENTS[9] = {
    "0x49,0x4a,0x4b,0x4c,0x4d,0x4e,0x4f",      /* ArithmeticUtilization */
    "0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55",       /* PipeUtilization */
    "0x15,0x16,0x31,0x32,0xf,0x10,0x12,0x13",  /* Memory */
    "0x1b,0x1c,0x21,0x22,0x27,0x28,0x29,0x2a", /* MemoryL0 */
    "0x64,0x65,0x66",                          /* ResourceConflictRatio */
    "0x10,0x13,0x37,0x38,0x3d,0x3e,0x43,0x44", /* MemoryUB */
    "0x500,0x502,0x504,0x506,0x508,0x50a",     /* L2Cache */
    "0x12c,0x49,0x4a,0x9,0x302,0xc,0xd,0x303", /* PipelineExecuteUtilization */
    "0x32,0x3d,0x3e,0x206,0x20c,0x50c,0x50d,0x50e", /* MemoryAccess */
};
#define PIPE_EXCT_EVENTS "0x416,0x417,0x9,0x302,0xc,0x303,0x54,0x55"
#define MINI_V3_MEMORY_UB_EVENTS "0x37,0x38,0x1a5,0x1a6,0x17f,0x180,0x191"

/* sample.json's event list of one core side (cube: 0, vector: 1) for a collected metric. */
static const char *metric_events(int metric, enum chip chip, int vector) {
    if (metric < 0 || metric > 8) return "";
    if (metric == 1 && chip == CHIP_910B && !vector) return PIPE_EXCT_EVENTS;
    if (metric == 5 && chip == CHIP_310B) return MINI_V3_MEMORY_UB_EVENTS;
    return METRIC_EVENTS[metric];
}

#define TASK_TIME_L1_BITS (PROF_TASK_TIME | 0x2000ull | 0x4000ull | 0x8000ull)

/* sample.json's taskTime, as real runs spell it. */
static const char *task_time_level(uint64_t data_type) {
    if (data_type & TASK_TIME_L1_BITS) return "on";
    if (data_type & PROF_TASK_TIME_L0) return "l0";
    return "off";
}

static void cann_text(int cann, char *out, size_t size) { snprintf(out, size, "%d.%d", cann / 10, cann % 10); }

static void local_stamp(uint64_t ns, char *out, size_t size, int with_ms, int pretty) {
    time_t secs = (time_t)(ns / 1000000000ull);
    struct tm tm;
    localtime_r(&secs, &tm);
    unsigned ms = (unsigned)((ns / 1000000ull) % 1000ull);
    if (pretty)
        snprintf(out, size, "%04d-%02d-%02d %02d:%02d:%02d.%03u", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
    else if (with_ms)
        snprintf(out, size, "%04d%02d%02d%02d%02d%02d%03u", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
    else
        snprintf(out, size, "%04d%02d%02d%02d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* ------------------------------------------------------------------------------------------ */
/* Collections, metadata and data files                                                          */

static void free_name_rec(name_rec *r) {
    free(r->name);
    free(r->binary);
    free(r->tensors);
}

static void coll_unref(collection *c) {
    if (c == NULL || --c->refs > 0) return;
    for (collection **pp = &g_collections; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    for (size_t i = 0; i < c->nnames; i++) free_name_rec(&c->names[i]);
    free(c->names);
    free(c->dir);
    free(c);
}

static char *coll_subdir(collection *c, const char *sub) {
    if (!c->dir_made) {
        if (make_dir(c->dir) != 0) return NULL;
        c->dir_made = 1;
    }
    char *path = str_printf("%s/%s", c->dir, sub);
    if (path == NULL) return NULL;
    char *data = str_printf("%s/data", path);
    int ok = data != NULL && make_dir(path) == 0 && make_dir(data) == 0;
    free(data);
    if (!ok) {
        free(path);
        return NULL;
    }
    return path;
}

/* The clock anchors of a run starting now: the exporter's offset between local time and device
 * time is collectionTimeBegin (us) - clockMonotonicRaw / 1000, kept a whole number of us so that
 * its float arithmetic gives every start time back to the ns. */
static void set_anchors(collection *c, uint64_t now) {
    c->begin_ns = now;
    c->mono_ns = monotonic_raw_ns() / 1000ull * 1000ull;
}

/* The system counter value of wall-clock time *wall_ns* on a device of run *c*: the counter
 * equals CLOCK_MONOTONIC_RAW (dev_start.log and host_start.log anchor both at mono_ns). */
static uint64_t counter_of(const collection *c, uint64_t wall_ns_value) {
    return wall_ns_value - c->begin_ns / 1000ull * 1000ull + c->mono_ns;
}

static void write_start_info(const char *path, const collection *c) {
    char date[40];
    local_stamp(c->begin_ns, date, sizeof date, 1, 1);
    char *text = str_printf("{\"collectionDateBegin\": \"%s\", \"collectionTimeBegin\": \"%llu\", "
                            "\"clockMonotonicRaw\": \"%llu\"}\n",
                            date, (unsigned long long)(c->begin_ns / 1000ull), (unsigned long long)c->mono_ns);
    if (text != NULL) write_file(path, text);
    free(text);
}

/* host_start.log(.N) ("[Host]" / "[DeviceN]") and, for a device, dev_start.log.N. */
static void write_clock_logs(const char *folder, const collection *c, int dev) {
    unsigned long long mono = (unsigned long long)c->mono_ns;
    char *host_path = dev < 0 ? str_printf("%s/host_start.log", folder)
                              : str_printf("%s/host_start.log.%d", folder, dev);
    char section[32];
    if (dev < 0)
        snprintf(section, sizeof section, "Host");
    else
        snprintf(section, sizeof section, "Device%d", dev);
    char *host_text = str_printf("[%s]\nclock_monotonic_raw: %llu\ncntvct: %llu\ncntvct_diff: 0\n", section, mono, mono);
    if (host_path != NULL && host_text != NULL) write_file(host_path, host_text);
    free(host_path);
    free(host_text);
    if (dev < 0) return;
    char *dev_path = str_printf("%s/dev_start.log.%d", folder, dev);
    char *dev_text = str_printf("clock_monotonic_raw: %llu\ncntvct: %llu\n", mono, mono);
    if (dev_path != NULL && dev_text != NULL) write_file(dev_path, dev_text);
    free(dev_path);
    free(dev_text);
}

/* CANN 8.0 writes incompatible_features.json in host/ and device_N/: the features the collection
 * did not support (a real 910B4 run: ATTR and MemoryAccess); the exporter does not read it. */
static void write_incompatible_features(const char *folder) {
    if (g_cann >= CANN_PID_IN_NAME) return;
    char *path = str_printf("%s/incompatible_features.json", folder);
    if (path == NULL) return;
    const char *feature = "[{\"affectedComponent\":\"all\",\"affectedComponentVersion\":\"all\","
                          "\"compatibility\":\"0\",\"featureVersion\":\"1\",\"infoLog\":\"It not support feature: %s!\"}]";
    char *attr = str_printf(feature, "ATTR");
    char *access = str_printf(feature, "MemoryAccess");
    char *text = attr && access ? str_printf("{\"ATTR\":%s,\"MemoryAccess\":%s}", attr, access) : NULL;
    if (text != NULL) write_file(path, text);
    free(attr);
    free(access);
    free(text);
    free(path);
}

static void write_end_info(const char *path) {
    uint64_t now = wall_ns();
    char date[40];
    local_stamp(now, date, sizeof date, 1, 1);
    char *text = str_printf("{\"collectionDateEnd\": \"%s\", \"collectionTimeEnd\": \"%llu\", "
                            "\"clockMonotonicRaw\": \"%llu\"}\n",
                            date, (unsigned long long)(now / 1000ull),
                            (unsigned long long)monotonic_raw_ns());
    if (text != NULL) write_file(path, text);
    free(text);
}

static void hostname_or_unknown(char *out, size_t size) {
    if (gethostname(out, size) != 0) snprintf(out, size, "localhost");
    out[size - 1] = '\0';
    for (char *p = out; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) *p = '_';
}

/* The metadata keys every info.json carries: the real ones plus the simulator's settings. */
static char *common_info(int pid) {
    char hostname[256], cann[16];
    hostname_or_unknown(hostname, sizeof hostname);
    cann_text(g_cann, cann, sizeof cann);
    return str_printf("\"jobInfo\": \"NA\", \"version\": \"1.0\", \"hostname\": \"%s\", \"pid\": \"%d\", "
                      "\"OS\": \"Linux\", \"cpuNums\": %ld, \"platform_version\": \"%s\", "
                      "\"drvVersion\": %d, \"CPU\": [{\"Id\": 0, \"Name\": \"\", \"Frequency\": \"%s\", "
                      "\"Logical_CPU_Count\": 1, \"Type\": \"\"}], \"simulator\": \"asc-aprof aprofsim\", "
                      "\"aprofsim_cann_version\": \"%s\", \"aprofsim_chip\": \"%s\"",
                      hostname, pid, sysconf(_SC_NPROCESSORS_ONLN), CHIPS[g_chip].platform_version,
                      CHIPS[g_chip].drv_version, HOST_CPU_MHZ, cann, CHIP_NAMES[g_chip]);
}

/* Runtime task types (type_info_dic "5000_<n>") and GE task types the simulated runs use. */
enum {
    RT_KERNEL_AICORE = 0,
    RT_KERNEL_AICPU = 1,
    RT_PROFILING_ENABLE = 64,
    RT_PROFILING_DISABLE = 65,
    RT_KERNEL_AIVEC = 66,
    RT_DEVICE_RINGBUFFER_CONTROL = 83,
    RT_KERNEL_MIX_AIC = 108,
    RT_KERNEL_MIX_AIV = 109,
};
static const int KIND_RUNTIME_TYPE[KIND_COUNT] = {
    RT_KERNEL_AICORE,  RT_KERNEL_AIVEC,      RT_KERNEL_MIX_AIC,    RT_KERNEL_MIX_AIV,
    RT_KERNEL_AICPU,   RT_PROFILING_ENABLE,  RT_PROFILING_DISABLE, RT_DEVICE_RINGBUFFER_CONTROL,
};
/* GeTaskType of node_basic_info: AI_CORE 0, AI_CPU 1, AI_VECTOR_CORE 2, MIX_AIC 4, MIX_AIV 5. */
static const int KIND_GE_TYPE[FIRST_CONTROL_KIND] = {0, 2, 4, 5, 1};
/* stars_soc SQE types: AI_CORE (also AI Vector and MIX kernels), AI_CPU, PLACE_HOLDER_SQE. */
#define SQE_AI_CORE 0
#define SQE_AI_CPU 1
#define SQE_PLACE_HOLDER 3

static const char TYPE_INFO_DIC[] =
    "5000_0:KERNEL_AICORE\n5000_1:KERNEL_AICPU\n5000_6:MAINTENANCE\n5000_64:PROFILING_ENABLE\n"
    "5000_65:PROFILING_DISABLE\n5000_66:KERNEL_AIVEC\n5000_83:DEVICE_RINGBUFFER_CONTROL\n"
    "5000_98:FLIP_TASK\n5000_108:KERNEL_MIX_AIC\n5000_109:KERNEL_MIX_AIV\n"
    "10000_0:node_basic_info\n10000_1:tensor_info\n10000_4:context_id_info\n10000_5:launch\n";

static const char *level_text(uint64_t data_type) {
    int l1 = (data_type & TASK_TIME_L1_BITS) != 0;
    if (CHIPS[g_chip].short_level_names) return l1 ? "\"profLevel\": \"l1\"" : "\"profLevel\": \"l0\"";
    return l1 ? "\"prof_level\": \"level1\"" : "\"prof_level\": \"level0\"";
}

static int make_host_dir(collection *c, int pid) {
    char *host = coll_subdir(c, "host");
    if (host == NULL) return -1;
    char *common = common_info(pid);
    char *info = common ? str_printf("{%s, \"devices\": \"\", \"DeviceInfo\": []}\n", common) : NULL;
    /* devices "64" is how the exporter recognises the host folder. */
    char *sample = str_printf("{\"devices\": \"64\", %s, \"taskTime\": \"%s\", \"dataTypeConfig\": %llu}\n",
                              level_text(c->data_type), task_time_level(c->data_type),
                              (unsigned long long)c->data_type);
    char *info_path = str_printf("%s/info.json", host);
    char *sample_path = str_printf("%s/sample.json", host);
    char *start_path = str_printf("%s/start_info", host);
    char *types_path = str_printf("%s/data/unaging.additional.type_info_dic.slice_0", host);
    int rc = (info == NULL || sample == NULL || info_path == NULL || sample_path == NULL || start_path == NULL ||
              types_path == NULL)
                 ? -1
                 : write_file(info_path, info);
    if (rc == 0) rc = write_file(sample_path, sample);
    if (rc == 0) {
        write_start_info(start_path, c);
        write_clock_logs(host, c, -1);
        write_incompatible_features(host);
        write_file(types_path, TYPE_INFO_DIC);
        c->has_host = 1;
    }
    free(common);
    free(info);
    free(sample);
    free(info_path);
    free(sample_path);
    free(start_path);
    free(types_path);
    free(host);
    return rc;
}

static int make_device_dir(collection *c, uint32_t dev, uint64_t data_type, int metric, int pid) {
    char sub[32];
    snprintf(sub, sizeof sub, "device_%u", dev);
    char *path = coll_subdir(c, sub);
    if (path == NULL) return -1;
    int rc = -1;
    const struct chip_info *chip = &CHIPS[g_chip];
    char *common = common_info(pid);
    char *info = common ? str_printf("{%s, \"devices\": \"%u\", \"DeviceInfo\": [{\"id\": %u, "
                                     "\"ai_core_num\": %u, \"aiv_num\": %u, \"aic_frequency\": \"%u\", "
                                     "\"aiv_frequency\": \"%u\", \"hwts_frequency\": \"%s\"}]}\n",
                                     common, dev, dev, chip->ai_core_num, chip->aiv_num, chip->aic_mhz,
                                     chip->aic_mhz, HWTS_MHZ)
                        : NULL;
    /* Metrics are collected only with the AICORE_METRICS bit and a metric this chip supports. */
    int collected = pmu_collected(data_type, metric);
    int effective = collected ? metric : METRIC_NONE;
    char *sample = str_printf(
        "{\"devices\": \"%u\", \"ai_core_profiling_mode\": \"task-based\", \"ai_core_profiling\": \"%s\", "
        "\"ai_core_metrics\": \"%s\", \"aiv_metrics\": \"%s\", \"ai_core_profiling_events\": \"%s\", "
        "\"aiv_profiling_mode\": \"task-based\", \"aiv_profiling\": \"%s\", \"aiv_profiling_events\": \"%s\", "
        "\"aicoreMetrics\": %d, \"dataTypeConfig\": %llu, \"taskTime\": \"%s\", %s, "
        "\"aicore_metrics_enabled\": %s}\n",
        dev, collected ? "on" : "off", collected ? aic_metric_name(metric, g_chip) : "",
        collected ? metric_name(metric) : "", collected ? metric_events(metric, g_chip, 0) : "",
        collected ? "on" : "off", collected ? metric_events(metric, g_chip, 1) : "", effective,
        (unsigned long long)data_type, task_time_level(data_type), level_text(data_type),
        collected ? "true" : "false");
    char *info_path = str_printf("%s/info.json.%u", path, dev);
    char *sample_path = str_printf("%s/sample.json", path);
    char *start_path = str_printf("%s/start_info.%u", path, dev);
    if (info && sample && info_path && sample_path && start_path && write_file(sample_path, sample) == 0 &&
        write_file(info_path, info) == 0) {
        write_start_info(start_path, c);
        write_clock_logs(path, c, (int)dev);
        write_incompatible_features(path);
        rc = 0;
    }
    free(common);
    free(info);
    free(sample);
    free(info_path);
    free(sample_path);
    free(start_path);
    free(path);
    return rc;
}

static int append_task(device_state *d, task_rec rec) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 1024;
        task_rec *grown = realloc(d->recs, cap * sizeof *grown);
        if (grown == NULL) return -1;
        d->recs = grown;
        d->cap = cap;
    }
    d->recs[d->n++] = rec;
    return 0;
}

static void append_control(device_state *d, enum task_kind kind, uint64_t start) {
    task_rec rec = {start, CONTROL_DURATION_NS, d->next_control_task++, 0, CONTROL_STREAM, (uint8_t)kind};
    append_task(d, rec);
}

/* ------------------------------------------------------------------------------------------ */
/* Raw records (little-endian, the layouts CANN's exporter parses)                              */

static void le16(uint8_t *p, uint64_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void le32(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A task's (stream, task) ids: 16-bit task ids, and a launch counter beyond 65535 continues on
 * the next stream (the simulator never wraps task ids, so it writes no FLIP_TASK records). */
static void task_ids(const task_rec *r, uint16_t *stream, uint16_t *task) {
    *task = (uint16_t)(r->task_id & 0xFFFFu);
    *stream = r->stream == CONTROL_STREAM ? CONTROL_STREAM : (uint16_t)((r->stream + (r->task_id >> 16)) % 2048u);
}

/* stars_soc task log record: header (function | SQE type << 10), magic 0x6BD3, stream, task,
 * system counter, the rest 0. */
static void stars_record(out_buf *ob, int function, int sqe, uint16_t stream, uint16_t task, uint64_t counter) {
    uint8_t rec[64] = {0};
    le16(rec, (uint64_t)(function | (sqe << 10)));
    le16(rec + 2, 0x6BD3);
    le16(rec + 4, stream);
    le16(rec + 6, task);
    le64(rec + 8, counter);
    ob_put(ob, (const char *)rec, sizeof rec);
}

/* The 24-byte header of every host record: magic 0x5A5A, level, type, thread, data length, time. */
static void host_header(uint8_t *rec, int level, int type, uint32_t thread, uint32_t length, uint64_t ts) {
    le16(rec, 0x5A5A);
    le16(rec + 2, (uint64_t)level);
    le32(rec + 4, (uint64_t)type);
    le32(rec + 8, thread);
    le32(rec + 12, length);
    le64(rec + 16, ts);
}

/* FNV-1a: the simulated "hash" of a name (hash_dic maps it back); never 0, which means none. */
static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h == 0 ? 1 : h;
}

typedef struct raw_files {
    out_buf *api, *basic, *track;
    int level1;
} raw_files;

static int ob_open(out_buf **slot, const char *path) {
    out_buf *ob = malloc(sizeof *ob);
    if (ob == NULL) return -1;
    ob->fd = open_output(path);
    ob->failed = ob->fd < 0;
    ob->len = ob->total = 0;
    *slot = ob;
    return ob->fd < 0 ? -1 : 0;
}

static void ob_finish(out_buf *ob, const char *path) {
    if (ob == NULL) return;
    if (ob->fd >= 0) {
        ob_flush(ob);
        close(ob->fd);
        write_done_marker(path, ob->total);
    }
    free(ob);
}

/* One kernel's host records, as a node launch leaves them: the launch (api_event, level 10000
 * type 5, [ts, ts + 6], item = name hash), at level 1 its node_basic_info inside it (GE task
 * type, block dim, mix ratio 2 for MIX kernels), and the runtime's task_track (level 5000, type
 * 802: device, stream, task, batch 0, runtime task type, kernel (binary) name hash). */
static void host_kernel(raw_files *rf, const task_rec *r, uint32_t dev, const name_rec *name, uint32_t thread,
                        uint64_t ts) {
    uint16_t stream, task;
    task_ids(r, &stream, &task);
    uint64_t node = name_hash(name->name);
    uint8_t api[40] = {0};
    host_header(api, 10000, 5, thread, 0, ts);
    le64(api + 24, ts + 6);
    le64(api + 32, node);
    ob_put(rf->api, (const char *)api, sizeof api);
    if (rf->level1) {
        uint8_t basic[64] = {0};
        host_header(basic, 10000, 0, thread, 0, ts + 2);
        int mix = r->kind == KIND_MIX_AIC || r->kind == KIND_MIX_AIV;
        le64(basic + 24, node);
        le32(basic + 32, (uint64_t)KIND_GE_TYPE[r->kind]);
        le64(basic + 36, node);
        le32(basic + 44, (uint64_t)((r->block_dim & 0xFFFFu) | (mix ? 2u << 16 : 0u)));
        ob_put(rf->basic, (const char *)basic, sizeof basic);
    }
    uint8_t track[64] = {0};
    host_header(track, 5000, 802, thread, 24, ts + 4);
    le16(track + 24, dev & 0xFFFu);
    le16(track + 26, stream);
    le16(track + 28, task);
    le64(track + 32, (uint64_t)KIND_RUNTIME_TYPE[r->kind]);
    /* The binary name shows at level 0 only (real level-1 runs carry the node's own hash). */
    le64(track + 40, name_hash(name->binary != NULL && !rf->level1 ? name->binary : name->name));
    ob_put(rf->track, (const char *)track, sizeof track);
}

static void host_control(raw_files *rf, const task_rec *r, uint32_t dev, uint32_t thread, uint64_t ts) {
    uint16_t stream, task;
    task_ids(r, &stream, &task);
    uint8_t track[64] = {0};
    host_header(track, 5000, 802, thread, 24, ts);
    le16(track + 24, dev & 0xFFFu);
    le16(track + 26, stream);
    le16(track + 28, task);
    le64(track + 32, (uint64_t)KIND_RUNTIME_TYPE[r->kind]);
    ob_put(rf->track, (const char *)track, sizeof track);
}

/* The name run (of this device) holding kernel *r*, or NULL: runs and task ids both ascend. */
static const name_rec *find_name(const name_rec *const *runs, size_t n, size_t *at, const task_rec *r) {
    while (*at < n && r->task_id >= runs[*at]->first_task + runs[*at]->count) (*at)++;
    if (*at < n && r->task_id >= runs[*at]->first_task) return runs[*at];
    return NULL;
}

/* Field *index* (0-based) of a launch's TAB-separated tensor text, and its length (NULL: absent
 * or empty). Fields 0-5 are the shapes, 6 is empty, 7 the PMU record sim.launch encoded from the
 * counters it was given (see pmu_counts). */
static const char *tensor_field(const name_rec *name, int index, size_t *len) {
    const char *p = name->tensors;
    for (int tabs = 0; p != NULL && tabs < index; tabs++) {
        p = strchr(p, '\t');
        if (p != NULL) p++;
    }
    if (p == NULL || *p == '\0' || *p == '\t') return NULL;
    const char *end = strchr(p, '\t');
    *len = end != NULL ? (size_t)(end - p) : strlen(p);
    return p;
}

#define PMU_EVENTS 8
/* Share of a kernel's duration its core is busy when the launch encoded no PMU record (its host
 * record never reached the run): the events then count 0. */
#define DEFAULT_BUSY_SHARE 0.8

/* One kernel's context PMU counts from the record sim.launch encoded (field 7 of its tensor
 * text): "C;E0;...;E7", C the total cycles as "s<share>" (that share of the duration, at the
 * core clock the exporter uses, over the blocks it divides by) or "c<cycles>", each event
 * "r<per-cycle rate>" (rounded rate x total cycles) or "a<count>". */
static uint64_t pmu_counts(const char *spec, size_t len, const task_rec *r, int vector, uint64_t ev[PMU_EVENTS]) {
    const struct chip_info *chip = &CHIPS[g_chip];
    double blocks = r->block_dim ? (double)r->block_dim : 1.0;
    double cores = vector && g_chip == CHIP_910B ? (double)chip->aiv_num : (double)chip->ai_core_num;
    double waves = ceil(blocks / cores);
    /* cycles per us of total_time at the clock it ran at (a dip's stretched duration then counts
     * the cycles of the rated clock's) */
    double per_busy_us = (double)(r->mhz ? r->mhz : chip->aic_mhz) * blocks / waves;
    char buf[512];
    if (spec == NULL || len >= sizeof buf) len = 0;
    memcpy(buf, spec != NULL ? spec : "", len);
    buf[len] = '\0';
    char *save = NULL;
    char *item = len ? strtok_r(buf, ";", &save) : NULL;
    double cycles = DEFAULT_BUSY_SHARE * ((double)r->dur_ns / 1000.0) * per_busy_us;
    if (item != NULL) {
        double v = strtod(item + 1, NULL);
        cycles = item[0] == 'c' ? v : v * ((double)r->dur_ns / 1000.0) * per_busy_us;
    }
    uint64_t total = cycles > 0 ? (uint64_t)llround(cycles) : 0;
    for (int i = 0; i < PMU_EVENTS; i++) {
        item = item != NULL ? strtok_r(NULL, ";", &save) : NULL;
        double v = item != NULL ? strtod(item + 1, NULL) : 0.0;
        double n = item != NULL && item[0] == 'r' ? v * (double)total : v;
        ev[i] = n > 0 ? (uint64_t)llround(n) : 0;
    }
    return total;
}

/* ffts_profile context PMU record (function 40, 128 bytes): header (function, a 4-bit sequence
 * in bits 6-9 as real files show), magic 0x6BD3, stream, task, subtask type 0, subtask id 0,
 * ffts_type << 13 (0 AI Cube, 1 AI Vector; 5 on the 310B), total cycles, a reserved word of all
 * ones, the 8 event counts, the start and end system counters. */
static void pmu_record(out_buf *ob, unsigned seq, uint16_t stream, uint16_t task, int ffts_type, uint64_t total,
                       const uint64_t ev[PMU_EVENTS], uint64_t start, uint64_t end) {
    uint8_t rec[128] = {0};
    le16(rec, 40u | ((seq & 0xFu) << 6));
    le16(rec + 2, 0x6BD3);
    le16(rec + 4, stream);
    le16(rec + 6, task);
    le16(rec + 20, (uint64_t)ffts_type << 13);
    le64(rec + 32, total);
    le64(rec + 40, UINT64_MAX);
    for (int i = 0; i < PMU_EVENTS; i++) le64(rec + 48 + 8 * i, ev[i]);
    le64(rec + 112, start);
    le64(rec + 120, end);
    ob_put(ob, (const char *)rec, sizeof rec);
}

/* device_N/data/ffts_profile.data.N.slice_0: a context PMU record per AI Core, AI Vector and MIX
 * kernel (its main core's; the MIX slave core's block records are not written). */
static void write_pmu(collection *c, uint32_t dev, const task_rec *recs, size_t n, const name_rec *const *runs,
                      size_t nruns) {
    char *path = str_printf("%s/device_%u/data/ffts_profile.data.%u.slice_0", c->dir, dev, dev);
    out_buf *ob = NULL;
    if (path != NULL && ob_open(&ob, path) == 0) {
        size_t at = 0;
        unsigned seq = 0;
        for (size_t i = 0; i < n; i++) {
            const task_rec *r = &recs[i];
            if (r->kind >= KIND_AI_CPU) continue;
            const name_rec *name = find_name(runs, nruns, &at, r);
            size_t len = 0;
            const char *spec = name != NULL ? tensor_field(name, 7, &len) : NULL;
            int vector = r->kind == KIND_AI_VECTOR_CORE || r->kind == KIND_MIX_AIV;
            uint64_t ev[PMU_EVENTS];
            uint64_t total = pmu_counts(spec, len, r, vector, ev);
            uint16_t stream, task;
            task_ids(r, &stream, &task);
            uint64_t start = counter_of(c, r->start_ns);
            int ffts_type = g_chip == CHIP_310B ? 5 : vector;
            pmu_record(ob, seq++, stream, task, ffts_type, total, ev, start, start + r->dur_ns);
        }
    }
    ob_finish(ob, path);
    free(path);
}

/* The AI Core clock of a 910B device: one lpm record (count, type 0 = AI Core clock, 55 entries of
 * counter, MHz, 0), in device_N/data/lpmInfoConv.data.N.slice_0 from CANN 9.0 and
 * lpmFreqConv.data.N.slice_0 before. Its first entry, before the collection's counter anchor, is
 * the rated clock (the last change before the collection); a clock dip that overlaps the
 * collection adds its start (the dip's clock) and its end (the rated clock). */
static void write_clock_data(const collection *c, uint32_t dev) {
    if (g_chip != CHIP_910B) return;
    const char *kind = g_cann >= CANN_LPM_INFO ? "lpmInfoConv" : "lpmFreqConv";
    char *path = str_printf("%s/device_%u/data/%s.data.%u.slice_0", c->dir, dev, kind, dev);
    if (path == NULL) return;
    uint8_t rec[888] = {0};
    unsigned rated = CHIPS[g_chip].aic_mhz, count = 0;
    uint64_t entries[3][2] = {{c->mono_ns - 1000u, rated}};
    count = 1;
    uint64_t begin = c->begin_ns;
    if (g_dip_mhz != 0 && g_dip_end_ns > begin && g_dip_end_ns > g_dip_start_ns) {
        uint64_t from = g_dip_start_ns > begin ? g_dip_start_ns : begin;
        entries[count][0] = counter_of(c, from);
        entries[count++][1] = g_dip_mhz;
        entries[count][0] = counter_of(c, g_dip_end_ns);
        entries[count++][1] = rated;
    }
    le32(rec, count);
    le32(rec + 4, 0);
    for (unsigned i = 0; i < count; i++) {
        le64(rec + 8 + 16 * i, entries[i][0]);
        le32(rec + 16 + 16 * i, entries[i][1]);
    }
    out_buf *ob = NULL;
    if (ob_open(&ob, path) == 0) ob_put(ob, (const char *)rec, sizeof rec);
    ob_finish(ob, path);
    free(path);
}

/* Everything one stopped device leaves in run *c*: device_N/data/stars_soc.data.N.slice_0 (the
 * task log: a start and an end record per task, none without task time), device_N/end_info.N
 * and, when the run has a host folder, this device's host records as host/data slice k: control
 * tasks' task_track records, and for every kernel whose name reached the host its launch. */
static void write_device_run(collection *c, uint32_t dev, const task_rec *recs, size_t n, uint64_t data_type,
                             int metric, const name_rec *const *runs, size_t nruns) {
    char *soc_path = str_printf("%s/device_%u/data/stars_soc.data.%u.slice_0", c->dir, dev, dev);
    char *end_path = str_printf("%s/device_%u/end_info.%u", c->dir, dev, dev);
    int task_time = (data_type & (TASK_TIME_L1_BITS | PROF_TASK_TIME_L0)) != 0;
    out_buf *soc = NULL;
    if (task_time && soc_path != NULL && ob_open(&soc, soc_path) == 0) {
        for (size_t i = 0; i < n; i++) {
            const task_rec *r = &recs[i];
            uint16_t stream, task;
            task_ids(r, &stream, &task);
            int sqe = r->kind >= FIRST_CONTROL_KIND ? SQE_PLACE_HOLDER : r->kind == KIND_AI_CPU ? SQE_AI_CPU : SQE_AI_CORE;
            uint64_t start = counter_of(c, r->start_ns);
            stars_record(soc, 0, sqe, stream, task, start);
            stars_record(soc, 1, sqe, stream, task, start + r->dur_ns);
        }
    }
    ob_finish(soc, soc_path);
    if (task_time && pmu_collected(data_type, metric)) write_pmu(c, dev, recs, n, runs, nruns);
    write_clock_data(c, dev);
    if (end_path != NULL) write_end_info(end_path);
    free(soc_path);
    free(end_path);
    if (!c->has_host || !task_time) return;
    unsigned k = c->host_slices++;
    char *paths[4] = {
        str_printf("%s/host/data/aging.api_event.data.slice_%u", c->dir, k),
        str_printf("%s/host/data/aging.compact.node_basic_info.slice_%u", c->dir, k),
        str_printf("%s/host/data/aging.compact.task_track.slice_%u", c->dir, k),
        str_printf("%s/host/data/unaging.additional.hash_dic.slice_%u", c->dir, k),
    };
    raw_files rf = {NULL, NULL, NULL, (data_type & TASK_TIME_L1_BITS) != 0};
    int ok = paths[0] && paths[1] && paths[2] && paths[3] && ob_open(&rf.api, paths[0]) == 0 &&
             (!rf.level1 || ob_open(&rf.basic, paths[1]) == 0) && ob_open(&rf.track, paths[2]) == 0;
    out_buf *dic = NULL;
    ok = ok && ob_open(&dic, paths[3]) == 0;
    if (ok) {
        uint32_t thread = (uint32_t)getpid();
        size_t at = 0;
        const name_rec *last = NULL;
        for (size_t i = 0; i < n; i++) {
            const task_rec *r = &recs[i];
            /* Host time: CLOCK_MONOTONIC_RAW-like slots after the start, 10 ns apart. */
            uint64_t ts = c->mono_ns + 10ull * c->host_slot++;
            if (r->kind >= FIRST_CONTROL_KIND) {
                host_control(&rf, r, dev, thread, ts);
                continue;
            }
            const name_rec *name = find_name(runs, nruns, &at, r);
            if (name == NULL) continue; /* the host stream was cut: no host record */
            host_kernel(&rf, r, dev, name, thread, ts);
            if (name != last) {
                const char *names[2] = {name->name, name->binary};
                for (int j = 0; j < 2; j++) {
                    if (names[j] == NULL) continue;
                    char line[32];
                    int len = snprintf(line, sizeof line, "%llu:", (unsigned long long)name_hash(names[j]));
                    ob_put(dic, line, (size_t)len);
                    ob_str(dic, names[j]);
                    ob_char(dic, '\n');
                }
                last = name;
            }
        }
    }
    ob_finish(rf.api, paths[0]);
    ob_finish(rf.basic, paths[1]);
    ob_finish(rf.track, paths[2]);
    ob_finish(dic, paths[3]);
    for (int j = 0; j < 4; j++) free(paths[j]);
}

/* Flush the names gathered so far into the owner and stop accepting more. */
static void host_cut(void) {
    collection *c = g_host.owner;
    if (c != NULL && !g_host.cut) {
        char *end_path = str_printf("%s/host/end_info", c->dir);
        if (end_path != NULL) write_end_info(end_path);
        free(end_path);
    }
    if (c != NULL && !g_host.cut && g_host.n > 0) {
        name_rec *grown = realloc(c->names, (c->nnames + g_host.n) * sizeof *grown);
        if (grown != NULL) {
            c->names = grown;
            memcpy(c->names + c->nnames, g_host.recs, g_host.n * sizeof *grown);
            c->nnames += g_host.n;
            g_host.n = 0;
        }
    }
    for (size_t i = 0; i < g_host.n; i++) free_name_rec(&g_host.recs[i]);
    g_host.n = 0;
    g_host.cut = 1;
}

/* One stop call's effect on the host: the stream is cut; the owner is released at refcount 0. */
static void host_release(int all) {
    if (g_host.refcount == 0) return;
    host_cut();
    g_host.refcount = all ? 0 : g_host.refcount - 1;
    if (g_host.refcount == 0) {
        collection *owner = g_host.owner;
        g_host.owner = NULL;
        g_host.cut = 0;
        free(g_host.recs);
        g_host.recs = NULL;
        g_host.cap = 0;
        coll_unref(owner);
    }
}

/* The name runs of device *dev* that reached run *c*'s host (moved at a cut, or still gathering). */
static const name_rec **device_names(const collection *c, uint32_t dev, size_t *count) {
    size_t total = c->nnames + (g_host.owner == c && !g_host.cut ? g_host.n : 0);
    const name_rec **out = malloc((total ? total : 1) * sizeof *out);
    size_t n = 0;
    if (out != NULL) {
        for (size_t i = 0; i < c->nnames; i++)
            if (c->names[i].device == dev) out[n++] = &c->names[i];
        if (g_host.owner == c && !g_host.cut)
            for (size_t i = 0; i < g_host.n; i++)
                if (g_host.recs[i].device == dev) out[n++] = &g_host.recs[i];
    }
    *count = n;
    return out;
}

static void stop_device(uint32_t dev) {
    device_state *d = &g_dev[dev];
    if (!d->running) return;
    uint64_t now = wall_ns();
    uint64_t t = d->clock_ns > now ? d->clock_ns : now;
    append_control(d, KIND_PROFILING_DISABLE, t);
    append_control(d, KIND_RINGBUFFER, t + 20000ull);
    d->clock_ns = t + 20000ull + CONTROL_DURATION_NS;
    size_t nruns = 0;
    const name_rec **runs = device_names(d->coll, dev, &nruns);
    write_device_run(d->coll, dev, d->recs, d->n, d->data_type, d->metric, runs, nruns);
    free(runs);
    free(d->recs);
    d->recs = NULL;
    d->n = d->cap = 0;
    d->running = 0;
    collection *c = d->coll;
    d->coll = NULL;
    coll_unref(c);
}

static void stop_everything(void) {
    for (uint32_t dev = 0; dev < MAX_DEV; dev++) stop_device(dev);
    for (collection *c = g_collections; c != NULL;) {
        collection *next = c->next;
        if (c->host_only) {
            c->host_only = 0;
            coll_unref(c);
        }
        c = next;
    }
    host_release(1);
    g_repeat_start = 0;
}

static sim_config *find_config(const void *p) {
    for (sim_config *c = g_configs; c != NULL; c = c->next)
        if ((const void *)c == p) return c;
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* CANN API                                                                                     */

/* Resolve, create and check the result path, and become initialised (the lock is held). */
static int init_locked(const char *path) {
    char *absolute = NULL;
    if (path[0] == '/') {
        absolute = strdup(path);
    } else {
        char *cwd = getcwd(NULL, 0);
        if (cwd != NULL) absolute = str_printf("%s/%s", cwd, path);
        free(cwd);
    }
    if (absolute == NULL) return ACL_ERROR_INVALID_FILE;
    struct stat st;
    char *canonical = NULL;
    if (make_dirs(absolute) == 0 && stat(absolute, &st) == 0 && S_ISDIR(st.st_mode) &&
        access(absolute, W_OK | X_OK) == 0)
        canonical = realpath(absolute, NULL);
    free(absolute);
    if (canonical == NULL) return ACL_ERROR_INVALID_FILE;
    free(g_result_path);
    g_result_path = canonical;
    g_initialized = 1;
    return ACL_SUCCESS;
}

EXPORT int aclprofInit(const char *profilerResultPath, size_t length) {
    pthread_mutex_lock(&g_mu);
    int rc = take_fault(F_INIT);
    if (rc != 0) goto out;
    sleep_us(g_latency_us[L_INIT]);
    if (profilerResultPath == NULL || length == 0 || length > MAX_PATH_BYTES ||
        strlen(profilerResultPath) != length) {
        rc = ACL_ERROR_INVALID_PARAM;
        goto out;
    }
    const char *mode = getenv("PROFILING_MODE");
    if (mode != NULL && strcmp(mode, "dynamic") == 0) {
        rc = ACL_ERROR_FEATURE_UNSUPPORTED;
        goto out;
    }
    if (g_initialized) {
        rc = ACL_ERROR_REPEAT_INITIALIZE;
        goto out;
    }
    rc = init_locked(profilerResultPath);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT int aclprofFinalize(void) {
    pthread_mutex_lock(&g_mu);
    int rc = take_fault(F_FINALIZE);
    if (rc != 0) goto out;
    sleep_us(g_latency_us[L_FINALIZE]);
    if (!g_initialized) {
        /* 9.1+: finalize without init is a successful no-op. */
        rc = g_cann >= CANN_START_INITIALISES ? ACL_SUCCESS : ACL_ERROR_PROF_NOT_RUN;
        goto out;
    }
    /* Finalize cancels (and flushes) whatever is still running; configs stay live. */
    stop_everything();
    g_initialized = 0;
    free(g_result_path);
    g_result_path = NULL;
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT void *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums, int aicoreMetrics,
                                 const void *aicoreEvents, uint64_t dataTypeConfig) {
    pthread_mutex_lock(&g_mu);
    sim_config *cfg = NULL;
    if (take_fault(F_CREATE) != 0) goto out;
    if (aicoreEvents != NULL) goto out;
    if (deviceIdList == NULL && deviceNums > 0) goto out;
    if (deviceNums > MAX_DEV || deviceNums > (uint32_t)g_device_count) goto out;
    if (deviceNums == 0 && !(dataTypeConfig & PROF_MSPROFTX)) goto out;
    /* No check of aicoreMetrics here: CANN looks at the metric only at start (9.2) or never. */
    uint64_t seen = 0;
    for (uint32_t i = 0; i < deviceNums; i++) {
        uint32_t id = deviceIdList[i];
        if (id >= (uint32_t)g_device_count || (seen & (1ull << id))) goto out;
        seen |= 1ull << id;
    }
    cfg = calloc(1, sizeof *cfg);
    if (cfg == NULL) goto out;
    cfg->ndev = deviceNums;
    for (uint32_t i = 0; i < deviceNums; i++) cfg->devs[i] = deviceIdList[i];
    cfg->metric = aicoreMetrics;
    /* CANN adds the L0 bit whenever L1 task time is asked for, and always its internal bit. */
    cfg->data_type = dataTypeConfig | ((dataTypeConfig & PROF_TASK_TIME) ? PROF_TASK_TIME_L0 : 0) |
                     PROF_AICPU_MODEL;
    cfg->next = g_configs;
    g_configs = cfg;
    g_live_configs++;
out:
    pthread_mutex_unlock(&g_mu);
    return cfg;
}

EXPORT int aclprofDestroyConfig(const void *profilerConfig) {
    pthread_mutex_lock(&g_mu);
    int rc = take_fault(F_DESTROY);
    if (rc != 0) goto out;
    if (profilerConfig == NULL) {
        rc = ACL_ERROR_INVALID_PARAM;
        goto out;
    }
    /* CANN checks NULL only and frees anything else: an unknown pointer (a double destroy) is a
     * double free there. The simulator returns 0 too, frees nothing and counts the misuse. */
    rc = ACL_SUCCESS;
    int found = 0;
    for (sim_config **pp = &g_configs; *pp != NULL; pp = &(*pp)->next) {
        if ((const void *)*pp == profilerConfig) {
            sim_config *dead = *pp;
            *pp = dead->next;
            free(dead);
            g_live_configs--;
            found = 1;
            break;
        }
    }
    if (!found) g_invalid_destroys++;
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* Compare a config's data types with what is running (devices in its list, and the host). */
static int config_consistent(const sim_config *cfg) {
    for (uint32_t i = 0; i < cfg->ndev; i++) {
        const device_state *d = &g_dev[cfg->devs[i]];
        if (d->running && d->data_type != cfg->data_type) return 0;
    }
    return g_host.refcount == 0 || g_host.data_type == cfg->data_type;
}

/* A PROF_* directory name: the pid is in it from CANN 8.5, 16 letters before. */
static char *run_name(unsigned counter, int pid, uint64_t now) {
    char stamp[32], letters[17];
    local_stamp(now, stamp, sizeof stamp, 1, 0);
    int with_pid = g_cann >= CANN_PID_IN_NAME;
    int nletters = with_pid ? 8 : 16;
    for (int i = 0; i < nletters; i++) letters[i] = (char)('A' + next_random() % 18u);
    letters[nletters] = '\0';
    if (with_pid) return str_printf("PROF_%06u_%s_%08d%s", counter, stamp, pid, letters);
    return str_printf("PROF_%06u_%s_%s", counter, stamp, letters);
}

/* A complete run in *result_path* as another process would leave it: host/ and device_N/ with
 * metadata carrying *pid*, *count* kernels named *kernel*. Returns 0, or -errno. */
static int write_foreign_run(const char *result_path, int pid, const char *name, uint32_t device,
                             const char *kernel, uint32_t count, char *out, size_t out_size) {
    uint64_t now = wall_ns();
    char *dir_name = name != NULL ? strdup(name) : run_name(1, pid, now);
    if (dir_name == NULL) return -ENOMEM;
    collection c = {0};
    c.dir = str_printf("%s/%s", result_path, dir_name);
    int rc = 0;
    if (c.dir == NULL) {
        rc = -ENOMEM;
    } else if (mkdir(c.dir, 0750) != 0) {
        rc = -errno;
    } else {
        chmod(c.dir, 0750);
        c.dir_made = 1;
        uint64_t types = PROF_TASK_TIME | PROF_TASK_TIME_L0 | PROF_AICORE_METRICS | PROF_AICPU_MODEL;
        c.data_type = types;
        set_anchors(&c, now);
        if (make_host_dir(&c, pid) != 0 || make_device_dir(&c, device, types, 1, pid) != 0) {
            rc = -EIO;
        } else {
            size_t n = (size_t)count + 3;
            task_rec *recs = calloc(n, sizeof *recs);
            if (recs == NULL) {
                rc = -ENOMEM;
            } else {
                uint64_t t = now;
                recs[0] = (task_rec){t, CONTROL_DURATION_NS, 0, 0, CONTROL_STREAM, KIND_PROFILING_ENABLE};
                t += CONTROL_DURATION_NS + KERNEL_GAP_NS;
                for (uint32_t i = 0; i < count; i++) {
                    recs[1 + i] = (task_rec){t, 10000ull, i, 1, KERNEL_STREAM, KIND_AI_CORE};
                    t += 10000ull + KERNEL_GAP_NS;
                }
                recs[count + 1] = (task_rec){t, CONTROL_DURATION_NS, 1, 0, CONTROL_STREAM, KIND_PROFILING_DISABLE};
                recs[count + 2] = (task_rec){t + 20000ull, CONTROL_DURATION_NS, 2, 0, CONTROL_STREAM, KIND_RINGBUFFER};
                name_rec names = {device, KERNEL_STREAM, 0, count, KIND_AI_CORE, (char *)kernel, NULL, NULL};
                const name_rec *runs[1] = {&names};
                write_device_run(&c, device, recs, n, types, 1, runs, count > 0 ? 1 : 0);
                free(recs);
                char *end_path = str_printf("%s/host/end_info", c.dir);
                if (end_path != NULL) write_end_info(end_path);
                free(end_path);
            }
        }
    }
    if (rc == 0 && out != NULL && out_size > 0) snprintf(out, out_size, "%s", dir_name);
    free(c.dir);
    free(dir_name);
    return rc;
}

static int start_collection(const sim_config *cfg) {
    collection *c = calloc(1, sizeof *c);
    if (c == NULL) return ACL_ERROR_PROFILING_FAILURE;
    uint64_t now = wall_ns();
    g_prof_counter = g_prof_counter >= 999999u ? 1u : g_prof_counter + 1u;
    char *name = run_name(g_prof_counter, (int)getpid(), now);
    c->dir = name ? str_printf("%s/%s", g_result_path, name) : NULL;
    free(name);
    if (c->dir == NULL) {
        free(c);
        return ACL_ERROR_PROFILING_FAILURE;
    }
    c->data_type = cfg->data_type;
    c->metric = cfg->metric;
    set_anchors(c, now);
    c->next = g_collections;
    g_collections = c;
    c->refs = 1; /* held until the end of this function */

    /* The first active collection owns host/; later overlapping ones get none (CANN 8.5). */
    if (g_host.refcount == 0) {
        if (make_host_dir(c, (int)getpid()) != 0) {
            coll_unref(c);
            return ACL_ERROR_PROFILING_FAILURE;
        }
        g_host.owner = c;
        g_host.cut = 0;
        g_host.data_type = cfg->data_type;
        g_host.n = 0;
        c->refs++;
    }
    g_host.refcount++;
    if (cfg->ndev == 0) {
        c->host_only = 1;
        c->refs++;
    }
    for (uint32_t i = 0; i < cfg->ndev; i++) {
        uint32_t dev = cfg->devs[i];
        device_state *d = &g_dev[dev];
        if (make_device_dir(c, dev, cfg->data_type, cfg->metric, (int)getpid()) != 0) continue;
        d->running = 1;
        d->coll = c;
        d->data_type = cfg->data_type;
        d->metric = cfg->metric;
        d->n = 0;
        if (d->clock_ns < now) d->clock_ns = now;
        append_control(d, KIND_PROFILING_ENABLE, d->clock_ns);
        d->clock_ns += CONTROL_DURATION_NS + KERNEL_GAP_NS;
        c->refs++;
    }
    if (g_foreign.armed) {
        /* Another process started into the same result path at the same moment. */
        g_foreign.armed = 0;
        write_foreign_run(g_result_path, g_foreign.pid, g_foreign.name, g_foreign.device, g_foreign.kernel,
                          g_foreign.count, NULL, 0);
    }
    coll_unref(c);
    return ACL_SUCCESS;
}

EXPORT int aclprofStart(const void *profilerConfig) {
    pthread_mutex_lock(&g_mu);
    int rc = take_fault(F_START);
    if (rc != 0) goto out;
    sleep_us(g_latency_us[L_START]);
    if (!g_initialized) {
        if (g_cann < CANN_START_INITIALISES) {
            rc = ACL_ERROR_PROF_NOT_RUN;
            goto out;
        }
        /* 9.1+: initialise with the path aclprofSetConfig gave, or the working directory. */
        rc = init_locked(g_pending_path != NULL ? g_pending_path : ".");
        if (rc != ACL_SUCCESS) goto out;
    }
    const sim_config *cfg = find_config(profilerConfig);
    if (cfg == NULL) {
        rc = ACL_ERROR_INVALID_PARAM;
        goto out;
    }
    /* CANN 9.x: a repeated start is checked for consistency and otherwise ignored. */
    if (g_cann >= CANN_REPEAT_START_IS_NO_OP && g_repeat_start) {
        rc = config_consistent(cfg) ? ACL_SUCCESS : ACL_ERROR_INVALID_PROFILING_CONFIG;
        goto out;
    }
    if (g_cmd_mode) {
        rc = ACL_ERROR_PROF_ALREADY_RUN;
        goto out;
    }
    if (cfg->data_type & ~PROF_SUPPORTED_MASK) {
        rc = ACL_ERROR_PROF_MODULES_UNSUPPORTED;
        goto out;
    }
    if (g_cann >= CANN_START_CHECKS_METRIC && (cfg->data_type & PROF_AICORE_METRICS) &&
        !metric_supported(cfg->metric, g_chip)) {
        rc = ACL_ERROR_INVALID_PARAM;
        goto out;
    }
    for (uint32_t i = 0; i < cfg->ndev; i++) {
        if (g_dev[cfg->devs[i]].running) {
            rc = ACL_ERROR_PROF_ALREADY_RUN;
            goto out;
        }
    }
    rc = start_collection(cfg);
    if (rc == ACL_SUCCESS && g_cann >= CANN_REPEAT_START_IS_NO_OP) g_repeat_start = 1;
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT int aclprofStop(const void *profilerConfig) {
    pthread_mutex_lock(&g_mu);
    int rc = take_fault(F_STOP);
    if (rc != 0) goto out;
    sleep_us(g_latency_us[L_STOP]);
    if (!g_initialized) {
        /* 9.1+: stop without init is a successful no-op. */
        rc = g_cann >= CANN_START_INITIALISES ? ACL_SUCCESS : ACL_ERROR_PROF_NOT_RUN;
        goto out;
    }
    const sim_config *cfg = find_config(profilerConfig);
    if (cfg == NULL) {
        rc = ACL_ERROR_INVALID_PARAM;
        goto out;
    }
    if (!config_consistent(cfg)) {
        rc = ACL_ERROR_INVALID_PROFILING_CONFIG;
        goto out;
    }
    if (g_cann >= CANN_REPEAT_START_IS_NO_OP) {
        /* 9.x stops every running device, not just the config's. */
        stop_everything();
        rc = ACL_SUCCESS;
        goto out;
    }
    collection *host_only = NULL;
    int any = 0;
    for (uint32_t i = 0; i < cfg->ndev; i++) any |= g_dev[cfg->devs[i]].running;
    if (cfg->ndev == 0) {
        for (collection *c = g_collections; c != NULL; c = c->next)
            if (c->host_only) host_only = c; /* list is newest first: keep the oldest */
        any = host_only != NULL;
    }
    if (!any) {
        rc = ACL_ERROR_INVALID_PARAM;
        goto out;
    }
    /* CANN stops the host task before looking at its share count: the stream is cut now. */
    host_release(0);
    for (uint32_t i = 0; i < cfg->ndev; i++) stop_device(cfg->devs[i]);
    if (host_only != NULL) {
        host_only->host_only = 0;
        coll_unref(host_only);
    }
    rc = ACL_SUCCESS;
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT int aclprofSetConfig(int configType, const char *config, size_t configLength) {
    pthread_mutex_lock(&g_mu);
    int rc = take_fault(F_SET_CONFIG);
    if (rc != 0) goto out;
    if (!g_initialized && g_cann < CANN_START_INITIALISES) {
        rc = ACL_ERROR_UNINITIALIZE;
    } else if (config == NULL || configLength > MAX_SET_CONFIG_BYTES) {
        rc = ACL_ERROR_INVALID_PARAM;
    } else if (configType == SET_CONFIG_PROF_PATH && !g_initialized) {
        /* 9.1+: remembered for the start that initialises by itself. */
        char *path = strndup(config, configLength);
        if (path == NULL || path[0] == '\0') {
            free(path);
            rc = ACL_ERROR_INVALID_PARAM;
        } else {
            free(g_pending_path);
            g_pending_path = path;
        }
    }
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Simulator controls                                                                           */

static int valid_text(const char *s, size_t max, int allow_tab) {
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        unsigned char ch = (unsigned char)s[n];
        if (n >= max) return 0;
        if (ch == 0x7f || (ch < 0x20 && !(allow_tab && ch == '\t'))) return 0;
    }
    return 1;
}

static int kind_of(const char *task_type) {
    for (int k = 0; k < FIRST_CONTROL_KIND; k++)
        if (strcmp(task_type, KIND_NAMES[k]) == 0) return k;
    return -1;
}

static int same_text(const char *a, const char *b) {
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Like aprofsim_launch, plus optional tensor info (six TAB-separated fields) for op_summary and
 * an optional binary name (what level-0 task_time shows; real aclnn ops show a hashed one). */
static int launch_impl(uint32_t device, const char *name, const char *task_type, double duration_us,
                       uint32_t block_dim, uint32_t count, const char *tensor_info, const char *binary_name,
                       double sigma);

EXPORT int aprofsim_launch_ex(uint32_t device, const char *name, const char *task_type,
                              double duration_us, uint32_t block_dim, uint32_t count,
                              const char *tensor_info, const char *binary_name) {
    return launch_impl(device, name, task_type, duration_us, block_dim, count, tensor_info, binary_name, -1.0);
}

/* Like aprofsim_launch_ex with the noise's sigma for this launch (< 0: the process setting). */
EXPORT int aprofsim_launch_noisy(uint32_t device, const char *name, const char *task_type,
                                 double duration_us, uint32_t block_dim, uint32_t count,
                                 const char *tensor_info, const char *binary_name, double sigma) {
    if (!(sigma < 10.0)) return -7; /* also rejects NaN */
    return launch_impl(device, name, task_type, duration_us, block_dim, count, tensor_info, binary_name, sigma);
}

/* Noise of every later launch: sigma of log durations (0: none), the chance of an outlier and
 * its factor, and the seed of the noise's own generator. */
EXPORT int aprofsim_set_jitter(double sigma, double outlier_rate, double outlier_factor, uint64_t seed) {
    if (!(sigma >= 0.0 && sigma < 10.0) || !(outlier_rate >= 0.0 && outlier_rate <= 1.0) ||
        !(outlier_factor >= 1.0 && outlier_factor <= 1e6))
        return -1;
    pthread_mutex_lock(&g_mu);
    g_jitter_sigma = sigma;
    g_outlier_rate = outlier_rate;
    g_outlier_factor = outlier_factor;
    g_jitter_state = seed;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* The AI Core clock (MHz) a kernel of *kind* starting at *start_ns* runs at: the dip's inside the
 * clock dip on a chip whose runs record the clock (910B), else the rated one. Caller holds g_mu. */
static unsigned clock_at(uint64_t start_ns, int kind) {
    int dipped = g_dip_mhz != 0 && g_chip == CHIP_910B && kind < KIND_AI_CPU && start_ns >= g_dip_start_ns &&
                 start_ns < g_dip_end_ns;
    return dipped ? g_dip_mhz : CHIPS[g_chip].aic_mhz;
}

static int launch_impl(uint32_t device, const char *name, const char *task_type, double duration_us,
                       uint32_t block_dim, uint32_t count, const char *tensor_info, const char *binary_name,
                       double sigma) {
    if (name == NULL || name[0] == '\0' || !valid_text(name, MAX_NAME_BYTES, 0)) return -1;
    if (task_type == NULL || kind_of(task_type) < 0) return -2;
    if (!(duration_us > 0.0 && duration_us <= 1e9)) return -3; /* also rejects NaN */
    if (tensor_info != NULL && !valid_text(tensor_info, MAX_TENSOR_BYTES, 1)) return -5;
    if (binary_name != NULL && (binary_name[0] == '\0' || !valid_text(binary_name, MAX_NAME_BYTES, 0))) return -1;
    if (count > (uint32_t)INT_MAX) return -5;
    int kind = kind_of(task_type);
    pthread_mutex_lock(&g_mu);
    int rc = 0;
    if (device >= (uint32_t)g_device_count) {
        rc = -4;
        goto out;
    }
    device_state *d = &g_dev[device];
    if (!d->running || count == 0) goto out;
    if (d->cap - d->n < count) {
        /* geometric growth: loops of count=1 launches must stay linear */
        size_t cap = d->cap * 2 > d->n + count ? d->cap * 2 : d->n + count;
        task_rec *grown = realloc(d->recs, cap * sizeof *grown);
        if (grown == NULL) {
            rc = -6;
            goto out;
        }
        d->recs = grown;
        d->cap = cap;
    }
    if (sigma < 0.0) sigma = g_jitter_sigma;
    uint64_t now = wall_ns();
    if (d->clock_ns < now) d->clock_ns = now;
    uint32_t first = d->next_task;
    task_rec *out = d->recs + d->n;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t dur = jittered_ns(duration_us, sigma);
        unsigned mhz = clock_at(d->clock_ns, kind);
        if (mhz != CHIPS[g_chip].aic_mhz) /* a slower clock stretches it: the same cycles take longer */
            dur = (uint64_t)llround((double)dur * CHIPS[g_chip].aic_mhz / mhz);
        out[i].start_ns = d->clock_ns;
        out[i].dur_ns = dur;
        out[i].mhz = mhz;
        out[i].task_id = d->next_task++;
        out[i].block_dim = block_dim;
        out[i].stream = KERNEL_STREAM;
        out[i].kind = (uint8_t)kind;
        d->clock_ns += dur + KERNEL_GAP_NS;
    }
    d->n += count;
    rc = (int)count;
    /* The name goes to the host stream of whoever owns it, unless that stream was cut. */
    if (g_host.owner != NULL && !g_host.cut) {
        name_rec *last = g_host.n ? &g_host.recs[g_host.n - 1] : NULL;
        if (last != NULL && last->device == device && last->kind == kind &&
            last->first_task + last->count == first && strcmp(last->name, name) == 0 &&
            same_text(last->tensors, tensor_info) && same_text(last->binary, binary_name)) {
            last->count += count; /* back-to-back launches of one kernel share a record */
            goto out;
        }
        if (g_host.n == g_host.cap) {
            size_t cap = g_host.cap ? g_host.cap * 2 : 256;
            name_rec *grown = realloc(g_host.recs, cap * sizeof *grown);
            if (grown == NULL) goto out; /* host data lost, like a full ring buffer */
            g_host.recs = grown;
            g_host.cap = cap;
        }
        name_rec rec = {device, KERNEL_STREAM, first, count, (uint8_t)kind, strdup(name),
                        binary_name ? strdup(binary_name) : NULL, tensor_info ? strdup(tensor_info) : NULL};
        if (rec.name != NULL)
            g_host.recs[g_host.n++] = rec;
        else
            free_name_rec(&rec);
    }
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT int aprofsim_launch(uint32_t device, const char *name, const char *task_type, double duration_us,
                           uint32_t block_dim, uint32_t count) {
    return aprofsim_launch_ex(device, name, task_type, duration_us, block_dim, count, NULL, NULL);
}

/* The CANN version to behave as, major * 10 + minor (80 ... 92). */
EXPORT int aprofsim_set_cann(int version) {
    if (version < 80 || version > 92 || version % 10 > 9) return -1;
    pthread_mutex_lock(&g_mu);
    g_cann = version;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

EXPORT int aprofsim_get_cann(void) {
    pthread_mutex_lock(&g_mu);
    int v = g_cann;
    pthread_mutex_unlock(&g_mu);
    return v;
}

/* The chip by its name ("910B" or "310B"). */
EXPORT int aprofsim_set_chip(const char *name) {
    if (name == NULL) return -1;
    for (int i = 0; i < CHIP_COUNT; i++) {
        if (strcmp(name, CHIP_NAMES[i]) == 0) {
            pthread_mutex_lock(&g_mu);
            g_chip = (enum chip)i;
            pthread_mutex_unlock(&g_mu);
            return 0;
        }
    }
    return -1;
}

EXPORT const char *aprofsim_get_chip(void) {
    pthread_mutex_lock(&g_mu);
    const char *name = CHIP_NAMES[g_chip];
    pthread_mutex_unlock(&g_mu);
    return name;
}

/* A dip of the AI Core clock to *mhz* from *start_ns* to *end_ns* (simulated wall-clock ns), as the
 * lpm clock records of the runs it overlaps show; mhz 0 clears it. A kernel launched while it is
 * set and starting inside it runs duration x rated / mhz (its cycles unchanged). */
EXPORT int aprofsim_set_clock_dip(unsigned long long start_ns, unsigned long long end_ns, unsigned mhz) {
    if (mhz != 0 && end_ns <= start_ns) return -1;
    pthread_mutex_lock(&g_mu);
    g_dip_start_ns = start_ns;
    g_dip_end_ns = end_ns;
    g_dip_mhz = mhz;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* Shift the simulated wall clock (run names, start/end info, kernel timestamps). */
EXPORT void aprofsim_set_clock_offset_ns(long long offset) {
    pthread_mutex_lock(&g_mu);
    g_clock_offset_ns = offset;
    pthread_mutex_unlock(&g_mu);
}

EXPORT int aprofsim_invalid_destroy_count(void) {
    pthread_mutex_lock(&g_mu);
    int n = g_invalid_destroys;
    pthread_mutex_unlock(&g_mu);
    return n;
}

static int valid_foreign(const char *name, const char *kernel) {
    if (kernel == NULL || kernel[0] == '\0' || !valid_text(kernel, MAX_NAME_BYTES, 0)) return 0;
    if (name == NULL) return 1;
    return name[0] != '\0' && strchr(name, '/') == NULL && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
           valid_text(name, 255, 0);
}

/* Write a run "another process" (pid) made into result_path now; its name goes to out. */
EXPORT int aprofsim_write_foreign_run(const char *result_path, int pid, const char *name, uint32_t device,
                                      const char *kernel, uint32_t count, char *out, size_t out_size) {
    if (result_path == NULL || pid < 0 || pid > 99999999 || !valid_foreign(name, kernel)) return -EINVAL;
    if (device >= MAX_DEV || count > 1000000u) return -EINVAL;
    pthread_mutex_lock(&g_mu);
    int rc = write_foreign_run(result_path, pid, name, device, kernel, count, out, out_size);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* The next effective aclprofStart also writes such a run into its result path. */
EXPORT int aprofsim_foreign_run_on_next_start(int pid, const char *name, uint32_t device, const char *kernel,
                                              uint32_t count) {
    if (pid < 0 || pid > 99999999 || !valid_foreign(name, kernel)) return -EINVAL;
    if (device >= MAX_DEV || count > 1000000u) return -EINVAL;
    char *name_copy = name != NULL ? strdup(name) : NULL;
    char *kernel_copy = strdup(kernel);
    if ((name != NULL && name_copy == NULL) || kernel_copy == NULL) {
        free(name_copy);
        free(kernel_copy);
        return -ENOMEM;
    }
    pthread_mutex_lock(&g_mu);
    free(g_foreign.name);
    free(g_foreign.kernel);
    g_foreign.armed = 1;
    g_foreign.pid = pid;
    g_foreign.name = name_copy;
    g_foreign.device = device;
    g_foreign.kernel = kernel_copy;
    g_foreign.count = count;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

EXPORT int aprofsim_set_latency_us(const char *which, long long us) {
    if (which == NULL || us < 0) return -1;
    for (int i = 0; i < L_COUNT; i++) {
        if (strcmp(which, LATENCY_NAMES[i]) == 0) {
            pthread_mutex_lock(&g_mu);
            g_latency_us[i] = us;
            pthread_mutex_unlock(&g_mu);
            return 0;
        }
    }
    return -1;
}

EXPORT int aprofsim_inject(const char *function, int code, int times) {
    if (function == NULL) return -1;
    for (int i = 0; i < F_COUNT; i++) {
        if (strcmp(function, FUNCTION_NAMES[i]) == 0) {
            pthread_mutex_lock(&g_mu);
            g_faults[i].code = code;
            g_faults[i].times = times > 0 ? times : 0;
            pthread_mutex_unlock(&g_mu);
            return 0;
        }
    }
    return -1;
}

EXPORT void aprofsim_clear_faults(void) {
    pthread_mutex_lock(&g_mu);
    memset(g_faults, 0, sizeof g_faults);
    pthread_mutex_unlock(&g_mu);
}

EXPORT int aprofsim_set_device_count(int n) {
    if (n < 1 || n > (int)MAX_DEV) return -1;
    pthread_mutex_lock(&g_mu);
    g_device_count = n;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

EXPORT void aprofsim_set_cmd_mode(int flag) {
    pthread_mutex_lock(&g_mu);
    g_cmd_mode = flag != 0;
    pthread_mutex_unlock(&g_mu);
}

EXPORT int aprofsim_running_device_count(void) {
    pthread_mutex_lock(&g_mu);
    int n = 0;
    for (uint32_t i = 0; i < MAX_DEV; i++) n += g_dev[i].running;
    pthread_mutex_unlock(&g_mu);
    return n;
}

EXPORT int aprofsim_is_running(int device) {
    if (device < 0 || device >= (int)MAX_DEV) return 0;
    pthread_mutex_lock(&g_mu);
    int running = g_dev[device].running;
    pthread_mutex_unlock(&g_mu);
    return running;
}

/* The PMU a launch on *device* would record: the collected metric group, plus 0x100 at task time
 * level 1; -1 when the device is not being profiled or collects no PMU data. */
EXPORT int aprofsim_device_pmu(int device) {
    if (device < 0 || device >= (int)MAX_DEV) return -1;
    pthread_mutex_lock(&g_mu);
    const device_state *d = &g_dev[device];
    int out = -1;
    if (d->running && (d->data_type & (TASK_TIME_L1_BITS | PROF_TASK_TIME_L0)) && pmu_collected(d->data_type, d->metric))
        out = d->metric | ((d->data_type & TASK_TIME_L1_BITS) ? 0x100 : 0);
    pthread_mutex_unlock(&g_mu);
    return out;
}

EXPORT int aprofsim_live_config_count(void) {
    pthread_mutex_lock(&g_mu);
    int n = g_live_configs;
    pthread_mutex_unlock(&g_mu);
    return n;
}

EXPORT int aprofsim_is_initialized(void) {
    pthread_mutex_lock(&g_mu);
    int v = g_initialized;
    pthread_mutex_unlock(&g_mu);
    return v;
}

/* Back to a fresh process (except the PROF counter, which CANN never resets). */
EXPORT void aprofsim_reset(void) {
    pthread_mutex_lock(&g_mu);
    if (g_initialized) stop_everything();
    g_initialized = 0;
    free(g_result_path);
    g_result_path = NULL;
    while (g_configs != NULL) {
        sim_config *next = g_configs->next;
        free(g_configs);
        g_configs = next;
    }
    g_live_configs = 0;
    memset(g_faults, 0, sizeof g_faults);
    g_dip_mhz = 0;
    memset(g_latency_us, 0, sizeof g_latency_us);
    g_cann = 85;
    g_chip = CHIP_910B;
    g_clock_offset_ns = 0;
    g_jitter_sigma = 0.0;
    g_outlier_rate = 0.0;
    g_outlier_factor = 1.0;
    g_jitter_state = 0;
    g_invalid_destroys = 0;
    free(g_pending_path);
    g_pending_path = NULL;
    free(g_foreign.name);
    free(g_foreign.kernel);
    memset(&g_foreign, 0, sizeof g_foreign);
    g_device_count = 8;
    g_cmd_mode = 0;
    g_repeat_start = 0;
    for (uint32_t i = 0; i < MAX_DEV; i++) {
        free(g_dev[i].recs);
        memset(&g_dev[i], 0, sizeof g_dev[i]);
    }
    pthread_mutex_unlock(&g_mu);
}
