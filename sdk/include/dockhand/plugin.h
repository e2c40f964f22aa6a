/*
 * dockhand/plugin.h — the C ABI between the Dockhand agent (the host) and its plugins.
 *
 * A plugin is a shared library that exports one function, `dh_plugin_entry`, returning a
 * static descriptor: ABI version, name, version, the kinds it implements, create/destroy,
 * and one table of hooks per kind. Nothing but C types crosses this boundary: structured
 * data travels as UTF-8 JSON text, no C++ type, exception or allocator ever does.
 *
 * NAMING
 *   Every type and function name starts with dh_, every macro and constant with DH_. The
 *   hooks and callbacks are fields of tables, named for what they do, and the table says
 *   which side implements them:
 *     dh_plugin_descriptor, dh_*_vtable  hooks the plugin implements and the host calls
 *                                        (create, launch, migrate, ...);
 *     dh_host                            callbacks the host implements and the plugin calls
 *                                        (log, task_status, sign_request, ...).
 *   The one symbol a plugin exports is dh_plugin_entry. These names are the ABI: they stay.
 *
 * VERSIONING (the rule)
 *   DH_ABI_MAJOR changes when an existing function or field changes meaning or place. The
 *   host loads a plugin only when its abi_major equals the host's. DH_ABI_MINOR grows when
 *   something is appended: a new field at the END of a struct, a new hook at the END of a
 *   table, never anywhere else. A descriptor's abi_minor is the oldest host minor the plugin
 *   NEEDS, not the header it was built with: the host supports every minor up to its own and
 *   refuses a plugin that needs a newer one. A plugin built against this header that fills
 *   only 1.3's hooks says 3 and loads on a 1.3 host (what it filled beyond is not called there);
 *   DH_ABI_MINOR is always a safe value, and plugin.hpp derives the least one from the hooks
 *   a class fills. (Plugins built before this rule put the header's minor there;
 *   read as a need it only ever asks for more, so they load exactly as before.) Every table starts
 * with `struct_size` (sizeof the struct as its provider compiled it):
 *     - the host copies a plugin's table up to the plugin's struct_size and treats every
 *       field beyond it as NULL ("not implemented"), so a plugin built against an older
 *       minor keeps loading and working;
 *     - a plugin reads a host table only up to the host's struct_size (plugin.hpp's Host
 *       does this for you), so a plugin may run on a host of the same or a newer minor.
 *   Every field added after 1.0 says "Since 1.N" and is optional. The test suite records
 *   the layout of every struct at each minor and fails when the header changes without a
 *   version bump (tests/sdk/abi_layout_test.cpp).
 *
 *   History: 1.0 first version. 1.1 dh_host.log_enabled, dh_task_runner_vtable.task_stats.
 *   1.2 dh_host.sign_request. 1.3 dh_host.unrecoverable. 1.4 dh_task_runner_vtable.flags.
 *   1.5 dh_task_runner_vtable.try_launch. 1.6 dh_task_runner_vtable.detach and adopt.
 *   1.7 dh_host.verify_code.
 *
 * OPTIONAL HOOKS
 *   A NULL hook means "not implemented". The host checks before calling. Required hooks are
 *   marked REQUIRED below; a descriptor missing one is refused at load time.
 *
 * ERRORS
 *   Fallible hooks return a dh_status. On anything but DH_OK the host calls
 *   `last_error(instance)` on the SAME thread right after the failed call and copies the
 *   message; the plugin keeps the string valid until its next call from that thread.
 *   A hook must never let an exception or a longjmp escape.
 *
 * OWNERSHIP
 *   Strings passed to a hook are owned by the host and valid only during the call: copy what
 *   you keep. Strings a hook returns through an `out_json` parameter are owned by the plugin
 *   and must stay valid until the plugin's next call from the same thread; the host copies
 *   them at once. The instance (dh_plugin) is created by `create` and owned by the plugin;
 *   the host calls `destroy` exactly once, after its last call into the instance.
 *
 * THREADING
 *   Written per hook below. In short: every hook but cancel and destroy runs on a call
 *   thread the agent keeps for the instance, one call at a time, in the order the agent
 *   makes them (create first); so a plugin never sees two such calls at once. cancel comes
 *   from any thread (it must reach a running migrate); destroy comes after the last call
 *   returned, on the agent's shutdown thread. Task-runner hooks and discovery's allocate/
 *   release must not block (return in well under a millisecond: spawn, then report later):
 *   the agent's core thread waits for allocate/release. discover may block; migrate may block
 *   for as long as its blocks take. Host callbacks may be called from any thread.
 *   The host measures every such hook (try_launch, launch, kill, thread_dump, task_stats,
 *   detach, adopt, allocate, release) and logs a warning naming the plugin and the hook
 *   when one takes longer than its limit (100 ms by default, agent config
 *   `plugin_call_warn_ms`): a slow runner hook delays every other call to that runner. A
 *   call (migrate excepted: the decommission deadline bounds it) that takes longer than
 *   `plugin_call_timeout_ms` is abandoned and the instance is not called again until the
 *   agent restarts.
 *
 * SIGNALS
 *   Signals are process-wide, so the host says which are whose. The agent takes SIGTERM,
 *   SIGINT (stop), SIGHUP (reload), SIGUSR2 (restart in place), its decommission signal
 *   (SIGPWR by default) and SIGRTMIN + DH_SIGRT_HOST_WAKE on a thread of its own; every
 *   thread, a plugin's included, starts with them and SIGPIPE blocked. A plugin must not
 *   unblock them, handle them or wait for them. SIGRTMIN + DH_SIGRT_STACK_SAMPLE belongs to
 *   the built-in `library` runner (it samples its task threads' stacks). A plugin that needs
 *   a signal of its own takes one from SIGRTMIN + DH_SIGRT_PLUGIN_FIRST up to SIGRTMAX, says
 *   which in its documentation, and installs its handler with SA_RESTART and without
 *   replacing one it finds there. Child processes a plugin starts should get a clean signal
 *   mask (posix_spawnattr_setsigmask) and default dispositions.
 */
