/*
 * dockhand/job.h — the C ABI between a job library and the agent's `library` task runner.
 *
 * A job library is a shared library of task functions: code that runs inside the agent (on a
 * thread of the runner's pool, or in one of its worker processes), as a Spark executor runs
 * a task's code, instead of a process started per task. It exports one function,
 * `dh_job_entry`, returning a static descriptor: the ABI version, the library's name and
 * version, and its table of named task functions. A task in a job file names the library
 * and the function (docs/jobs.md); the runner calls the function with a dh_task_api table and
 * an opaque dh_task, and the function returns DH_OK (FINISHED, with the result it set) or an
 * error (FAILED, with the message it set).
 *
 * Nothing but C types crosses this boundary. dockhand/job.hpp is a header-only C++ layer
 * over it (DOCKHAND_JOB_LIBRARY, dockhand::job::Task).
 *
 * NAMING, VERSIONING, OWNERSHIP
 *   The rules of dockhand/plugin.h, with their own version: DH_JOB_ABI_MAJOR changes when an
 *   existing field changes meaning or place, and the runner loads a library only when its
 *   abi_major equals the runner's; DH_JOB_ABI_MINOR grows when a field is appended at the
 *   END of a struct, and the runner refuses a library built against a newer minor than it
 *   knows. Every table starts with `struct_size`. A library reads dh_task_api only up to its
 *   struct_size (job.hpp does). Strings and bytes the runner passes are the runner's and valid
 *   until the task function returns, unless said otherwise; the runner copies what a function
 *   passes to it.
 *   History: 1.0 first version.
 *
 * THREADING
 *   A task function runs on a thread of its own for the task's whole run; several tasks of a
 *   library run at once, each on its own thread, so a library's shared state needs its own
 *   locking. Every dh_task_api function but on_kill's callback is called from that thread
 *   only (cancelled may be called from any thread). A function must not call exit(),
 *   fork() without exec, or change process-wide state (the working directory, signal
 *   dispositions, environment): in thread mode the process is the agent.
 *
 * KILL
 *   A kill from the driver sets the task's cancelled flag and calls the callback registered
 *   with on_kill (once, from another thread, while the function runs). A function that polls
 *   `cancelled` or is woken by its callback returns early; the runner then reports KILLED,
 *   whatever it returned. A function that has not returned `kill_timeout_ms` after the kill is
 *   reported KILLED anyway and left running; the runner can be configured to end the agent
 *   then (Spark's task reaper), since the thread cannot be stopped from outside.
 */
#ifndef DOCKHAND_JOB_H
#define DOCKHAND_JOB_H

/* A C header, read by C++ too: typedef and (void) are what C has.
 * NOLINTBEGIN(modernize-use-using,modernize-redundant-void-arg) */
#include <stddef.h>
#include <stdint.h>

#include "dockhand/plugin.h" /* dh_status, DH_OK..., DH_LOG_*, DH_EXPORT */

