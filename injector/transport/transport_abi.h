/* The seam between the injector core and its gRPC transport.
 *
 * The core (libflopscope_inject.so) lives in the job's own link namespace and links nothing but
 * libc and libstdc++. The transport (libflopscope_transport.so) links gRPC, protobuf and Abseil and
 * is loaded with dlmopen(LM_ID_NEWLM), so its copies can never interpose on the job's own (a
 * PyTorch process may hold grpcio and protobuf). Debian's static archives use the local-exec TLS
 * model and cannot be linked into a shared object, which rules out "static + hidden".
 *
 * Rules of the seam, each one a hazard when broken:
 *  - Plain C types only. Nothing allocated on one side is freed on the other: each namespace has
 *    its own libc and malloc.
 *  - Views are borrowed for the duration of the call; the transport copies what it keeps.
 *  - No callbacks from the transport into the core: a transport thread was created by the other
 *    libc, and the core's per-thread libc state (ctype tables) is not set up on it. The core polls.
 *  - Every thread of the core that calls in must first run the transport namespace's
 *    __ctype_init (transport_loader does this), or gRPC's URI parser crashes in isalpha().
 *  - Both libcs keep pthread-specific data in the same per-thread slots, each numbering its own
 *    keys. Call in (dlmopen included) only from a dedicated thread of the core that lives until
 *    the process exits (the exporter), never from an application thread.
 */