#ifndef DOCKHAND_PLUGIN_H
#define DOCKHAND_PLUGIN_H

/* A C header, read by C++ too: typedef and (void) are what C has.
 * NOLINTBEGIN(modernize-use-using,modernize-redundant-void-arg) */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DH_ABI_MAJOR 1
#define DH_ABI_MINOR 7

/* Real-time signals, as offsets from SIGRTMIN (see SIGNALS above). */
#define DH_SIGRT_STACK_SAMPLE 6 /* the built-in library runner's stack sampler */
#define DH_SIGRT_HOST_WAKE 7    /* wakes the agent's signal thread */
#define DH_SIGRT_PLUGIN_FIRST 8 /* the first a plugin may take for itself */

/* The one symbol a plugin exports. */
#define DH_PLUGIN_ENTRY_SYMBOL "dh_plugin_entry"

#if defined(__GNUC__)
#define DH_EXPORT __attribute__((visibility("default")))
#else
#define DH_EXPORT
#endif

/* ---------------------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------------------- */
typedef int32_t dh_status;
#define DH_OK 0               /* success */
#define DH_ERROR 1            /* failure; last_error() says why */
#define DH_DECLINED 2         /* discovery: this plugin does not handle that resource */
#define DH_NOT_FOUND 3        /* the named task/block is unknown to this plugin */
#define DH_INVALID_ARGUMENT 4 /* the JSON passed in is malformed or misses a field */
#define DH_UNSUPPORTED 5      /* the request is understood but not supported */

/* Plugin kinds: a bit mask, a plugin may implement several. */
#define DH_KIND_RESOURCE_DISCOVERY 0x1u
#define DH_KIND_TASK_RUNNER 0x2u
#define DH_KIND_BLOCK_MIGRATION 0x4u

/* Log levels for dh_host.log. */
#define DH_LOG_TRACE 0
#define DH_LOG_DEBUG 1
#define DH_LOG_INFO 2
#define DH_LOG_WARN 3
#define DH_LOG_ERROR 4

/* Room enough for any value dh_host.sign_request writes, its NUL included. */
#define DH_AUTH_HEADER_MAX 256

/* Task states for dh_host.task_status (same meaning as on the wire). */
#define DH_TASK_RUNNING 1
#define DH_TASK_FINISHED 2 /* terminal: success */
#define DH_TASK_FAILED 3   /* terminal: the task's own failure */
#define DH_TASK_KILLED 4   /* terminal: stopped by a kill request */
#define DH_TASK_LOST 5     /* terminal: the runner lost track of it */

