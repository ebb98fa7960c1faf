/* Test-only exports of libflopscope_inject.so. Tests and bench/nvtx_overhead look them up with
 * dlsym; nothing in production calls them. */
#ifndef FLOPSCOPE_INJECTOR_TEST_HOOKS_H_
#define FLOPSCOPE_INJECTOR_TEST_HOOKS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct flopscope_test_stats {
  uint64_t session_started;  /* 1 once a session runs in this process */
  uint64_t records_buffered; /* records ever appended to thread buffers */
  uint64_t records_exported; /* records handed to the sink */
  uint64_t batches_exported;
  uint64_t buffer_full_drops; /* BUFFER_FULL loss counter */
  uint64_t bytes_in_use;      /* of the FLOPSCOPE_BUFFER_MB budget */
  uint64_t paths;             /* range paths interned */
  uint64_t nvtx_inits;        /* InitializeInjectionNvtx2 calls (one per NVTX instance) */
} flopscope_test_stats;

/* Fills *out; returns 0 when no session runs (then only session_started is meaningful). */
int flopscope_test_get_stats(flopscope_test_stats* out);
typedef int (*flopscope_test_get_stats_fn)(flopscope_test_stats* out);

#ifdef __cplusplus
}
#endif

#endif /* FLOPSCOPE_INJECTOR_TEST_HOOKS_H_ */