#ifndef FLOPSCOPE_INJECTOR_TRANSPORT_TRANSPORT_ABI_H_
#define FLOPSCOPE_INJECTOR_TRANSPORT_TRANSPORT_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: counter windows (FLOPs): `counted` on ranges and kernels, fs_kernel_flops and
 * fs_counter_window records; fs_kernel lost its flops pointer.
 * 3: fs_counter_window.comm_kernels_excluded.
 * 4: the spool (fs_transport_options.spool_dir and max_spool_bytes, fs_transport_api.spool),
 *    fs_transport_stats.records_pending, records_spooled and orphans_replayed; max_pending_bytes
 *    bounds the queue's memory, not its encoded size.
 * 5: FS_LOSS_NOT_ARRIVED and FS_LOSS_ENDED_WITHOUT_FINAL (the daemon's own, never sent).
 * 6: FS_LOSS_KILLED (the daemon's own, never sent).
 * 8: fs_transport_stats.stored_as_job_id.
 * 9: fs_batch.open_ranges (flopscope.v1.OpenRanges, `flopscope where`). */
#define FS_TRANSPORT_ABI_VERSION 9u

/* Named values of the uint32_t fields that cross the seam. Each mirrors a flopscope.v1 enum
 * (proto/flopscope/v1/records.proto) that the core cannot include; batch_encoder.cc, the one file
 * that sees both, static_asserts every value against its proto twin. The fields themselves stay
 * uint32_t so the layout never depends on an enum's underlying type. */

/* fs_range_event.kind: flopscope.v1.RangeKind */
enum fs_range_kind {
  FS_RANGE_KIND_PUSH_POP = 1, /* thread-scoped, nested */
  FS_RANGE_KIND_START_END = 2 /* process-scoped, may cross threads */
};

/* fs_kernel.kind: flopscope.v1.ActivityKind */
enum fs_activity_kind {
  FS_ACTIVITY_KIND_KERNEL = 1,
  FS_ACTIVITY_KIND_MEMCPY = 2,
  FS_ACTIVITY_KIND_MEMSET = 3
};

/* fs_loss.cause: flopscope.v1.LossCause */
enum fs_loss_cause {
  FS_LOSS_BUFFER_FULL = 1,
  FS_LOSS_DAEMON_UNREACHABLE = 2,
  FS_LOSS_REJECTED = 3,
  FS_LOSS_UNMATCHED_POP = 4,
  FS_LOSS_STACK_OVERFLOW = 5,
  FS_LOSS_TOO_MANY_PATHS = 6,
  FS_LOSS_UNCLOSED_RANGE = 7,
  FS_LOSS_CUPTI_DROPPED = 8,
  FS_LOSS_EXIT_UNDELIVERED = 9,
  FS_LOSS_COUNTER_UNMATCHED = 10,
  FS_LOSS_NOT_ARRIVED = 11,         /* counted by the daemon only: a producer never sends it */
  FS_LOSS_ENDED_WITHOUT_FINAL = 12, /* counted by the daemon only (sessions, not records) */
  FS_LOSS_KILLED = 13,              /* counted by the daemon only: in thread buffers at a kill */
  FS_LOSS_BACKLOG_FULL = 14,        /* counted by the transport: no room while connected */
  FS_LOSS_FORWARD_DROPPED = 15,     /* counted by a node daemon's outbox only: never sent here */
  FS_LOSS_CAUSE_MAX = 15 /* the highest cause; a new one raises it (and the ABI version) */
};

/* fs_control.kind: which of flopscope.v1.Control's commands the daemon sent. */
enum fs_control_kind {
  FS_CONTROL_UNKNOWN = 0, /* a command this transport does not know: refused */
  FS_CONTROL_COUNTER_WINDOW = 1,
  FS_CONTROL_FLUSH = 2
};

typedef struct fs_str {
  const char* data; /* not NUL-terminated necessarily */
  uint32_t size;
} fs_str;

typedef struct fs_layout {
  uint32_t tp_size, pp_size, dp_size;
  uint32_t tp_rank, pp_rank, dp_rank;
  fs_str source;
} fs_layout;

typedef struct fs_device {
  uint32_t index;
  fs_str name, chip, uuid;
  uint32_t sm_count;
  uint64_t memory_bytes;
  uint32_t sm_clock_khz;
  uint32_t compute_capability;
} fs_device;

typedef struct fs_hello {
  fs_str session_id, job_id, host, injector_version, command, gpu_status;
  int32_t rank, local_rank, world_size;
  fs_layout layout;
  int64_t pid, start_time_ns;
  const fs_device* devices;
  uint32_t num_devices;
} fs_hello;

typedef struct fs_string_def {
  uint32_t id;
  fs_str value;
} fs_string_def;

typedef struct fs_range_path {
  uint64_t id, parent_id;
  fs_str name, domain;
} fs_range_path;

typedef struct fs_range_event {
  uint64_t path_id, instance_id, parent_instance_id, thread_id;
  int64_t start_ns, end_ns;
  uint32_t kind;   /* enum fs_range_kind */
  uint8_t counted; /* closed while a counter window was open */
} fs_range_event;

typedef struct fs_tensor_flops {
  fs_str source;
  double flops;
} fs_tensor_flops;

typedef struct fs_raw_counter {
  fs_str metric;
  double value;
} fs_raw_counter;

typedef struct fs_flop_counters {
  double fp64, fp32, fp16;
  const fs_tensor_flops* tensor;
  uint32_t num_tensor;
  const fs_raw_counter* raw;
  uint32_t num_raw;
} fs_flop_counters;

typedef struct fs_kernel {
  uint64_t correlation_id, path_id, range_instance_id;
  uint32_t name_id, device_id, context_id, stream_id;
  int64_t start_ns, end_ns;
  uint32_t grid_x, grid_y, grid_z, block_x, block_y, block_z;
  uint32_t kind; /* enum fs_activity_kind */
  uint64_t bytes, graph_id, graph_node_id;
  uint8_t counted; /* launched inside a counter window: kernel replay serialised it */
} fs_kernel;

/* flopscope.v1.KernelFlops: the counted FLOPs of one launch of a counter window. */
typedef struct fs_kernel_flops {
  uint64_t correlation_id, path_id, range_instance_id;
  uint32_t name_id, device_id;
  uint64_t phase_path_id;
  int64_t counted_step; /* -1 when no step was open */
  fs_flop_counters flops;
} fs_kernel_flops;

/* flopscope.v1.CounterWindowRecord */
typedef struct fs_counter_window {
  int64_t first_step, last_step;
  fs_str trigger, metric_set, chip, status;
  uint32_t passes;
  uint64_t kernels_counted, ranges_unmatched;
  int64_t start_ns, end_ns;
  uint64_t comm_kernels_excluded; /* kept out of kernel replay (NCCL, ...) */
} fs_counter_window;

typedef struct fs_metadata {
  fs_str key, value;
  int64_t time_ns;
} fs_metadata;

typedef struct fs_loss {
  uint32_t cause;   /* enum fs_loss_cause */
  uint64_t records; /* cumulative for the session */
} fs_loss;

/* flopscope.v1.OpenRange */
typedef struct fs_open_range {
  uint64_t path_id;
  int64_t start_ns;
} fs_open_range;

/* flopscope.v1.ThreadOpenRanges */
typedef struct fs_thread_open_ranges {
  uint64_t thread_id;
  const fs_open_range* modules;
  uint32_t num_modules, module_depth;
  const fs_open_range* phases;
  uint32_t num_phases, phase_depth;
} fs_thread_open_ranges;

typedef struct fs_batch {
  const fs_string_def* strings;
  uint32_t num_strings;
  const fs_range_path* paths;
  uint32_t num_paths;
  const fs_range_event* ranges;
  uint32_t num_ranges;
  const fs_kernel* kernels;
  uint32_t num_kernels;
  const fs_metadata* metadata;
  uint32_t num_metadata;
  const fs_loss* losses;
  uint32_t num_losses;
  uint8_t final;
  const fs_kernel_flops* kernel_flops;
  uint32_t num_kernel_flops;
  const fs_counter_window* windows;
  uint32_t num_windows;
  /* flopscope.v1.OpenRanges: present only when has_open_ranges (num_open_threads 0 then says
   * nothing is open). Not records: kept when the transport drops a batch's records. */
  uint8_t has_open_ranges;
  int64_t open_ranges_time_ns;
  const fs_thread_open_ranges* open_threads;
  uint32_t num_open_threads;
} fs_batch;

typedef struct fs_transport_options {
  fs_str target; /* gRPC target, e.g. "unix:/run/flopscope/flopscope.sock" */
  /* Memory (protobuf arenas) of the unacknowledged batches kept for resend. */
  uint64_t max_pending_bytes;
  uint32_t reconnect_initial_ms, reconnect_max_ms;
  /* A private directory (0700, ours) for the session's spool file; empty: no spool. A batch that
   * does not fit in max_pending_bytes goes to the spool file instead of being dropped, as long as
   * the file stays under max_spool_bytes. */
  fs_str spool_dir;
  uint64_t max_spool_bytes;
} fs_transport_options;

typedef struct fs_transport_stats {
  uint64_t batches_submitted, batches_acked, batches_rejected;
  /* Records the transport gave up on, counted once: DAEMON_UNREACHABLE (neither the queue nor
   * the spool had room) plus REJECTED. */
  uint64_t records_dropped;
  uint64_t bytes_pending, reconnects;
  uint8_t connected;
  uint64_t records_pending;  /* in batches not yet acknowledged (in memory or spooled) */
  uint64_t records_spooled;  /* of records_pending, those in the spool file */
  uint64_t orphans_replayed; /* spool files of ended processes delivered by this transport */
  /* records_dropped by cause; dropped_unreachable: no room in memory or spool, whether the
   * daemon was away (DAEMON_UNREACHABLE) or connected but behind (BACKLOG_FULL) */
  uint64_t dropped_unreachable, dropped_rejected;
  /* Why the daemon last refused to take batches (trailer flopscope-refusal-reason, e.g.
   * "daemon disk full"), NUL-terminated; empty when it did not or took them since. */
  char refusal[64];
  /* The job id the daemon stores this session under when it is not the one the process named:
   * that id belongs to another user, so the run is kept apart ("4242@alice", Welcome.
   * stored_as_job_id). NUL-terminated; empty otherwise. */
  char stored_as_job_id[136];
} fs_transport_stats;

typedef struct fs_control {
  uint64_t id;
  uint32_t kind; /* enum fs_control_kind */
  uint32_t steps;
  char metric_set[32];
} fs_control;

typedef struct fs_transport fs_transport;

typedef struct fs_transport_api {
  uint32_t abi_version; /* FS_TRANSPORT_ABI_VERSION */
  /* Starts the connection thread; never blocks on the network. NULL on error, reason in err. A
   * transport returned with a non-empty err works with a warning (e.g. the spool is off). */
  fs_transport* (*create)(const fs_transport_options* options, const fs_hello* hello, char* err,
                          size_t err_size);
  /* Encodes and queues one batch under the next sequence number; returns at once. When the
   * pending queue is over max_pending_bytes the batch keeps its definitions (strings, paths),
   * metadata, counter windows and losses, drops its records (ranges, kernels, kernel FLOPs) and
   * counts them as DAEMON_UNREACHABLE. */
  void (*submit)(fs_transport* t, const fs_batch* batch);
  /* Waits until every submitted batch is acknowledged, or timeout_ms passes: 1 if all were. */
  int (*flush)(fs_transport* t, int64_t timeout_ms);
  void (*get_stats)(fs_transport* t, fs_transport_stats* out);
  /* Pops one control command from the daemon: 1 when *out was filled, 0 when none waits. */
  int (*poll_control)(fs_transport* t, fs_control* out);
  void (*reply_control)(fs_transport* t, uint64_t id, int accepted, fs_str message);
  /* Stops the transport's threads and frees it. Does not flush: call flush first. A spool file
   * that still holds unacknowledged batches is kept for a later process to deliver. */
  void (*destroy)(fs_transport* t);
  /* At exit, after flush: writes every unacknowledged batch still in memory to the spool file
   * (without syncing: the page cache outlives the process). Returns the records now waiting in
   * the file; path (NUL-terminated, may be cut) names it. 0 when there is no spool. */
  uint64_t (*spool)(fs_transport* t, char* path, size_t path_size);
} fs_transport_api;

/* The transport library's one exported symbol. */
const fs_transport_api* flopscope_transport_api(void);

#ifdef __cplusplus
}
#endif

#endif /* FLOPSCOPE_INJECTOR_TRANSPORT_TRANSPORT_ABI_H_ */