/* An instance of a plugin, opaque to the host. */
typedef struct dh_plugin dh_plugin;

/* ---------------------------------------------------------------------------------------
 * Host callbacks (implemented by the agent, called by the plugin)
 * ------------------------------------------------------------------------------------- */
typedef struct dh_host {
  uint32_t struct_size; /* sizeof(dh_host) as the host was compiled */
  void* ctx;            /* pass back as the first argument of every callback */

  /* Writes one log line through the agent's logger, tagged with the plugin's name.
   * Any thread. Does not block on I/O for long. `message` is copied. */
  void (*log)(void* ctx, int32_t level, const char* message);

  /* Reports a task's state (DH_TASK_*). Any thread. For each task the runner accepted:
   * at most one RUNNING, then exactly one terminal state, then nothing more for that id.
   * `detail_json` (may be NULL) is an object, copied by the host:
   *   FINISHED: {"result": <any JSON>}
   *   FAILED:   {"reason": "...", "exit_code": N | "signal": N, "stderr_tail": "..."}
   *   KILLED:   {"reason": "..."}
   * Any terminal detail may add what the task cost (docs/protocol.md, StatusUpdate "metrics"),
   * each figure optional, known ones as non-negative integers:
   *   "metrics": {"cpu_time_ms": N, "peak_rss_bytes": N, "result_bytes": N,
   *               "io_read_bytes": N, "io_write_bytes": N, "custom": {"name": number, ...}}
   * "custom" holds figures of the runner's own (non-negative numbers). A figure of the wrong
   * type or below 0 is dropped, with one warning per runner; the status still counts.
   * Never call it after destroy() returned. */
  void (*task_status)(void* ctx, uint64_t task_id, int32_t state, const char* detail_json);

  /* Reports block migration progress, an object such as
   * {"block": "rdd_1_2", "bytes": 1048576, "done": true, "location": "..."}. Any thread. */
  void (*migration_progress)(void* ctx, const char* progress_json);

  /* Returns the plugin's own config object as JSON text (the `config` of its entry in the
   * agent's config; "{}" when none). Owned by the host, valid until destroy(). */
  const char* (*config)(void* ctx);

  /* Since 1.1. Non-zero when a line at `level` would be written: skip building expensive
   * debug lines when it returns 0. Any thread, never blocks. */
  int32_t (*log_enabled)(void* ctx, int32_t level);

  /* Since 1.2. Signs one request to another agent's block server, for a cluster that
   * authenticates (docs/security.md); the plugin never sees the cluster secret. Writes the
   * value of the request's `Authorization` header into `out` (NUL-terminated, at most
   * `out_size` bytes with the NUL; DH_AUTH_HEADER_MAX always suffices).
   *   method:  "GET", "HEAD" or "PUT"
   *   path:    the request target without query, e.g. "/blocks/rdd_1_2"
   *   content: the X-Dockhand-Checksum header sent with a PUT; NULL or "" otherwise
   * A value is good for one request only (it binds the time and a fresh nonce, and servers
   * refuse a replay): sign each request, retries included, right before sending it.
   * Returns DH_OK; DH_UNSUPPORTED when this agent has no cluster secret (send no header);
   * DH_INVALID_ARGUMENT when method, path or out is NULL or out_size is too small.
   * Any thread; does not block. `out` is owned by the plugin. */
  dh_status (*sign_request)(void* ctx, const char* method, const char* path, const char* content,
                            char* out, size_t out_size);

  /* Since 1.3. Tells the agent that the plugin holds something it cannot give back, so the
   * agent must end: a task thread that ignored a kill for longer than the plugin's limit
   * (Spark's task reaper), a device left in an unknown state. The agent logs `reason` as an
   * error, tells the driver (RemoveExecutor with the reason), sends what statuses it still
   * can, and exits with code 12 (task-unkillable) without waiting for the plugin: it does not
   * call destroy(). Call it only when the plugin's config asks for that behaviour. Any
   * thread; returns at once (the agent ends soon after). `reason` is copied. */
  void (*unrecoverable)(void* ctx, const char* reason);

  /* Since 1.7. Asks the agent whether its plugin_trust policy (docs/plugins.md, "Trust") lets
   * a file that the plugin is about to load as code load: a job library, a script engine's
   * module. `fd` is the plugin's open, readable descriptor of the file; the agent reads it
   * from offset 0 with pread (the descriptor's offset does not move). Then load THAT
   * descriptor, never the path again (dlopen("/proc/self/fd/<fd>"), keeping `fd` open while
   * the library is loaded), so that the bytes checked are the bytes loaded. `path` names the
   * file in messages; its detached signature is looked for at <path>.sig.
   * Returns DH_OK when the policy lets it load; DH_ERROR when it does not, with why and the
   * mend written into `why` (NUL-terminated, cut to `why_size` bytes with the NUL);
   * DH_INVALID_ARGUMENT when path or why is NULL, why_size is 0 or fd is negative.
   * Any thread; blocks while the file is read and hashed. A plugin on an older host (no
   * verify_code) loads as that host's policy allows: it has no policy for such files. */
  dh_status (*verify_code)(void* ctx, int fd, const char* path, char* why, size_t why_size);
} dh_host;