#ifdef __cplusplus
extern "C" {
#endif

#define DH_JOB_ABI_MAJOR 1
#define DH_JOB_ABI_MINOR 0

/* The one symbol a job library exports. */
#define DH_JOB_ENTRY_SYMBOL "dh_job_entry"

/* One running task, opaque to the library. Valid until its task function returns. */
typedef struct dh_task dh_task;

/* ---------------------------------------------------------------------------------------
 * What a task function may call (implemented by the runner)
 * ------------------------------------------------------------------------------------- */
typedef struct dh_task_api {
  uint32_t struct_size; /* sizeof(dh_task_api) as the runner was compiled */

  /* The task's id, attempt (0 first) and partition, as in the TaskDescription. */
  uint64_t (*task_id)(dh_task* task);
  uint32_t (*attempt)(dh_task* task);
  int64_t (*partition)(dh_task* task);

  /* The task's arguments: the JSON text of the job file's "args" ("null" when none),
   * NUL-terminated; *size (when not NULL) gets its length without the NUL. */
  const char* (*args)(dh_task* task, size_t* size);

  /* The number of input blocks, and the id of the i-th (0 <= i < count), in the order of the
   * task's "inputs". */
  size_t (*input_count)(dh_task* task);
  const char* (*input_id)(dh_task* task, size_t index);

  /* Reads an input block: *data gets its bytes, mapped read-only, *size their count; valid
   * until the function returns. DH_NOT_FOUND when the task has no such input. */
  dh_status (*read_input)(dh_task* task, const char* block_id, const void** data, size_t* size);

  /* Appends bytes to an output block (created empty by the first call). When the function
   * returns DH_OK each output becomes a block in the agent's store, checksummed and reported
   * to the driver before the task's FINISHED, exactly as a process task's output files do.
   * DH_INVALID_ARGUMENT: not a block id (docs/blocks.md); DH_ERROR: the write failed (the
   * disk is full, ...) and the message says why (last_error). */
  dh_status (*write_output)(dh_task* task, const char* block_id, const void* data, size_t size);

  /* Sets the task's result (replacing an earlier one): sent in the FINISHED status update
   * when small, stored as a block the driver fetches when large, refused when above the
   * runner's maximum (docs/plugins.md, the library runner). */
  void (*set_result)(dh_task* task, const void* data, size_t size);

  /* Sets the reason the task FAILED, reported when the function returns an error. */
  void (*set_error)(dh_task* task, const char* message);

  /* Non-zero once the task was asked to stop. Any thread, never blocks. */
  int32_t (*cancelled)(dh_task* task);

  /* Registers a callback the runner calls once, from another thread, when the task is
   * killed (a later call replaces it; NULL removes it). Use it to wake a blocking call:
   * close its socket, signal its condition variable. It must not block. */
  void (*on_kill)(dh_task* task, void (*callback)(void* user), void* user);

  /* Writes one line to the task's log, served as its stdout log ("<UTC time> <LEVEL> <message>"),
     and to the agent's log, tagged with the task. */
  void (*log)(dh_task* task, int32_t level, const char* message);

  /* The message of the last failed call of this table from this thread. */
  const char* (*last_error)(dh_task* task);
} dh_task_api;

/* A task function. Returns DH_OK when the task succeeded; anything else fails it. It must
 * not let an exception or a longjmp escape. */
typedef dh_status (*dh_task_fn)(const dh_task_api* api, dh_task* task);

typedef struct dh_job_function {
  const char* name; /* [A-Za-z0-9_.-]+, unique within the library */
  dh_task_fn run;
} dh_job_function;

/* ---------------------------------------------------------------------------------------
 * The descriptor
 * ------------------------------------------------------------------------------------- */
typedef struct dh_job_descriptor {
  uint32_t struct_size; /* sizeof(dh_job_descriptor) as the library was compiled */
  uint16_t abi_major;   /* DH_JOB_ABI_MAJOR the library was compiled against */
  uint16_t abi_minor;   /* DH_JOB_ABI_MINOR the library was compiled against */

  const char* name;        /* REQUIRED: [a-z0-9_-]+ */
  const char* version;     /* REQUIRED: the library's own version, e.g. "1.0.0" */
  const char* description; /* optional: one line */

  const dh_job_function* functions; /* REQUIRED: function_count entries */
  uint32_t function_count;
} dh_job_descriptor;

/* The entry point's type. The returned descriptor is static and never freed. May be called
 * any number of times; must do no work. */
typedef const dh_job_descriptor* (*dh_job_entry_fn)(void);

/* What a job library defines (exactly this signature, exported with DH_EXPORT). */
DH_EXPORT const dh_job_descriptor* dh_job_entry(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* NOLINTEND(modernize-use-using,modernize-redundant-void-arg) */
#endif /* DOCKHAND_JOB_H */