/* ---------------------------------------------------------------------------------------
 * Kind: resource discovery
 * ------------------------------------------------------------------------------------- */
typedef struct dh_resource_discovery_vtable {
  uint32_t struct_size;

  /* REQUIRED. Finds the addresses of one resource.
   * request_json: {"name": "gpu", "amount": 2, "vendor": "nvidia.com",
   *                "discovery_script": "/path" (optional)}
   * On DH_OK, *out_json = {"name": "gpu", "addresses": ["0", "1"]} (plugin-owned).
   * DH_DECLINED: this plugin does not provide that resource; the host asks the next one.
   * Call thread, at start-up; may block (plugin_call_timeout_ms bounds it). */
  dh_status (*discover)(dh_plugin* self, const char* request_json, const char** out_json);

  /* Optional. Called before a task that was given addresses of a resource this plugin
   * discovered starts: prepare the device. allocation_json:
   * {"task_id": 7, "name": "gpu", "addresses": ["1"]}. Call thread, while the core thread
   * waits; must not block long. An error fails the task before it starts. */
  dh_status (*allocate)(dh_plugin* self, const char* allocation_json);

  /* Optional. Called after that task ended, however it ended, with the same JSON. */
  dh_status (*release)(dh_plugin* self, const char* allocation_json);

  /* Optional. Details for the status output, e.g. {"gpus": [{"index": 0, "name": ...}]}. */
  dh_status (*describe)(dh_plugin* self, const char** out_json);
} dh_resource_discovery_vtable;

/* ---------------------------------------------------------------------------------------
 * Kind: task runner
 * ------------------------------------------------------------------------------------- */
typedef struct dh_task_runner_vtable {
  uint32_t struct_size;

  /* REQUIRED. Starts a task. task_json:
   * {"task_id": 7, "attempt": 0, "name": "...", "partition": 3, "cpus": 1,
   *  "resources": {"gpu": ["0"]}, "properties": {...}, "payload": <runner-specific JSON>,
   *  "work_dir": "/var/lib/dockhand/.../task-7", "env": {"DOCKHAND_TASK_ID": "7", ...},
   *  "inputs": ["shuffle_0_3_1", ...]}
   * ("env" is left out for a runner with DH_RUNNER_NO_TASK_ENV in its flags.)
   * "inputs" names the task's input blocks in the TaskDescription's order; the agent has
   * fetched each into <work_dir>/input/<id> (DOCKHAND_INPUT_DIR) before launch. A task's
   * output files go in <work_dir>/output (DOCKHAND_OUTPUT_DIR) and become blocks after
   * FINISHED. Call thread; must not block: start the work and return. On DH_OK the plugin owns the
   * task and reports its states through dh_host.task_status. On an error the host reports
   * the task FAILED with last_error() and the plugin reports nothing for it. work_dir is the
   * plugin's until it reports a terminal state; then it is the agent's, which keeps it a while
   * (agent config keep_task_dirs) or, when the task left nothing in it, hands it to the next
   * task at once: report last, and write nothing there after. */
  dh_status (*launch)(dh_plugin* self, const char* task_json);

  /* REQUIRED. Stops a task: gracefully, or at once when `interrupt` is non-zero. The plugin
   * then reports KILLED (or the terminal state the task reached first). DH_NOT_FOUND when
   * the task is unknown or already ended. Call thread; must not block. */
  dh_status (*kill)(dh_plugin* self, uint64_t task_id, int32_t interrupt, const char* reason);

  /* Optional. What a task is doing now: *out_json = {"task_id": 7, "processes": [...]}.
   * DH_NOT_FOUND when the task is unknown. Call thread; must not block long. */
  dh_status (*thread_dump)(dh_plugin* self, uint64_t task_id, const char** out_json);

  /* Since 1.1, optional. What a running task uses now:
   * *out_json = {"task_id": 7, "cpu_time_ms": N, "rss_bytes": N} (fields the runner cannot
   * tell are left out). DH_NOT_FOUND when the task is unknown. Must not block. The agent does
   * not call it: what a task cost travels in its terminal detail's "metrics" (task_status
   * above), which is where a runner reports its own figures, and the agent measures the
   * memory of running tasks' processes itself. `dockhand plugins` lists it. */
  dh_status (*task_stats)(dh_plugin* self, uint64_t task_id, const char** out_json);

  /* Since 1.4, optional (0 before). What the runner asks of the agent, DH_RUNNER_* bits. */
  uint32_t flags;

  /* Since 1.5, optional. Starts a task as launch does, but only when that takes no waiting
   * at all (no file or network I/O, no lock held across slow work, no library to load): the
   * agent calls it on its core thread, unbounded by plugin_call_timeout_ms, and only while no
   * other hook of this instance runs or waits, so hooks still never run two at once and
   * launches keep their order. DH_OK: started, exactly as after launch. DH_UNSUPPORTED: not
   * now, nothing was done; the agent then calls launch on the call thread. Any other status
   * is the task's refusal, as from launch. A runner without it gets every task through
   * launch. Saves the call thread's wake-up on each task's way in. */
  dh_status (*try_launch)(dh_plugin* self, const char* task_json);

  /* Since 1.6, optional. The agent is about to replace its program in place (a restart or an
   * upgrade: the same process executes the new program, so the agent's children stay its
   * children): let the task run on, stop watching it, and hand over what a new instance of
   * this plugin, in the new program, needs to take it back: *out_json = a JSON object of the
   * plugin's own making (a process id and its start time, a directory, ...). The agent keeps
   * it in its state file and gives it to adopt unchanged. On DH_OK the plugin reports nothing
   * more for the task and must not end it, not even in destroy. DH_UNSUPPORTED (or no hook):
   * the task cannot outlive the program; the agent stops it and the driver runs it again. Call
   * thread; must not block. */
  dh_status (*detach)(dh_plugin* self, uint64_t task_id, const char** out_json);

  /* Since 1.6, optional. In the new program, before any launch: take back a task that
   * `detach` of an instance of this plugin (this version or an older one) handed over.
   * task_id as at launch; handle_json what detach returned. On DH_OK the plugin owns the task
   * again, as after launch, and reports how it ends (not RUNNING: the driver knows that): a
   * task that ended while the agent was changing programs is reported at once, with its real
   * exit status. On an error
   * (the process is gone, its id now names another process, the handle is not one this
   * plugin understands) the agent reports the task LOST and the driver runs it again; the
   * plugin must then leave the task's processes alone. Call thread; must not block. */
  dh_status (*adopt)(dh_plugin* self, uint64_t task_id, const char* handle_json);
} dh_task_runner_vtable;

/* The runner creates a task's work_dir itself (mode 0700, its parent exists), and only for a
 * task that needs one: the agent creates <work_dir> and <work_dir>/input before launch only
 * for a task with inputs. Whatever the runner leaves in <work_dir>/output still becomes
 * blocks after FINISHED. Saves three directory creations and removals per task. */
#define DH_RUNNER_MAKES_WORK_DIR 0x1u

/* The runner does not read task_json's "env" (its tasks are not processes that the runner
 * gives an environment): the agent leaves the member out, about half of task_json's bytes,
 * which every launch writes and the runner parses. Advisory: an agent built before this bit
 * sends "env" as before and the runner ignores it, so it needs no newer minor. */
#define DH_RUNNER_NO_TASK_ENV 0x2u

/* ---------------------------------------------------------------------------------------
 * Kind: block migration
 * ------------------------------------------------------------------------------------- */
typedef struct dh_block_migration_vtable {
  uint32_t struct_size;

  /* REQUIRED. Moves blocks off this machine. request_json:
   * {"blocks": [{"id": "shuffle_0_1_2", "path": "/...", "size": N, "checksum": "..."}],
   *  "peers": [{"executor_id": "...", "block_url": "http://..."}]}
   * On DH_OK, *out_json = {"migrated": [{"id": "...", <where>, "location": "..."}],
   *                        "failed": [{"id": "...", "reason": "..."}]}.
   * <where> says where the block now lives, and so where the driver sends readers:
   *   "executor_id": "<peer>"    a peer, one of "peers"; readers GET it from that agent;
   *   "url": "http(s)://..."     an external store; readers GET that URL (https:// when the
   *                              cluster uses TLS, verified against its CA; plain http://
   *                              otherwise);
   *   neither                    the shared fallback store; readers GET it by id through any
   *                              agent's block server (which reads its fallback_dir).
   * "location" is for people (logs, progress). The agent checks each place before it tells
   * the driver: a peer must have been offered, a URL must answer a HEAD with the block's
   * size, a fallback block must be in this agent's fallback_dir (when it has one). A block
   * that fails the check is not announced: it stays on this agent with the reason, for the
   * next plugin. The plugin must only report a block migrated once a complete, verified copy
   * exists at the destination. Call thread; may block (dockhand/cancel.hpp lets cancel()
   * wake a blocking socket); reports progress through the host. */
  dh_status (*migrate)(dh_plugin* self, const char* request_json, const char** out_json);

  /* Optional. Asks a running migrate() to return early. Any thread. */
  void (*cancel)(dh_plugin* self);
} dh_block_migration_vtable;

/* ---------------------------------------------------------------------------------------
 * The descriptor
 * ------------------------------------------------------------------------------------- */
typedef struct dh_plugin_descriptor {
  uint32_t struct_size; /* sizeof(dh_plugin_descriptor) as the plugin was compiled */
  uint16_t abi_major;   /* DH_ABI_MAJOR the plugin was compiled against */
  uint16_t abi_minor;   /* the oldest host DH_ABI_MINOR the plugin needs (see VERSIONING) */

  const char* name;        /* REQUIRED: [a-z0-9_-]+, unique among the loaded plugins */
  const char* version;     /* REQUIRED: the plugin's own version, e.g. "1.2.0" */
  const char* description; /* optional: one line */
  uint32_t kinds;          /* REQUIRED: DH_KIND_* bits */

  /* Optional: a JSON Schema (draft 2020-12 subset) for the plugin's config. The host checks
   * the config against it before create() and names the plugin and JSON path on error. */
  const char* config_schema;

  /* REQUIRED. Creates an instance. `host` stays valid until destroy(). config_json is the
   * plugin's config object ("{}" when none). Call thread, at start-up. On failure return an error
   * status; if *out was set, the host reads last_error(*out) and then calls destroy(*out). */
  dh_status (*create)(const dh_host* host, const char* config_json, dh_plugin** out);

  /* REQUIRED. Destroys an instance: stop threads, release everything. After it returns the
   * plugin must not call the host any more. Shutdown thread. */
  void (*destroy)(dh_plugin* self);

  /* REQUIRED. The message of the last failed call from the calling thread (see ERRORS). */
  const char* (*last_error)(dh_plugin* self);

  /* One table per kind in `kinds`; NULL for the kinds not implemented. */
  const dh_resource_discovery_vtable* resource_discovery;
  const dh_task_runner_vtable* task_runner;
  const dh_block_migration_vtable* block_migration;
} dh_plugin_descriptor;

/* The entry point's type. The returned descriptor is static: it lives as long as the library
 * is loaded and is never freed. May be called any number of times; must do no work. */
typedef const dh_plugin_descriptor* (*dh_plugin_entry_fn)(void);

/* What a plugin defines (exactly this signature, exported with DH_EXPORT). */
DH_EXPORT const dh_plugin_descriptor* dh_plugin_entry(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* NOLINTEND(modernize-use-using,modernize-redundant-void-arg) */
#endif /* DOCKHAND_PLUGIN_H */
