/* aof_uring.c - the io_uring AOF engine (appendfsync-engine uring).
 *
 * DESIGN
 * ------
 *
 * Purpose. Upstream 'appendfsync always' runs write()+fdatasync() inline in
 * beforeSleep(): the event loop sleeps in every fdatasync and every reply,
 * reads included, waits for it. 'everysec' hands the fsync to a bio thread and
 * acknowledges writes that a power cut can erase. This engine writes the AOF
 * buffer with write(2) where upstream does (flushAppendOnlyFile, with all of
 * upstream's error handling), hands its IORING_FSYNC_DATASYNC fsync to an
 * io_uring, returns to the event loop at once, and learns about completion
 * through an eventfd registered with the ring and watched by the ae loop.
 * There is no completion thread. (A write linked to the fsync in the ring was
 * the first design; on ext4 the buffered write is punted to an io-wq worker
 * anyway, so it only delayed the fsync: docs/measurements.md.) With
 * aof-uring-direct-writes a durable batch over preallocated blocks is
 * instead one O_DIRECT write with RWF_DSYNC through the ring (see "Direct
 * writes").
 *
 * Batches (group commit). Everything appended to server.aof_buf between two
 * fdatasyncs forms one batch. In durable mode up to aof-uring-fsyncs-in-flight
 * (default 1) fdatasyncs are in flight: while they run, new commands
 * accumulate in aof_buf, which is written and fdatasync'ed as soon as a slot
 * is free (after the coalescing wait below); with more than one, the event
 * loop executes one group of clients while the device syncs another's batch.
 * On a log laid out for cheap fsyncs (aof-preallocate, aof_prealloc.c)
 * fdatasyncs commit no journal transaction and several run in parallel on
 * the device; on an appending file ext4 serializes them behind its journal
 * commits. With closed-loop clients two in flight split the batches (1.6x
 * the fdatasyncs, up to 1.8x the CPU per write: docs/measurements.md), so
 * the default keeps one. Fast mode keeps one in flight, writes every pass
 * and paces its fdatasyncs (see "Ack modes"). Batches are released in
 * submission order, each once it and every older one completed: an
 * fdatasync covers every byte write(2) returned before it was submitted, but
 * a direct write covers only its own bytes, and an fdatasync does not wait
 * for a direct write in flight.
 *
 * Direct writes (aof-uring-direct-writes, on by default; durable mode). The
 * write(2) + fdatasync pair costs two trips through the kernel's I/O paths
 * and, on ext4, an io-wq worker that runs the fdatasync. When the batch falls
 * inside the region aof-preallocate has zero-written and fdatasync'ed
 * (aofPreallocCovers), it is copied into its slot's buffer, aligned for
 * O_DIRECT, padded to the direct-I/O block (statx STATX_DIOALIGN; 4096 where
 * the kernel does not say) with annotation lines "#....\r\n" of at most 512
 * bytes, and submitted as IORING_OP_WRITE with RWF_DSYNC at the log's tail on
 * a second descriptor of the INCR file opened O_DIRECT (through
 * /proc/self/fd, the same inode). The write is the batch's fdatasync: an
 * overwrite of allocated, written blocks inside the file's size has no
 * metadata to commit, so the kernel completes it with the device write (FUA,
 * or a cache flush) and no journal commit; io_uring issues it without an
 * io-wq hop. It never allocates, so it cannot fail for space. aof_buf is
 * accounted as the write(2) path does (aof_current_size and the INCR size
 * grow by the padded length). The padding is part of the log: the loader,
 * DEBUG LOADAOF and valkey-check-aof skip annotations, and the loader counts
 * an annotation read whole as well-formed (patch 0026), so padding followed
 * by the zeros ahead of the log is a clean end. The cost is disk: a batch
 * grows to the next block (half a block on average, about 200 bytes with
 * 512-byte blocks: docs/measurements.md). A batch goes the write(2) +
 * fdatasync way, and INFO aof_uring_direct_declined_reason says why, when:
 * a write failed and is being retried
 * (write_error), bytes written by write(2) are not fdatasync'ed yet
 * (unsynced_bytes; only an fdatasync covers them), the file's filesystem is
 * not on the allow-list of those whose RWF_DSYNC an asynchronous direct write
 * honours (fs_<name>_not_allowed: only ext4 and XFS are; on FUSE the kernel
 * sends no fsync after such a write, and a FUSE filesystem that makes data
 * durable at fsync only loses it at a power cut), the file refused O_DIRECT
 * (open_<errno>, no_direct_io), the batch would pass the preallocated region
 * (past_preallocated: a fresh INCR file before its first chunk of zeros, the
 * preallocation off or failing), or the log does not end on a block
 * (unaligned_tail: the first batch after a load or a switch, which is then
 * written padded so that the next one is direct). The O_DIRECT descriptor is
 * closed whenever the engine drains for good (rotation, shutdown, stop), so a
 * deleted INCR file is never kept allocated. Copy-on-write filesystems
 * (btrfs, ZFS), where an overwrite allocates, are not on the allow-list.
 *
 * Coalescing (durable mode). When a batch becomes durable its clients are
 * released and send their next commands about one round trip later;
 * submitting the commands that arrived meanwhile at once would split the
 * released clients into ever smaller groups, each paying an fdatasync (and
 * with one in flight, each client waiting for two per write). So after a
 * release the next submission waits until as many writes have executed as
 * writers were released (clients held for a write of their own,
 * c->aof_uring_wrote; a reader's next command is not awaited), or at most a
 * quarter of the last fsync time (AOF_URING_COALESCE_MAX_US at most). The
 * bound is the event loop's own: beforeSleep shortens the next poll with
 * aeWakeBefore (patch 0027, epoll_pwait2), so a wait whose writes arrive in
 * time costs no wake-up, no timer on the ring. A lone client is never
 * delayed (its write is the one awaited). aof_uring_coalesce_waits counts
 * the waits.
 *
 * Offsets. Two are kept. aof_fed counts every byte feedAppendOnlyFile() ever
 * appended to aof_buf, and durable_fed is the prefix of it known to be
 * fdatasync'ed: an fdatasync records aof_fed minus what is still in aof_buf
 * (not written yet) when it is submitted, and publishes it when it
 * completes. The durable gate works on these AOF byte offsets, so
 * anything that reaches the AOF counts, whether or not it also moves the
 * replication offset (a script's server.set_repl(server.REPL_AOF) does not).
 * For WAITAOF, each batch also records server.primary_repl_offset; when it
 * completes, that offset (or primary_repl_offset itself if nothing is left
 * unwritten or unsynced, as upstream does when nothing is pending) goes to
 * server.fsynced_reploff_pending, published by beforeSleep as
 * server.fsynced_reploff. Bytes that write(2) left unsynced before a switch
 * to the engine or to durable mode are fdatasync'ed before either offset
 * counts them.
 *
 * Ack modes (aof-uring-ack).
 *  - durable (default): nobody is told of, or shown, a write before it is
 *    durable. Each gated client C (a normal client or a MONITOR; not a
 *    replication link, module or fake client) carries C->aof_uring_need, the
 *    AOF offset that must be durable before C gets output. While
 *    C->aof_uring_need > durable_fed, C gets no bytes written to its socket
 *    (handleClientsWithPendingWrites and the writable handler skip it; the
 *    handler is removed). Its pipelined commands still execute, as under
 *    'always': their replies queue behind the held ones and their writes join
 *    the same batch, so a pipeline pays one fsync per batch, not one per
 *    command (the output waits in the client's buffer, within its
 *    output-buffer limits). Held clients are kept in a list (joined as soon
 *    as they need a write that is not durable) and put back in the
 *    pending-write queue in beforeSleep. Their output, like aof_buf, is
 *    memory waiting for the disk and is not counted against maxmemory
 *    (otherwise the invalidations an eviction pushes, held until its DELs
 *    are durable, would trigger more evictions).
 *    What a client needs is decided by what its execution unit (a command,
 *    MULTI/EXEC, a script, an unblocked command) did as the keyspace saw it,
 *    not by its key arguments. Three hooks in the keyspace feed the gate:
 *    every key lookup (dbFindWithDictIndex, behind lookupKey and dbFind),
 *    every key change (signalModifiedKey, which WATCH and tracking rely on),
 *    and every emptied or swapped db (touchAllWatchedKeysInDb: FLUSHDB,
 *    FLUSHALL, SWAPDB, a replica's diskless load). A changed key's slot in a
 *    fixed table of 65536 (hashed by db and key; a collision only delays a
 *    reply) and a changed db are marked "written in this unit"; when the unit
 *    has propagated (postExecutionUnitOperations) they get the unit's end
 *    offset aof_fed. The unit's client then needs
 *      - aof_fed, if the unit fed the AOF (it wrote) or read something it
 *        wrote itself;
 *      - else the largest offset of the keys and dbs it looked up (SORT's
 *        BY/GET patterns, MOVE's and COPY's target db included), and for a
 *        command without key arguments the last write of all: such a
 *        command may summarise the keyspace (KEYS, SCAN, DBSIZE, RANDOMKEY,
 *        MEMORY STATS, DEBUG DIGEST, FUNCTION LIST...). Deny by default:
 *        only the connection's commands, transactions, pub/sub, server
 *        introspection (INFO, CONFIG, ROLE, SLOWLOG...) and server control
 *        (REPLICAOF, FAILOVER, SHUTDOWN, BGSAVE...: a failover must not
 *        wait for the disk) are exempt (keylessShowsNoData), so a command
 *        added later waits rather than leaks. INFO's keyspace section, which counts keys, shows the
 *        counts of the newest snapshot the gate has released (one is taken
 *        at the end of a pass and promoted when its offset is released)
 *        instead of waiting: monitoring must answer when the disk stalls.
 *    State the AOF carries besides keys is the function libraries: a unit
 *    that changed them (FUNCTION LOAD/DELETE/FLUSH/RESTORE) sets
 *    functions_off, and FCALL/FCALL_RO need it whatever keys they touch.
 *    Bytes fed without any key or db changing (FUNCTION LOAD, a module's
 *    propagation) dirty every key. Output queued for any client other than the
 *    one whose command runs (pub/sub messages, keyspace notifications,
 *    tracking invalidations, MONITOR lines, replies to blocked clients that
 *    time out) is a push: the receiver is held at once and, when the unit
 *    resolves (or at the latest in beforeSleep), needs every write executed
 *    before the push. A client whose WATCHed key another client changes is
 *    treated the same way (its EXEC's nil reply tells it of the write).
 *    Deletes by expiry and eviction are writes like any other (they
 *    propagate a DEL). When the gate turns on (engine or ack
 *    switched at runtime, AOF enabled) nothing earlier was tracked, so every
 *    read first waits for the next durable point. A replica gates its own
 *    readers on its own AOF: it serves what it has made durable, which says
 *    nothing of what its primary acknowledged. io-threads > 1 is refused with
 *    durable acks (I/O threads read and write clients behind the gate's back).
 *  - fast: replies go out at write time, before the fdatasync (the AOFUring
 *    thesis' choice; upstream's "a reply means the bytes are in the page
 *    cache" holds, so a killed process loses nothing). The power-cut loss
 *    window is the bytes written but not yet covered by a completed
 *    fdatasync; when that exceeds aof-uring-max-inflight-bytes the flush
 *    waits for the fdatasync in flight (back-pressure, counted in
 *    aof_uring_backpressure_events). Below that bound the fdatasyncs are
 *    paced: the next one starts AOF_URING_FAST_FSYNC_SPACING (4) times the
 *    last one's duration L after the last one started, so the device spends
 *    at most a quarter of its time in our fdatasyncs (back-to-back fsyncs
 *    cost CPU in io-wq and event-loop wake-ups for no durability gain), but
 *    never so late that the gap plus L exceeds AOF_URING_FAST_LOSS_WINDOW_US
 *    (10 ms): a write acknowledged just after an fdatasync started is covered
 *    by the next one, so the loss window is the gap plus the next fsync's
 *    duration, about 5 L and at most about 10 ms while L stays under 2 ms.
 *    On a slower device the gap shrinks to 10 ms - L, down to back to back
 *    (a window of about 2 L: no pacing can bound it below the device).
 *
 * Replicas (aof-uring-ack-replicas k, durable mode, on a primary). A gated
 * client's output also waits until k replicas have fdatasync'ed what it
 * needs: the gate releases up to min(durable_fed, replica_fed) instead of
 * durable_fed, for writes and reads alike. Replicas already report the
 * replication offset their own AOF has fsync'ed (REPLCONF ACK <off> FACK
 * <aof off>, what WAITAOF counts); the k-th highest of these among online
 * replicas is mapped back to an AOF offset through checkpoints, one per
 * unit that fed the AOF: (aof_fed, primary_repl_offset) once it propagated
 * to both (replica_fed, see the checkpoint comment). A replica running the
 * engine sends that ACK as soon as one of its batches completes, not at the
 * next replicationCron, so a write waits for one replica round trip plus
 * its fsync, in parallel with the local one. With fewer than k replicas
 * online and heard from within min-replicas-max-lag seconds (10 if 0),
 * write commands are refused before they execute (-NOREPLICAS, counted in
 * aof_uring_noreplicas_refusals), and a script may not keep its writes
 * off the replicas (server.set_repl without REPL_REPLICA is an error: no
 * replica acknowledgement could ever cover them); writes already held when replicas go
 * away wait for aof-uring-hold-timeout-ms and are then closed without a
 * reply, like any held client. Promotion starts the acknowledgements over
 * (the offsets of the old history mean nothing to the new replicas):
 * everything fed until then waits for the first acknowledgement of the new
 * history (see resetReplicaAcks). Turning the option on applies it to the
 * writes that follow. A replica's own readers wait for its own AOF only.
 *
 * Threading. Everything runs on the main thread: submissions (one
 * io_uring_enter per loop pass; none with SQPOLL while the SQ thread is awake),
 * the eventfd handler that reaps CQEs, and the client gating. The ring is set
 * up with IORING_SETUP_SINGLE_ISSUER and, without SQPOLL,
 * IORING_SETUP_DEFER_TASKRUN (falling back to no flags on kernels that reject
 * them); with DEFER_TASKRUN the eventfd means "call io_uring_get_events()".
 * The completions that call posts would signal the eventfd a second time,
 * and the event loop would wake up twice per batch, the second time for
 * nothing: the eventfd is switched off while it runs
 * (IORING_CQ_EVENTFD_DISABLED), and IORING_SQ_TASKRUN (from
 * IORING_SETUP_TASKRUN_FLAG) tells whether a completion queued meanwhile
 * needs another call. aof_uring_wakeups counts the eventfd's wake-ups.
 * The kernel runs buffered writes and fsyncs in io-wq workers, bounded with
 * io_uring_register_iowq_max_workers (aof-uring-max-workers). The AOF fd is a
 * registered file (slot 0), updated whenever server.aof_fd changes.
 *
 * Ordering. Bytes reach the file in aof_buf order, at the log's tail, through
 * write(2) as upstream or through a direct write. Rotation (BGREWRITEAOF opening a new INCR file),
 * stopAppendOnly and shutdown call flushAppendOnlyFile(1): the engine then
 * writes aof_buf and waits until its fdatasync is done, so every byte
 * belonging to the old file is durable there before it is closed (by a plain
 * bio close job: a bio fsync job would later store a stale
 * fsynced_reploff_pending).
 *
 * Failure.
 *  - Write error or short write: upstream's own code path, the everysec one
 *    (flushAppendOnlyFile does not take the 'always' exit while the engine is
 *    active): a short write is truncated away, aof_last_write_status = C_ERR
 *    and aof_last_write_errno are set (write commands are refused), the bytes
 *    stay in aof_buf and are retried; when a write succeeds the status is
 *    cleared. In durable mode no reply depending on those bytes has left, so
 *    unlike 'always' there is no need to exit; in fast mode replies left at
 *    write time, as with everysec. aof_uring_write_errors and
 *    aof_uring_short_writes count them.
 *  - A client held longer than aof-uring-hold-timeout-ms (10 s by default;
 *    a full disk, a stalled device) is disconnected without its reply and
 *    counted in aof_uring_hold_timeouts: like a network timeout, it was never
 *    told its write succeeded; the write stays in memory and in aof_buf and
 *    becomes durable once the disk recovers. 0 waits without bound.
 *  - fsync error, or a direct write that failed or wrote short (it
 *    overwrites allocated blocks, so only the device can fail it):
 *    fail-stop (log and exit(1)), as upstream 'always' does: the page cache
 *    state after a failed fsync is unknown.
 *  - Unexpected io_uring_submit / wait errors: fail-stop likewise.
 *
 * Fallback. When the ring cannot be set up (io_uring_setup fails with EPERM
 * under a seccomp filter or kernel.io_uring_disabled=1, ENOSYS on old or
 * disabled kernels, ENOMEM under RLIMIT_MEMLOCK, or the eventfd cannot be
 * registered) the reason is logged once, reported as
 * aof_uring_fallback_reason, and the upstream posix code path runs. A new
 * attempt is made only when appendfsync-engine is switched to uring again.
 *
 * Configuration. Every option can be changed at runtime. Switching
 * appendfsync-engine drains the ring first (uring -> posix) or sets it up
 * (posix -> uring, after draining bio fsync jobs). aof-uring-queue-depth and
 * the aof-uring-sqpoll* options shape the ring: changing them drains it and
 * sets up a new one. aof-uring-ack, aof-uring-max-workers,
 * aof-uring-fsyncs-in-flight, aof-uring-direct-writes and
 * aof-uring-max-inflight-bytes take effect at once.
 * While the engine is active every batch is fdatasync'ed whatever appendfsync
 * says, and no-appendfsync-on-rewrite is ignored (durable clients would
 * otherwise wait for the whole rewrite).
 *
 * INFO (section persistence; names are stable, exported by redis_exporter):
 *   aof_engine                        configured engine: posix|uring
 *   aof_uring_active                  1 if the ring carries the AOF now
 *   aof_uring_fallback_reason         none | <call>_<errno> e.g. io_uring_setup_eperm,
 *                                     io_uring_disabled_sysctl, not_built
 *   aof_uring_ack                     durable|fast
 *   aof_uring_queue_depth             SQ entries
 *   aof_uring_sqpoll                  1 if an SQPOLL thread submits
 *   aof_uring_defer_taskrun           1 if SINGLE_ISSUER+DEFER_TASKRUN were accepted
 *   aof_uring_submitted_batches       batches handed to the ring (fdatasyncs and direct writes)
 *   aof_uring_completed_batches       fdatasyncs completed
 *   aof_uring_inflight_batches        fdatasyncs in flight (aof-uring-fsyncs-in-flight at most)
 *   aof_uring_inflight_bytes          bytes the fdatasyncs in flight cover
 *   aof_uring_pending_bytes           bytes waiting in aof_buf
 *   aof_uring_submitted_bytes         bytes covered by fdatasyncs submitted
 *   aof_uring_written_bytes           bytes covered by fdatasyncs completed
 *   aof_uring_backpressure_events     fast mode: flushes that had to wait
 *   aof_uring_short_writes            short writes (truncated, retried)
 *   aof_uring_write_errors            failed or short writes (retried)
 *   aof_uring_held_clients            clients currently held (durable mode)
 *   aof_uring_held_events             times a client was held
 *   aof_uring_held_output_bytes       output held (not counted against maxmemory)
 *   aof_uring_gated_reads             commands whose reply waited for a dirty key
 *   aof_uring_gated_pushes            pushed outputs that waited for a write
 *   aof_uring_hold_timeouts           clients closed after aof-uring-hold-timeout-ms
 *   aof_uring_coalesce_waits          submissions that waited for released clients
 *   aof_uring_wakeups                 event-loop wake-ups by the ring's eventfd
 *   aof_uring_fed_bytes               aof_fed: AOF bytes fed, ever
 *   aof_uring_durable_bytes           durable_fed: the fdatasync'ed prefix of it
 *   aof_uring_durable_offset          fsynced replication offset
 *   aof_uring_durable_lag_bytes       primary_repl_offset - durable offset
 *   aof_uring_ack_replicas            aof-uring-ack-replicas
 *   aof_uring_replica_durable_offset  k-th highest replica AOF fsync offset, -1 if none
 *   aof_uring_replica_durable_bytes   replica_fed: the prefix of aof_fed on k replicas' disks
 *   aof_uring_replica_checkpoints     writes waiting for the replicas' acknowledgement
 *   aof_uring_noreplicas_refusals     writes refused: fewer than k replicas connected
 *   aof_uring_fsync_count             completed batches timed below (aof_fsync_stats.c;
 *                                     they are in INFO aof_fsync_* too, with
 *                                     the posix engine's fdatasyncs)
 *   aof_uring_fsync_usec_sum          sum of submit->durable times (fdatasync or direct write), usec
 *   aof_uring_fsync_usec_p50/_p99/_max
 *   aof_uring_fsync_usec_bucket_le_<N> cumulative count of times <= N usec,
 *                                     N in 50,100,250,500,1000,2500,5000,10000,
 *                                     25000,50000,100000,250000,1000000, and _le_inf
 *   aof_uring_direct_writes           batches written as O_DIRECT|RWF_DSYNC writes
 *   aof_uring_direct_padding_bytes    padding those (and realigning writes) added to the log
 *   aof_uring_direct_declined         durable batches written with write(2) while the option was on
 *   aof_uring_direct_declined_reason  why the last one was (none after a direct write)
 *   aof_uring_direct_align            the direct-I/O block of the last file opened, 0 before any
 * Latency monitor events: aof-uring-fsync (submit to durable, counted up to
 * the start of the event-loop pass that reaped it, so that a slow command in
 * that pass is reported as a "command" event and not blamed on the disk),
 * aof-uring-backpressure (time flush waited), aof-uring-drain (force flush).
 */

#include "server.h"
#include "latency.h"
#include "bio.h"
#include "aof_prealloc.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#define AOF_URING_DIRTY_SLOTS (1 << 16)   /* Power of two; 512 KiB of offsets. */
#define AOF_URING_COALESCE_MAX_US 2000    /* Longest coalescing wait. */
#define AOF_URING_FAST_FSYNC_SPACING 4      /* fast mode: fsync period >= 4x its duration, */
#define AOF_URING_FAST_LOSS_WINDOW_US 10000 /* unless period + duration would exceed 10 ms. */

/* Counters survive ring restarts; they are what INFO shows. */
static struct {
    long long submitted_batches, completed_batches, submitted_bytes, written_bytes;
    long long backpressure_events, short_writes, write_errors, held_events, gated_reads, coalesce_waits;
    long long gated_pushes, hold_timeouts;
    long long direct_writes, direct_padding_bytes, direct_declined;
    long long wakeups;
} stats;
/* aof-uring-direct-writes: why the last batch did not go out as a direct
 * write while the option was on ("none" once one did). */
static const char *direct_declined_reason = "none";
static aofFsyncHistogram fsyncs = AOF_FSYNC_HISTOGRAM_INIT; /* INFO aof_uring_fsync_* */

static char fallback_reason[64] = "none";
static int setup_failed = 0; /* Don't retry setup until the engine is re-selected. */

/* The durable gate (durable mode), kept whether or not the ring is up so
 * that held clients are released when the engine goes away. Offsets are
 * AOF byte offsets: aof_fed counts every byte ever appended to aof_buf. */
void replicationSendAck(void); /* replication.c */

#define AOF_URING_UNRESOLVED LLONG_MAX /* Written in the current execution unit. */
static long long aof_fed = 0;          /* Bytes appended to aof_buf, ever. */
static long long durable_fed = 0;      /* Prefix of aof_fed known to be fdatasync'ed. */
static int gate_was_on = 0;
static list *held_clients = NULL;
static long long *dirty_off = NULL;    /* Per key slot: aof_fed after its last write. */
static long long *dirty_db = NULL;     /* Per db: aof_fed after it was flushed/swapped. */
static int dirty_dbs = 0;
static long long dirty_all = 0;        /* Last write that changed no key (functions...). */
static long long last_write_off = 0;   /* aof_fed after the last unit that fed bytes. */
static long long functions_off = 0;    /* aof_fed after the last unit that changed a function. */
static long long resolved_fed = 0;     /* aof_fed when the last unit was resolved. */
static uint32_t *pending_slots = NULL; /* Slots written in the current unit. */
static size_t pending_len = 0, pending_cap = 0;
static int *pending_dbs = NULL;
static size_t pending_dbs_len = 0;
/* What the current execution unit read. */
static long long unit_read_off = 0;
static int unit_read_unresolved = 0, unit_read_any = 0;
static int unit_functions_changed = 0;
/* Clients that were pushed data (pub/sub, notifications, tracking,
 * MONITOR) or had a WATCHed key changed since the last resolution, with the
 * offset they needed before. */
static struct pushed {
    uint64_t id;
    long long need;
} *pushed = NULL;
static size_t pushed_len = 0, pushed_cap = 0;
/* INFO keyspace's key counts (keys, expires per db) at two AOF offsets: the
 * newest known to be released (fed <= releasedFed()) and a candidate taken
 * at the end of a later pass, promoted once its offset is released. fed is
 * -1 when a snapshot is empty. */
static struct keyspaceSnapshot {
    long long fed;
    long long *counts; /* 2 * server.dbnum */
} snap_released = {-1, NULL}, snap_candidate = {-1, NULL};

static void markDurable(long long fed) {
    if (fed > durable_fed) durable_fed = fed;
}

/* Durable acks across replicas (aof-uring-ack-replicas k, see "Replicas" in
 * the DESIGN comment). Checkpoints map AOF offsets to replication offsets:
 * each unit that fed the AOF appends (aof_fed, primary_repl_offset) after
 * it propagated. When the k-th highest AOF fsync offset the replicas
 * reported (REPLCONF ACK ... FACK) reaches a checkpoint's replication
 * offset, its AOF offset is durable on k replicas: replica_fed. */
#define AOF_URING_CHECKPOINTS 65536 /* Beyond, the last one absorbs new ones. */
static struct checkpoint {
    long long fed, reploff;
} *ckpt = NULL;
static size_t ckpt_head = 0, ckpt_len = 0;
static long long replica_fed = 0;      /* Prefix of aof_fed fdatasync'ed by k replicas. */
static long long replica_reploff = -1; /* k-th highest FACK offset (this role's offsets). */
static int was_primary = -1;           /* Role seen by the last noticePromotion(). */
static long long acked_fsynced = -1;   /* Replica: fsynced_reploff last sent to the primary. */
static long long noreplicas_refusals = 0;

static int ackReplicas(void) {
    return server.aof_uring_ack_replicas > 0 && server.primary_host == NULL;
}

static void resetReplicaAcks(int promoted);

/* Promoted: the replicas' acknowledgements start over. Checked before any
 * decision to hold a client, so that nothing is decided between the
 * promotion (REPLICAOF NO ONE, in a command) and the reset. */
static void noticePromotion(void) {
    int primary = server.primary_host == NULL;
    if (primary && was_primary == 0) resetReplicaAcks(1);
    was_primary = primary;
}

/* What a gated client's output may have reached: durable here and, on a
 * primary with aof-uring-ack-replicas, on that many replicas too. */
static long long releasedFed(void) {
    noticePromotion();
    if (ackReplicas() && replica_fed < durable_fed) return replica_fed;
    return durable_fed;
}

/* Drop the checkpoints the replicas have acknowledged. */
static void popAckedCheckpoints(void) {
    while (ckpt_len && ckpt[ckpt_head].reploff <= replica_reploff) {
        if (ckpt[ckpt_head].fed > replica_fed) replica_fed = ckpt[ckpt_head].fed;
        ckpt_head = (ckpt_head + 1) % AOF_URING_CHECKPOINTS;
        ckpt_len--;
    }
}

static void pushCheckpoint(long long fed, long long reploff) {
    if (server.aof_uring_ack_replicas == 0) return;
    if (ckpt == NULL) ckpt = zmalloc(sizeof(*ckpt) * AOF_URING_CHECKPOINTS);
    if (ckpt_len && reploff <= ckpt[(ckpt_head + ckpt_len - 1) % AOF_URING_CHECKPOINTS].reploff) {
        /* No replication bytes since the last one (a script's REPL_AOF
         * writes): the same replica acknowledgement covers both. */
        ckpt[(ckpt_head + ckpt_len - 1) % AOF_URING_CHECKPOINTS].fed = fed;
    } else if (ckpt_len == AOF_URING_CHECKPOINTS) {
        /* Full (replicas far behind): coarser, never wrong, since a later
         * replication offset only makes the replicas' ack come later. */
        struct checkpoint *last = &ckpt[(ckpt_head + ckpt_len - 1) % AOF_URING_CHECKPOINTS];
        last->fed = fed;
        last->reploff = reploff;
    } else {
        ckpt[(ckpt_head + ckpt_len) % AOF_URING_CHECKPOINTS] = (struct checkpoint){fed, reploff};
        ckpt_len++;
    }
    popAckedCheckpoints();
}

/* The replicas' acknowledgements start over. promoted: a new replication
 * history; the new replicas' acknowledgements of the old one mean nothing,
 * and what this server holds may be on no other disk yet (its old primary
 * may have died before telling anyone of its last writes), so everything fed
 * so far waits for the first acknowledgement of the new history. Output
 * already released under the replica's rule stays released (a client that
 * read keys before is not held for them again). Otherwise (the option or
 * the gate was just turned on) the writes executed before were already
 * acknowledged without replicas: only what comes next waits for them. */
static void resetReplicaAcks(int promoted) {
    ckpt_head = ckpt_len = 0;
    replica_reploff = -1;
    if (!promoted) {
        if (aof_fed > replica_fed) replica_fed = aof_fed;
        return;
    }
    replica_fed = 0;
    pushCheckpoint(aof_fed, server.primary_repl_offset);
    listIter li;
    listNode *ln;
    listRewind(server.clients, &li);
    while ((ln = listNext(&li))) {
        client *c = listNodeValue(ln);
        if (c->aof_uring_held_node == NULL && c->aof_uring_need != AOF_URING_UNRESOLVED) c->aof_uring_need = 0;
    }
}

/* Coalescing (durable mode): clients released by the last durable batch whose
 * next write has not been executed yet, and until when the next submission
 * waits for them. */
static size_t coalesce_wait = 0;
static monotime coalesce_deadline = 0;
static monotime coalesce_counted = 0; /* Deadline of the last wait counted in coalesce_waits. */
static long long last_fsync_us = 0;

#ifdef HAVE_LIBURING

enum { OP_FSYNC = 1, OP_DELAY = 2 };
/* user_data: the op in the low byte, the fdatasync's slot above it. */
#define OP_SLOT_SHIFT 8
#define AOF_URING_MAX_FSYNCS 8 /* aof-uring-fsyncs-in-flight's upper bound */

/* One fdatasync in flight. */
struct fsyncSlot {
    int used;
    int done;              /* Completed, released after every older one. */
    long long seq;         /* Submission order. */
    size_t direct_len;     /* A direct write of this many bytes; 0 for an fdatasync. */
    long long fsync_bytes; /* AOF bytes it covers that no earlier one did. */
    long long reploff;     /* primary_repl_offset when it was submitted. */
    long long fed_end;     /* aof_fed it makes durable. */
    monotime start;
    int pending_cqes;
    int res;
};

static struct {
    int active;
    struct io_uring ring;
    int efd;
    int defer_taskrun;
    int sqpoll;
    int fixed;        /* Slot 0 is a registered file table. */
    int fixed_fd;     /* fd currently in slot 0, -1 if none. */
    /* The fdatasyncs in flight. */
    struct fsyncSlot slot[AOF_URING_MAX_FSYNCS];
    int inflight;               /* Slots used. */
    long long inflight_bytes;   /* Sum of their fsync_bytes. */
    monotime last_start;        /* When the newest one was submitted. */
    long long seq;              /* Slots submitted, ever. */
    /* Direct writes: server.aof_fd opened again with O_DIRECT, its direct-I/O
     * alignment, and per slot an aligned buffer (raw is what zfree takes). */
    int direct_fd, direct_for;
    size_t direct_align, direct_mem_align;
    struct {
        char *raw, *buf;
        size_t cap;
    } dbuf[AOF_URING_MAX_FSYNCS];
    struct __kernel_timespec delay_ts;
} U = {.efd = -1, .fixed_fd = -1, .direct_fd = -1, .direct_for = -1};

static const char *errnoName(int err) {
    switch (err) {
    case EPERM: return "eperm";
    case ENOSYS: return "enosys";
    case ENOMEM: return "enomem";
    case EINVAL: return "einval";
    case EACCES: return "eacces";
    case EFAULT: return "efault";
    case EMFILE: return "emfile";
    case ENFILE: return "enfile";
    default: return "errno";
    }
}

static int ioUringDisabledBySysctl(void) {
    FILE *fp = fopen("/proc/sys/kernel/io_uring_disabled", "r");
    int v = 0;
    if (!fp) return 0;
    if (fscanf(fp, "%d", &v) != 1) v = 0;
    fclose(fp);
    return v != 0;
}

static void setFallback(const char *call, int err) {
    if (err == EPERM && ioUringDisabledBySysctl())
        snprintf(fallback_reason, sizeof(fallback_reason), "io_uring_disabled_sysctl");
    else
        snprintf(fallback_reason, sizeof(fallback_reason), "%s_%s", call, errnoName(err));
    serverLog(LL_WARNING,
              "io_uring AOF engine unavailable (%s: %s, reason %s): the AOF uses the posix engine "
              "(appendfsync %s).",
              call, strerror(err), fallback_reason,
              server.aof_fsync == AOF_FSYNC_ALWAYS ? "always" : server.aof_fsync == AOF_FSYNC_EVERYSEC ? "everysec" : "no");
    setup_failed = 1;
}

/* Fail-stop: the durability contract can no longer be kept. */
static void failStop(const char *what, int err) {
    serverLog(LL_WARNING, "io_uring AOF engine: %s: %s. Can't guarantee AOF durability. Exiting...", what, strerror(err));
    exit(1);
}

static void applyMaxWorkers(void) {
    unsigned int vals[2] = {(unsigned)server.aof_uring_max_workers, (unsigned)server.aof_uring_max_workers};
    int ret = io_uring_register_iowq_max_workers(&U.ring, vals);
    if (ret < 0) serverLog(LL_WARNING, "io_uring AOF engine: can't bound io-wq workers: %s", strerror(-ret));
}

static void eventfdReadable(aeEventLoop *el, int fd, void *privdata, int mask);
static void setFixedFile(int fd);

static int setupRing(void) {
    struct io_uring_params p;
    int ret;

    memset(&p, 0, sizeof(p));
    p.flags = IORING_SETUP_SINGLE_ISSUER;
    if (server.aof_uring_sqpoll) {
        p.flags |= IORING_SETUP_SQPOLL;
        p.sq_thread_idle = server.aof_uring_sqpoll_idle_ms;
        if (server.aof_uring_sqpoll_cpu >= 0) {
            p.flags |= IORING_SETUP_SQ_AFF;
            p.sq_thread_cpu = server.aof_uring_sqpoll_cpu;
        }
    } else {
        p.flags |= IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    }
    ret = io_uring_queue_init_params(server.aof_uring_queue_depth, &U.ring, &p);
    if (ret == -EINVAL) {
        /* Kernels before 6.1 reject SINGLE_ISSUER/DEFER_TASKRUN. */
        p.flags &= ~(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG);
        ret = io_uring_queue_init_params(server.aof_uring_queue_depth, &U.ring, &p);
    }
    if (ret < 0) {
        setFallback("io_uring_setup", -ret);
        return C_ERR;
    }
    U.defer_taskrun = (p.flags & IORING_SETUP_DEFER_TASKRUN) != 0;
    U.sqpoll = (p.flags & IORING_SETUP_SQPOLL) != 0;

    U.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (U.efd == -1) {
        setFallback("eventfd", errno);
        io_uring_queue_exit(&U.ring);
        return C_ERR;
    }
    ret = io_uring_register_eventfd(&U.ring, U.efd);
    if (ret < 0) {
        setFallback("io_uring_register_eventfd", -ret);
        goto err;
    }
    if (aeCreateFileEvent(server.el, U.efd, AE_READABLE, eventfdReadable, NULL) == AE_ERR) {
        setFallback("aeCreateFileEvent", ERANGE);
        goto err;
    }
    /* A registered file saves an fget/fput per op; without it we use the fd. */
    ret = io_uring_register_files_sparse(&U.ring, 1);
    U.fixed = ret == 0;
    if (ret < 0) serverLog(LL_NOTICE, "io_uring AOF engine: no registered file table: %s", strerror(-ret));
    U.fixed_fd = -1;
    applyMaxWorkers();

    U.active = 1;
    U.inflight = 0;
    U.inflight_bytes = 0;
    memset(U.slot, 0, sizeof(U.slot));
    snprintf(fallback_reason, sizeof(fallback_reason), "none");
    serverLog(LL_NOTICE,
              "io_uring AOF engine active: queue depth %d, ack %s, sqpoll %s, defer_taskrun %s, max workers %d.",
              server.aof_uring_queue_depth, server.aof_uring_ack == AOF_URING_ACK_DURABLE ? "durable" : "fast",
              U.sqpoll ? "yes" : "no", U.defer_taskrun ? "yes" : "no", server.aof_uring_max_workers);
    return C_OK;

err:
    close(U.efd);
    U.efd = -1;
    io_uring_queue_exit(&U.ring);
    return C_ERR;
}

static struct io_uring_sqe *getSqe(void) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&U.ring);
    /* The ring has >= 8 entries and a batch uses at most 2 (its fdatasync
     * or direct write, and the debug delay), so a full SQ means a bug, not
     * load. */
    if (!sqe) serverPanic("io_uring AOF engine: submission queue full");
    return sqe;
}

static void submitRing(void) {
    int ret;
    do {
        ret = io_uring_submit(&U.ring);
    } while (ret == -EINTR || ret == -EAGAIN);
    if (ret < 0) failStop("io_uring_submit", -ret);
}

/* Test knob (aof-uring-debug-fsync-delay-ms): link a timeout after the
 * fsync so the batch is only durable once it fires. Returns the extra CQEs. */
static int linkDebugDelay(struct io_uring_sqe *fsync_sqe, int slot) {
    struct io_uring_sqe *sqe;

    if (server.aof_uring_debug_fsync_delay_ms <= 0) return 0;
    fsync_sqe->flags |= IOSQE_IO_LINK;
    U.delay_ts.tv_sec = server.aof_uring_debug_fsync_delay_ms / 1000;
    U.delay_ts.tv_nsec = (long long)(server.aof_uring_debug_fsync_delay_ms % 1000) * 1000000;
    sqe = getSqe();
    io_uring_prep_timeout(sqe, &U.delay_ts, 0, 0);
    io_uring_sqe_set_data64(sqe, OP_DELAY | ((uint64_t)slot << OP_SLOT_SHIFT));
    return 1;
}

/* How many fdatasyncs may be in flight: aof-uring-fsyncs-in-flight in
 * durable mode, one in fast mode (it paces them instead). */
static int fsyncsAllowed(void) {
    return server.aof_uring_ack == AOF_URING_ACK_DURABLE ? server.aof_uring_fsyncs_in_flight : 1;
}

/* fdatasync [-> debug delay] for the bytes write(2) put in the file. */
static void submitFsync(void) {
    struct io_uring_sqe *sqe;
    struct fsyncSlot *f = NULL;
    int fd, i;

    for (i = 0; i < AOF_URING_MAX_FSYNCS && U.slot[i].used; i++);
    if (i == AOF_URING_MAX_FSYNCS) serverPanic("io_uring AOF engine: no free fdatasync slot");
    f = &U.slot[i];
    setFixedFile(server.aof_fd);
    fd = U.fixed ? 0 : server.aof_fd;
    f->used = 1;
    f->fsync_bytes = server.aof_last_incr_size - server.aof_last_incr_fsync_offset;
    f->reploff = server.primary_repl_offset;
    f->fed_end = aof_fed - (long long)sdslen(server.aof_buf);
    f->start = U.last_start = getMonotonicUs();
    server.aof_last_incr_fsync_offset = server.aof_last_incr_size;
    sqe = getSqe();
    io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
    if (U.fixed) sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, OP_FSYNC | ((uint64_t)i << OP_SLOT_SHIFT));
    f->pending_cqes = 1 + linkDebugDelay(sqe, i);
    f->res = 0;
    f->done = 0;
    f->seq = ++U.seq;
    f->direct_len = 0;
    U.inflight++;
    U.inflight_bytes += f->fsync_bytes;
    stats.submitted_batches++;
    stats.submitted_bytes += f->fsync_bytes;
    submitRing();
}

/* ---------------------------------------------------------------------------
 * Direct writes (aof-uring-direct-writes; "Direct writes" in the DESIGN comment)
 * ------------------------------------------------------------------------ */

#define AOF_URING_PAD_LINE 512              /* Longest padding line (< AOF_ANNOTATION_LINE_MAX_LEN). */
#define AOF_URING_DIRECT_KEEP (1024 * 1024) /* Larger slot buffers are freed after use. */

static char direct_open_reason[64] = "not_opened";
static void waitInflight(void);

static int directDeclined(const char *reason) {
    direct_declined_reason = reason;
    stats.direct_declined++;
    return 0;
}

/* Padding that takes a log ending at end to a multiple of align: 0, or at
 * least 3 bytes (the shortest annotation line, "#\r\n"). */
static size_t directPadding(long long end, size_t align) {
    size_t gap = (align - (size_t)(end % (long long)align)) % align;
    if (gap > 0 && gap < 3) gap += align;
    return gap;
}

/* gap bytes of annotation lines "#....\r\n", each at most
 * AOF_URING_PAD_LINE long: the loader and valkey-check-aof skip them. */
static void writePadding(char *p, size_t gap) {
    while (gap) {
        size_t line = gap > AOF_URING_PAD_LINE ? AOF_URING_PAD_LINE : gap;
        if (gap - line > 0 && gap - line < 3) line -= 3;
        p[0] = '#';
        memset(p + 1, '.', line - 3);
        p[line - 2] = '\r';
        p[line - 1] = '\n';
        p += line;
        gap -= line;
    }
}

static void directClose(void) {
    if (U.direct_fd != -1) close(U.direct_fd);
    U.direct_fd = -1;
    U.direct_for = -1;
}

/* Filesystems whose O_DIRECT writes with RWF_DSYNC are durable when they
 * complete, also when issued asynchronously from io_uring: ext4 and XFS
 * (iomap completes such a write with FUA or a cache flush). FUSE is the
 * counterexample: the kernel follows a synchronous RWF_DSYNC write with an
 * fsync request but not an asynchronous one inside the file's size, so a
 * FUSE filesystem that makes data durable at fsync only (LazyFS, and
 * tests/tools/fusedisk.c) loses it at a power cut. Every other filesystem
 * gets write(2) + fdatasync until it is shown to belong here. */
static const struct {
    long magic;
    const char *name;
    int direct_sync; /* On the allow-list. */
} filesystems[] = {
    {0xEF53, "ext4", 1},       {0x58465342, "xfs", 1},       {0x65735546, "fuse", 0},  {0x9123683E, "btrfs", 0},
    {0x01021994, "tmpfs", 0},  {0x794C7630, "overlayfs", 0}, {0x6969, "nfs", 0},       {0x2FC12FC1, "zfs", 0},
    {0xFF534D42, "cifs", 0},   {0xFE534D42, "smb2", 0},      {0x00C36400, "ceph", 0},
};

/* Whether fd's filesystem is on the allow-list; else the reason, naming it. */
static int directSyncHonoured(int fd) {
    struct statfs sfs;
    char hex[24];
    const char *name = hex;

    if (fstatfs(fd, &sfs) == -1) {
        snprintf(direct_open_reason, sizeof(direct_open_reason), "statfs_%s", errnoName(errno));
        return 0;
    }
    snprintf(hex, sizeof(hex), "0x%lx", (unsigned long)sfs.f_type);
    for (size_t i = 0; i < sizeof(filesystems) / sizeof(filesystems[0]); i++) {
        if ((long)sfs.f_type != filesystems[i].magic) continue;
        if (filesystems[i].direct_sync) return 1;
        name = filesystems[i].name;
    }
    snprintf(direct_open_reason, sizeof(direct_open_reason), "fs_%s_not_allowed", name);
    serverLog(LL_WARNING, "io_uring AOF engine: the AOF is on %s, where an O_DIRECT write with RWF_DSYNC is not "
              "known to reach the device: batches are written with write(2) and fdatasync'ed.", name);
    return 0;
}

/* server.aof_fd opened again with O_DIRECT (through /proc/self/fd, so it is
 * the same inode whatever its name), and its direct-I/O alignment. A file
 * that refused it, or whose filesystem is not on the allow-list, is not
 * asked again until server.aof_fd changes. */
static int directOpen(void) {
    char path[64];
    int fd;

    if (U.direct_for == server.aof_fd) return U.direct_fd != -1;
    directClose();
    U.direct_for = server.aof_fd;
    if (!directSyncHonoured(server.aof_fd)) return 0;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", server.aof_fd);
    fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (fd == -1) {
        snprintf(direct_open_reason, sizeof(direct_open_reason), "open_%s", errnoName(errno));
        serverLog(LL_WARNING, "io_uring AOF engine: can't open the AOF with O_DIRECT (%s): batches are written "
                  "with write(2) and fdatasync'ed.", strerror(errno));
        return 0;
    }
    U.direct_align = U.direct_mem_align = 4096; /* Where the kernel does not say: no device needs more. */
#ifdef STATX_DIOALIGN
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN)) {
        if (stx.stx_dio_offset_align == 0) {
            close(fd);
            snprintf(direct_open_reason, sizeof(direct_open_reason), "no_direct_io");
            serverLog(LL_WARNING, "io_uring AOF engine: the AOF's filesystem does not support O_DIRECT: batches are "
                      "written with write(2) and fdatasync'ed.");
            return 0;
        }
        U.direct_align = stx.stx_dio_offset_align;
        U.direct_mem_align = stx.stx_dio_mem_align > U.direct_align ? stx.stx_dio_mem_align : U.direct_align;
    }
#endif
    U.direct_fd = fd;
    return 1;
}

/* Slot i's buffer, aligned for O_DIRECT, with room for len bytes. */
static char *directBuffer(int i, size_t len) {
    size_t align = U.direct_mem_align;
    if (U.dbuf[i].cap < len || (uintptr_t)U.dbuf[i].buf % align) {
        zfree(U.dbuf[i].raw);
        size_t cap = len < 65536 ? 65536 : len + len / 2;
        U.dbuf[i].raw = zmalloc(cap + align);
        U.dbuf[i].buf = (char *)(((uintptr_t)U.dbuf[i].raw + align - 1) & ~(uintptr_t)(align - 1));
        U.dbuf[i].cap = cap;
    }
    return U.dbuf[i].buf;
}

static void directFreeBuffer(int i) {
    zfree(U.dbuf[i].raw);
    U.dbuf[i].raw = U.dbuf[i].buf = NULL;
    U.dbuf[i].cap = 0;
}

int aofUringDirectWrite(int force) {
    long long off = server.aof_last_incr_size;
    size_t len = sdslen(server.aof_buf), gap, total;
    struct fsyncSlot *f;
    struct io_uring_sqe *sqe;
    int i;

    /* Durable mode only: fast mode acknowledges before the write. */
    if (!server.aof_uring_direct_writes || server.aof_uring_ack != AOF_URING_ACK_DURABLE) return 0;
    /* The write(2) path retries the bytes and clears the error. */
    if (server.aof_last_write_status != C_OK) return directDeclined("write_error");
    /* An fdatasync must cover them: a direct write covers only its own. */
    if (server.aof_last_incr_fsync_offset != off) return directDeclined("unsynced_bytes");
    if (!directOpen()) return directDeclined(direct_open_reason);
    if (off % (long long)U.direct_align) {
        /* The first batch after a load or a switch: written with write(2)
         * and padded, so that the next one starts on a block. */
        gap = directPadding(off + (long long)len, U.direct_align);
        server.aof_buf = sdsMakeRoomFor(server.aof_buf, gap);
        writePadding(server.aof_buf + len, gap);
        sdsIncrLen(server.aof_buf, (ssize_t)gap);
        stats.direct_padding_bytes += gap;
        return directDeclined("unaligned_tail");
    }
    gap = directPadding((long long)len, U.direct_align);
    total = len + gap;
    /* Only over zeros already written: nothing to allocate (no ENOSPC), no
     * size to commit. Elsewhere (a fresh INCR file's first chunk, the
     * preallocation off or failing) write(2) + fdatasync. */
    if (!aofPreallocCovers(server.aof_fd, off + (off_t)total)) return directDeclined("past_preallocated");
    if (U.inflight >= AOF_URING_MAX_FSYNCS) waitInflight(); /* force with every slot in use */

    for (i = 0; i < AOF_URING_MAX_FSYNCS && U.slot[i].used; i++);
    f = &U.slot[i];
    char *buf = directBuffer(i, total);
    memcpy(buf, server.aof_buf, len);
    writePadding(buf + len, gap);
    server.aof_current_size += (off_t)total;
    server.aof_last_incr_size += (off_t)total;
    aofPreallocWritten(server.aof_fd, server.aof_last_incr_size);
    /* As the write(2) path re-uses or frees aof_buf. */
    if ((sdslen(server.aof_buf) + sdsavail(server.aof_buf)) < 4000) {
        sdsclear(server.aof_buf);
    } else {
        sdsfree(server.aof_buf);
        server.aof_buf = sdsempty();
    }

    f->used = 1;
    f->done = 0;
    f->seq = ++U.seq;
    f->direct_len = total;
    f->fsync_bytes = (long long)total;
    f->reploff = server.primary_repl_offset;
    f->fed_end = aof_fed;
    f->start = U.last_start = getMonotonicUs();
    f->res = 0;
    server.aof_last_incr_fsync_offset = server.aof_last_incr_size;
    sqe = getSqe();
    io_uring_prep_write(sqe, U.direct_fd, buf, (unsigned)total, (uint64_t)off);
    sqe->rw_flags = RWF_DSYNC;
    io_uring_sqe_set_data64(sqe, OP_FSYNC | ((uint64_t)i << OP_SLOT_SHIFT));
    f->pending_cqes = 1 + linkDebugDelay(sqe, i);
    U.inflight++;
    U.inflight_bytes += f->fsync_bytes;
    stats.submitted_batches++;
    stats.submitted_bytes += f->fsync_bytes;
    stats.direct_writes++;
    stats.direct_padding_bytes += gap;
    direct_declined_reason = "none";
    submitRing();
    if (force) aofUringFsync(1);
    return 1;
}

static void recordFsync(monotime start) {
    long long us = (long long)(getMonotonicUs() - start);
    aofFsyncHistogramRecord(&fsyncs, us);
    aofFsyncRecord(us);
    last_fsync_us = us;
    /* Reaped in a later pass (the usual case): count up to that pass's
     * start, so a slow command in it is not blamed on the disk (a lower
     * bound, short by at most the part of one pass the fsync overlapped). */
    if (server.el_start > start) us = (long long)(server.el_start - start);
    latencyAddSampleIfNeeded("aof-uring-fsync", us / 1000);
}

/* A batch is durable: its fdatasync or its direct write completed, and so
 * did every older one. */
static void fsyncDone(struct fsyncSlot *f) {
    if (f->res < 0) failStop(f->direct_len ? "O_DIRECT write of the AOF failed" : "fdatasync of the AOF failed", -f->res);
    if (f->direct_len && (size_t)f->res != f->direct_len) failStop("short O_DIRECT write of the AOF", EIO);
    recordFsync(f->start);
    if (f->direct_len > AOF_URING_DIRECT_KEEP) directFreeBuffer((int)(f - U.slot));
    f->done = 0;
    stats.completed_batches++;
    server.aof_last_fsync = server.mstime;
    f->used = 0;
    U.inflight--;
    U.inflight_bytes -= f->fsync_bytes;
    stats.written_bytes += f->fsync_bytes;
    long long durable = (U.inflight == 0 && server.aof_last_incr_fsync_offset == server.aof_last_incr_size &&
                         sdslen(server.aof_buf) == 0)
                            ? server.primary_repl_offset
                            : f->reploff;
    if (durable > atomic_load_explicit(&server.fsynced_reploff_pending, memory_order_relaxed))
        atomic_store_explicit(&server.fsynced_reploff_pending, durable, memory_order_relaxed);
    markDurable(f->fed_end);
}

static void handleCqe(struct io_uring_cqe *cqe) {
    uint64_t data = io_uring_cqe_get_data64(cqe);
    uint64_t slot = data >> OP_SLOT_SHIFT;
    struct fsyncSlot *f = slot < AOF_URING_MAX_FSYNCS ? &U.slot[slot] : NULL;
    switch (data & ((1 << OP_SLOT_SHIFT) - 1)) {
    case OP_FSYNC: f->res = cqe->res; break;
    case OP_DELAY: break; /* -ETIME when it fired, -ECANCELED after a short write. */
    default: serverPanic("io_uring AOF engine: unknown completion");
    }
    if (f == NULL || !f->used) serverPanic("io_uring AOF engine: completion of an unused fdatasync slot");
    if (--f->pending_cqes) return;
    /* An fdatasync covers every byte written before it, but a direct write
     * only its own, and an fdatasync does not wait for direct writes in
     * flight: batches are released in submission order. */
    f->done = 1;
    for (;;) {
        struct fsyncSlot *oldest = NULL;
        for (int j = 0; j < AOF_URING_MAX_FSYNCS; j++)
            if (U.slot[j].used && (!oldest || U.slot[j].seq < oldest->seq)) oldest = &U.slot[j];
        if (!oldest || !oldest->done) return;
        fsyncDone(oldest);
    }
}

/* Handle the CQEs already posted. With enter (eventfd handler) and
 * DEFER_TASKRUN, first let the kernel post them: completions are only run
 * when the issuer enters the kernel. Posting them signals the eventfd again,
 * which would wake the event loop once more for nothing, so the eventfd is
 * off meanwhile; work queued in that window sets IORING_SQ_TASKRUN
 * (IORING_SETUP_TASKRUN_FLAG) and is run here too. Elsewhere a peek costs no
 * syscall. */
static void reapCompletions(int enter) {
    struct io_uring_cqe *cqe;
    if (enter && U.defer_taskrun) {
        do {
            io_uring_cq_eventfd_toggle(&U.ring, false);
            int ret = io_uring_get_events(&U.ring);
            io_uring_cq_eventfd_toggle(&U.ring, true);
            if (ret < 0 && ret != -EINTR && ret != -EAGAIN) failStop("io_uring_get_events", -ret);
        } while (IO_URING_READ_ONCE(*U.ring.sq.kflags) & IORING_SQ_TASKRUN);
    }
    while (U.inflight && io_uring_peek_cqe(&U.ring, &cqe) == 0) {
        handleCqe(cqe);
        io_uring_cqe_seen(&U.ring, cqe);
    }
}

/* Block until every fdatasync in flight completed. */
static void waitInflight(void) {
    while (U.inflight) {
        struct io_uring_cqe *cqe;
        int ret = io_uring_wait_cqe(&U.ring, &cqe);
        if (ret == -EINTR || ret == -EAGAIN) continue;
        if (ret < 0) failStop("io_uring_wait_cqe", -ret);
        handleCqe(cqe);
        io_uring_cqe_seen(&U.ring, cqe);
        reapCompletions(0);
    }
}

static void eventfdReadable(aeEventLoop *el, int fd, void *privdata, int mask) {
    UNUSED(el);
    UNUSED(privdata);
    UNUSED(mask);
    uint64_t v;
    /* Clear the counter; EAGAIN means another reap already consumed it. */
    if (read(fd, &v, sizeof(v)) == -1 && errno != EAGAIN)
        serverLog(LL_WARNING, "io_uring AOF engine: eventfd read: %s", strerror(errno));
    stats.wakeups++;
    if (U.active) reapCompletions(1);
}

/* Make slot 0 of the registered file table point to fd (-1 clears it). */
static void setFixedFile(int fd) {
    if (!U.fixed || U.fixed_fd == fd) return;
    int ret = io_uring_register_files_update(&U.ring, 0, &fd, 1);
    if (ret < 0) {
        serverLog(LL_WARNING, "io_uring AOF engine: can't update the registered file, using the fd: %s",
                  strerror(-ret));
        U.fixed = 0;
        return;
    }
    U.fixed_fd = fd;
}

/* Durable mode: should the submission of aof_buf wait for the clients the
 * last batch released? See "Coalescing" in the DESIGN comment. Called from
 * beforeSleep: the event loop's next poll returns by the deadline. */
static int coalesceWait(void) {
    if (coalesce_wait == 0) return 0;
    monotime now = getMonotonicUs();
    if (now >= coalesce_deadline) {
        coalesce_wait = 0;
        return 0;
    }
    if (coalesce_counted != coalesce_deadline) {
        coalesce_counted = coalesce_deadline;
        stats.coalesce_waits++;
    }
    aeWakeBefore(server.el, coalesce_deadline);
    return 1;
}

int aofUringActive(void) {
    return U.active;
}

int aofUringEnsure(void) {
    if (U.active) return 1;
    if (server.aof_engine != AOF_ENGINE_URING || setup_failed) return 0;
    /* A bio fsync job of the posix engine would store a stale
     * fsynced_reploff_pending after our newer ones. */
    bioDrainWorker(BIO_AOF_FSYNC);
    return setupRing() == C_OK;
}

int aofUringBeforeWrite(int force) {
    /* durable mode, group commit: aof_buf is written once the fdatasync in
     * flight completed (or after the coalescing wait), and goes with the
     * next one. */
    if (server.aof_uring_ack == AOF_URING_ACK_DURABLE && !force && (U.inflight >= fsyncsAllowed() || coalesceWait()))
        return 0;
    return 1;
}

void aofUringFsync(int force) {
    long long unsynced = server.aof_last_incr_size - server.aof_last_incr_fsync_offset;
    int durable = server.aof_uring_ack == AOF_URING_ACK_DURABLE;
    int waited = 0;
    /* Group commit: the next one when a slot frees up. */
    if (U.inflight >= fsyncsAllowed() && !force && durable) return;
    if (U.inflight && !force && !durable) {
        /* Group commit, unless the loss window would exceed its bound. */
        if (unsynced + U.inflight_bytes <= server.aof_uring_max_inflight_bytes) return;
        mstime_t latency;
        stats.backpressure_events++;
        latencyStartMonitor(latency);
        waitInflight();
        latencyEndMonitor(latency);
        latencyAddSampleIfNeeded("aof-uring-backpressure", latency);
        waited = 1;
    }
    if (force) waitInflight();
    /* Pacing (see the DESIGN comment), unless the unsynced bytes reach their
     * bound. flushAppendOnlyFile runs at least every serverCron, so an idle
     * server still syncs. The test knob's delay is not device time. */
    if (!durable && !force && !waited && unsynced > 0 && unsynced < server.aof_uring_max_inflight_bytes &&
        server.aof_uring_debug_fsync_delay_ms == 0) {
        long long gap = AOF_URING_FAST_FSYNC_SPACING * last_fsync_us;
        long long room = AOF_URING_FAST_LOSS_WINDOW_US - last_fsync_us; /* <= 0: back to back */
        if (gap > room) gap = room;
        if ((long long)(getMonotonicUs() - U.last_start) < gap) return;
    }
    if (unsynced > 0) {
        submitFsync();
        if (force) waitInflight();
    } else if (!U.inflight && sdslen(server.aof_buf) == 0 && server.aof_last_write_status == C_OK) {
        atomic_store_explicit(&server.fsynced_reploff_pending, server.primary_repl_offset, memory_order_relaxed);
        markDurable(aof_fed);
    }
    /* The file may be closed next (rotation, shutdown): keep no reference. */
    if (force) {
        setFixedFile(-1);
        directClose();
    }
}

void aofUringWriteFailed(int short_write) {
    if (!U.active) return;
    stats.write_errors++;
    if (short_write) stats.short_writes++;
}

void aofUringStop(void) {
    if (!U.active) return;
    /* Everything in aof_buf written and fdatasync'ed through the ring. */
    if (server.aof_fd != -1) flushAppendOnlyFile(1);
    waitInflight();
    aeDeleteFileEvent(server.el, U.efd, AE_READABLE);
    io_uring_queue_exit(&U.ring);
    directClose();
    for (int i = 0; i < AOF_URING_MAX_FSYNCS; i++) directFreeBuffer(i);
    close(U.efd);
    U.efd = -1;
    U.fixed_fd = -1;
    U.active = 0;
    serverLog(LL_NOTICE, "io_uring AOF engine stopped.");
}

int aofUringUpdateMaxWorkers(const char **err) {
    UNUSED(err);
    if (U.active) applyMaxWorkers();
    return 1;
}

#else /* !HAVE_LIBURING */

int aofUringActive(void) {
    return 0;
}

int aofUringEnsure(void) {
    if (server.aof_engine == AOF_ENGINE_URING && !setup_failed) {
        snprintf(fallback_reason, sizeof(fallback_reason), "not_built");
        serverLog(LL_WARNING, "io_uring AOF engine not built in (USE_LIBURING=no): the AOF uses the posix engine.");
        setup_failed = 1;
    }
    return 0;
}

void aofUringFsync(int force) {
    UNUSED(force);
}

int aofUringBeforeWrite(int force) {
    UNUSED(force);
    return 1;
}

void aofUringWriteFailed(int short_write) {
    UNUSED(short_write);
}

int aofUringDirectWrite(int force) {
    UNUSED(force);
    return 0;
}

void aofUringStop(void) {
}

int aofUringUpdateMaxWorkers(const char **err) {
    UNUSED(err);
    return 1;
}

#endif /* HAVE_LIBURING */

int aofUringUpdateEngine(const char **err) {
    UNUSED(err);
    if (server.aof_engine == AOF_ENGINE_URING) {
        /* Re-selecting the engine retries a failed setup. */
        setup_failed = 0;
        if (server.aof_state != AOF_OFF) aofUringEnsure();
    } else {
        aofUringStop();
    }
    return 1;
}

int aofUringUpdateRing(const char **err) {
    UNUSED(err);
    if (aofUringActive()) {
        aofUringStop();
        aofUringEnsure();
    }
    return 1;
}

int aofUringIsValidQueueDepth(long long val, const char **err) {
    if (val < 8 || val > 32768 || (val & (val - 1)) != 0) {
        *err = "must be a power of two between 8 and 32768";
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------------------
 * Configuration checks
 * ------------------------------------------------------------------------ */

static const char *io_threads_conflict =
    "aof-uring-ack durable with appendfsync-engine uring can't run with io-threads > 1: I/O threads "
    "read from and write to the clients the durable gate holds (use io-threads 1, or aof-uring-ack fast)";

const char *aofUringConfigConflict(void) {
    if (server.aof_engine == AOF_ENGINE_URING && server.aof_uring_ack == AOF_URING_ACK_DURABLE &&
        server.io_threads_num > 1)
        return io_threads_conflict;
    return NULL;
}

int aofUringIsValidEngine(int val, const char **err) {
    if (val == AOF_ENGINE_URING && server.aof_uring_ack == AOF_URING_ACK_DURABLE && server.io_threads_num > 1) {
        *err = io_threads_conflict;
        return 0;
    }
    return 1;
}

int aofUringIsValidAck(int val, const char **err) {
    if (val == AOF_URING_ACK_DURABLE && server.aof_engine == AOF_ENGINE_URING && server.io_threads_num > 1) {
        *err = io_threads_conflict;
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------------------
 * The durable gate (see "Ack modes" in the DESIGN comment)
 * ------------------------------------------------------------------------ */

static int gatingEnabled(void) {
    return aofUringActive() && server.aof_uring_ack == AOF_URING_ACK_DURABLE && server.aof_state == AOF_ON &&
           server.fsynced_reploff != -1;
}

/* gatingEnabled(), noticing when it turns on: what was written before was
 * not tracked, so every read waits for the next durable point. */
static int gateOn(void) {
    int on = gatingEnabled();
    if (on && !gate_was_on) {
        dirty_all = aof_fed;
        last_write_off = aof_fed;
        functions_off = aof_fed;
        snap_released.fed = snap_candidate.fed = -1;
        resetReplicaAcks(0);
        /* Allocated now rather than at the first write, so that used_memory
         * does not jump by 512 KiB in the middle of a workload. */
        if (dirty_off == NULL) dirty_off = zcalloc(sizeof(long long) * AOF_URING_DIRTY_SLOTS);
        if (dirty_db == NULL) {
            dirty_dbs = server.dbnum;
            dirty_db = zcalloc(sizeof(long long) * dirty_dbs);
            pending_dbs = zmalloc(sizeof(int) * dirty_dbs);
        }
    }
    gate_was_on = on;
    return on;
}

/* Clients whose output the gate holds: normal clients and monitors, not the
 * replication links nor module or fake clients. */
static int gatedClient(client *c) {
    return c->conn && !c->flag.primary && (!c->flag.replica || c->flag.monitor) && !c->flag.module;
}

static int mustHold(client *c) {
    return c->aof_uring_need > releasedFed() && gateOn() && gatedClient(c);
}

int aofUringHoldClient(client *c) {
    if (!mustHold(c)) return 0;
    if (c->aof_uring_held_node == NULL) {
        if (held_clients == NULL) held_clients = listCreate();
        listAddNodeTail(held_clients, c);
        c->aof_uring_held_node = listLast(held_clients);
        c->aof_uring_held_since = server.mstime;
        stats.held_events++;
    }
    return 1;
}

size_t aofUringHeldOutputMemory(void) {
    size_t sum = 0;
    listIter li;
    listNode *ln;
    if (held_clients == NULL) return 0;
    listRewind(held_clients, &li);
    while ((ln = listNext(&li))) sum += getClientOutputBufferMemoryUsage(listNodeValue(ln));
    return sum;
}

void aofUringClientFreed(client *c) {
    if (c->aof_uring_held_node == NULL) return;
    listDelNode(held_clients, c->aof_uring_held_node);
    c->aof_uring_held_node = NULL;
}

void aofUringFed(size_t len) {
    aof_fed += (long long)len;
}

/* Key (db-qualified) -> slot in the dirty table. */
static uint32_t keySlot(int dbid, const char *p, size_t len) {
    uint64_t h = dictGenHashFunction(p, len) ^ ((uint64_t)dbid * 0x9E3779B97F4A7C15ULL);
    return (uint32_t)(h & (AOF_URING_DIRTY_SLOTS - 1));
}

static void noteRead(long long off) {
    if (off == AOF_URING_UNRESOLVED)
        unit_read_unresolved = 1;
    else if (off > unit_read_off)
        unit_read_off = off;
}

void aofUringKeyRead(serverDb *db, sds key) {
    if (!gateOn()) return;
    unit_read_any = 1;
    noteRead(dirty_off[keySlot(db->id, key, sdslen(key))]);
    if (db->id < dirty_dbs) noteRead(dirty_db[db->id]);
}

void aofUringKeyModified(serverDb *db, robj *key) {
    char buf[LONG_STR_SIZE];
    const char *p = buf;
    size_t len;

    if (!gateOn()) return;
    if (sdsEncodedObject(key)) {
        p = key->ptr;
        len = sdslen(key->ptr);
    } else {
        len = ll2string(buf, sizeof(buf), (long)key->ptr);
    }
    uint32_t slot = keySlot(db->id, p, len);
    if (dirty_off[slot] == AOF_URING_UNRESOLVED) return;
    dirty_off[slot] = AOF_URING_UNRESOLVED;
    if (pending_len == pending_cap) {
        pending_cap = pending_cap ? pending_cap * 2 : 256;
        pending_slots = zrealloc(pending_slots, pending_cap * sizeof(*pending_slots));
    }
    pending_slots[pending_len++] = slot;
}

void aofUringDbModified(serverDb *db) {
    if (!gateOn()) return;
    if (db->id >= dirty_dbs || dirty_db[db->id] == AOF_URING_UNRESOLVED) return;
    dirty_db[db->id] = AOF_URING_UNRESOLVED;
    pending_dbs[pending_dbs_len++] = db->id;
}

/* A command without key arguments that shows nothing of the data: the
 * connection's own state, transactions (EXEC's commands are judged one by
 * one), pub/sub (receivers are held as pushes), server introspection and
 * server control. INFO's keyspace section is served as of the last durable
 * point (aofUringKeyspaceCounts). SLOWLOG and COMMANDLOG show a slow
 * command's arguments at once: an admin's view, which redis_exporter reads
 * at every scrape, and monitoring must answer while the disk stalls. A
 * failover (REPLICAOF NO ONE, FAILOVER, a Sentinel's MULTI) or a SHUTDOWN
 * must not wait for a disk that may be the reason for it. CLUSTER's
 * subcommands that count or list keys are not exempt. Every other keyless
 * command is taken to see the whole keyspace: a new or unknown one waits
 * rather than leaks. */
static int keylessShowsNoData(struct serverCommand *cmd) {
    static const char *const exempt[] = {
        /* introspection */
        "info", "config", "time", "lastsave", "role", "monitor", "script", "acl", "latency", "slowlog", "commandlog",
        /* replication and server control */
        "replconf", "psync", "sync", "replicaof", "slaveof", "failover", "shutdown", "save", "bgsave",
        "bgrewriteaof", "module", "cluster"};
    if (cmd->acl_categories & (ACL_CATEGORY_CONNECTION | ACL_CATEGORY_TRANSACTION)) return 1;
    if (cmd->flags & CMD_PUBSUB) return 1;
    const char *name = (cmd->parent ? cmd->parent : cmd)->declared_name;
    if (!strcasecmp(name, "cluster") &&
        (!strcasecmp(cmd->declared_name, "countkeysinslot") || !strcasecmp(cmd->declared_name, "getkeysinslot")))
        return 0;
    for (size_t i = 0; i < sizeof(exempt) / sizeof(*exempt); i++)
        if (!strcasecmp(name, exempt[i])) return 1;
    return 0;
}

static int isFunctionCommand(struct serverCommand *cmd) {
    return cmd->parent && !strcasecmp(cmd->parent->declared_name, "function");
}

void aofUringAfterCommand(client *c) {
    struct serverCommand *cmd = c->cmd;
    if (!gateOn()) return;
    /* A command without key arguments that may show the data (KEYS, SCAN,
     * DBSIZE, RANDOMKEY, MEMORY STATS, DEBUG DIGEST, FUNCTION LIST...) sees
     * the whole keyspace and the functions: it waits for every write. */
    if (cmd->key_specs_num == 0 && !(cmd->flags & CMD_MODULE_GETKEYS) && !keylessShowsNoData(cmd)) {
        unit_read_any = 1;
        noteRead(last_write_off);
        if (pending_len || pending_dbs_len) unit_read_unresolved = 1;
    }
    /* Functions are state the AOF carries besides keys: FCALL shows that a
     * library is loaded whatever keys it touches. */
    if (cmd->proc == fcallCommand || cmd->proc == fcallroCommand) {
        unit_read_any = 1;
        noteRead(functions_off);
    }
    if ((cmd->flags & CMD_WRITE) && isFunctionCommand(cmd)) unit_functions_changed = 1;
}

/* INFO keyspace's counts for db j (live ones in *keys and *vkeys): while the
 * gate is on and some write is not released yet, the counts of the newest
 * released snapshot instead, so that INFO shows no write before it is durable
 * and still answers at once when the disk stalls (monitoring needs it then).
 * With no released snapshot (the gate just turned on) the reply waits. */
void aofUringKeyspaceCounts(int j, long long *keys, long long *vkeys) {
    if (!gateOn() || releasedFed() >= last_write_off) return;
    if (snap_released.fed >= 0) {
        *keys = snap_released.counts[2 * j];
        *vkeys = snap_released.counts[2 * j + 1];
        return;
    }
    unit_read_any = 1;
    noteRead(last_write_off);
}

/* Called at the end of a pass, when every write executed has been fed: the
 * keyspace now is its state at aof_fed. */
static void snapshotKeyspace(void) {
    if (snap_candidate.fed >= 0 && snap_candidate.fed <= releasedFed()) {
        struct keyspaceSnapshot t = snap_released;
        snap_released = snap_candidate;
        snap_candidate = t;
        snap_candidate.fed = -1;
    }
    if (snap_candidate.fed >= 0 || aof_fed <= snap_released.fed) return;
    if (snap_candidate.counts == NULL) snap_candidate.counts = zmalloc(sizeof(long long) * 2 * server.dbnum);
    for (int j = 0; j < server.dbnum; j++) {
        snap_candidate.counts[2 * j] = kvstoreSize(server.db[j].keys);
        snap_candidate.counts[2 * j + 1] = kvstoreSize(server.db[j].expires);
    }
    snap_candidate.fed = aof_fed;
    if (aof_fed <= releasedFed()) snapshotKeyspace(); /* Released already: promote it now. */
}

void aofUringPushed(client *c) {
    if (c == server.current_client || c->aof_uring_need == AOF_URING_UNRESOLVED || !gatedClient(c) || !gateOn())
        return;
    if (pushed_len == pushed_cap) {
        pushed_cap = pushed_cap ? pushed_cap * 2 : 16;
        pushed = zrealloc(pushed, pushed_cap * sizeof(*pushed));
    }
    pushed[pushed_len].id = c->id;
    pushed[pushed_len].need = c->aof_uring_need;
    pushed_len++;
    /* Held from now on; resolveUnit() sets what it waits for. */
    c->aof_uring_need = AOF_URING_UNRESOLVED;
    aofUringHoldClient(c);
}

/* The execution unit is over and propagated (or, target NULL, beforeSleep):
 * everything it wrote has an AOF offset now. Give the dirty keys and dbs
 * that offset, make target (the client whose command ran) wait for what it
 * wrote and what it read, and every client pushed data wait for every write
 * executed before the push. */
static void resolveUnit(client *target) {
    long long fed = aof_fed;
    int wrote = fed > resolved_fed;
    if (!wrote && !pending_len && !pending_dbs_len && !unit_read_any && !pushed_len) {
        unit_functions_changed = 0; /* A FUNCTION LOAD that failed. */
        return;
    }

    int dirtied = pending_len || pending_dbs_len;
    for (size_t i = 0; i < pending_len; i++) dirty_off[pending_slots[i]] = fed;
    for (size_t i = 0; i < pending_dbs_len; i++) dirty_db[pending_dbs[i]] = fed;
    pending_len = pending_dbs_len = 0;
    if (wrote) {
        if (target && coalesce_wait) coalesce_wait--;
        last_write_off = fed;
        /* Bytes fed without any key or db changing (FUNCTION LOAD, module
         * propagation): whatever they changed, every read waits for them. */
        if (!dirtied) dirty_all = fed;
        if (unit_functions_changed) functions_off = fed;
        resolved_fed = fed;
        /* Propagated to the AOF and the replication stream together. */
        pushCheckpoint(fed, server.primary_repl_offset);
    }

    long long need = unit_read_off;
    if (unit_read_any && dirty_all > need) need = dirty_all;
    if (wrote || unit_read_unresolved) need = fed;
    if (target && gatedClient(target) && need > target->aof_uring_need) {
        if (!wrote && need > releasedFed()) stats.gated_reads++;
        if (wrote) target->aof_uring_wrote = 1;
        target->aof_uring_need = need;
        /* In the held list at once, so that its output counts as held
         * (aofUringHeldOutputMemory) before the next eviction check. */
        aofUringHoldClient(target);
    }
    unit_read_off = 0;
    unit_read_unresolved = unit_read_any = unit_functions_changed = 0;

    for (size_t i = 0; i < pushed_len; i++) {
        client *c = lookupClientByID(pushed[i].id);
        if (c == NULL || c->aof_uring_need != AOF_URING_UNRESOLVED) continue;
        c->aof_uring_need = pushed[i].need > fed ? pushed[i].need : fed;
        if (fed > releasedFed()) stats.gated_pushes++;
    }
    pushed_len = 0;
}

void aofUringExecutionUnitDone(void) {
    resolveUnit(server.current_client);
}

/* The k-th highest AOF fsync offset reported by the online replicas, -1 if
 * fewer than k report one. */
static long long kthReplicaFsync(int k) {
    long long top[64]; /* aof-uring-ack-replicas <= 64 */
    int n = 0;
    listIter li;
    listNode *ln;
    listRewind(server.replicas, &li);
    while ((ln = listNext(&li))) {
        client *r = listNodeValue(ln);
        if (r->repl_data->repl_state != REPLICA_STATE_ONLINE) continue;
        long long off = r->repl_data->repl_aof_off;
        if (n == k && off <= top[k - 1]) continue;
        int i = n < k ? n++ : k - 1; /* Insert, in descending order. */
        while (i > 0 && top[i - 1] < off) {
            top[i] = top[i - 1];
            i--;
        }
        top[i] = off;
    }
    return n < k ? -1 : top[k - 1];
}

void aofUringReplicaAcked(void) {
    if (!ackReplicas() || !gateOn()) return;
    long long off = kthReplicaFsync(server.aof_uring_ack_replicas);
    if (off <= replica_reploff) return;
    replica_reploff = off;
    popAckedCheckpoints(); /* Held clients are released in beforeSleep. */
}

int aofUringReplicasRequired(void) {
    return ackReplicas() && gatingEnabled();
}

/* Replicas that count as connected: online, and heard from within
 * min-replicas-max-lag seconds (10 when that is 0). */
int aofUringEnoughReplicas(void) {
    if (!aofUringReplicasRequired()) return 1;
    int good = 0, max_lag = server.repl_min_replicas_max_lag ? server.repl_min_replicas_max_lag : 10;
    listIter li;
    listNode *ln;
    listRewind(server.replicas, &li);
    while ((ln = listNext(&li))) {
        client *r = listNodeValue(ln);
        if (r->repl_data->repl_state == REPLICA_STATE_ONLINE && server.unixtime - r->repl_data->repl_ack_time <= max_lag)
            good++;
    }
    if (good >= server.aof_uring_ack_replicas) return 1;
    noreplicas_refusals++;
    return 0;
}

int aofUringUpdateAckReplicas(const char **err) {
    UNUSED(err);
    resetReplicaAcks(0);
    aofUringReplicaAcked();
    return 1;
}

/* A held client waits at most aof-uring-hold-timeout-ms; then it is
 * disconnected without a reply (see "Failure" in the DESIGN comment). */
static int holdTimedOut(client *c) {
    static time_t last_log = 0;
    if (server.aof_uring_hold_timeout_ms == 0 || server.mstime - c->aof_uring_held_since < server.aof_uring_hold_timeout_ms)
        return 0;
    stats.hold_timeouts++;
    if (server.unixtime - last_log > 10) {
        int replicas = c->aof_uring_need <= durable_fed && ackReplicas();
        serverLog(LL_WARNING,
                  "io_uring AOF engine: closing a client held %lld ms for durability (aof-uring-hold-timeout-ms %d; "
                  "%s%s%s); its reply was never sent.",
                  (long long)(server.mstime - c->aof_uring_held_since), server.aof_uring_hold_timeout_ms,
                  replicas ? "durable here, waiting for aof-uring-ack-replicas replicas to report their fsync"
                           : "AOF write status ",
                  replicas ? "" : (server.aof_last_write_status == C_OK ? "ok" : "error: "),
                  replicas || server.aof_last_write_status == C_OK ? "" : strerror(server.aof_last_write_errno));
        last_log = server.unixtime;
    }
    return 1;
}

void aofUringBeforeSleep(void) {
#ifdef HAVE_LIBURING
    if (U.inflight) reapCompletions(0);
#endif
    /* Every execution unit has propagated by now; resolve what happened
     * outside of one (pushes from timers and tracking broadcasts). */
    resolveUnit(NULL);
    if (gateOn()) snapshotKeyspace();
    /* Publish the durable offset now (upstream does it after the flush) so
     * that the commands of released clients join the next batch. */
    if (server.aof_state == AOF_ON && server.fsynced_reploff != -1)
        server.fsynced_reploff = atomic_load_explicit(&server.fsynced_reploff_pending, memory_order_relaxed);
    /* A replica tells its primary as soon as a batch is durable, rather
     * than at the next replicationCron (once a second): the primary may
     * be holding replies for it (aof-uring-ack-replicas). */
    if (aofUringActive() && server.primary_host && server.primary && !server.primary->flag.pre_psync &&
        server.repl_state == REPL_STATE_CONNECTED && server.fsynced_reploff != acked_fsynced) {
        replicationSendAck();
        acked_fsynced = server.fsynced_reploff;
    }
    noticePromotion();
    if (held_clients == NULL || listLength(held_clients) == 0) return;

    size_t n = 0;
    listIter li;
    listNode *ln;
    listRewind(held_clients, &li);
    while ((ln = listNext(&li))) {
        client *c = listNodeValue(ln);
        int hold = mustHold(c);
        if (hold && !holdTimedOut(c)) continue;
        listDelNode(held_clients, ln);
        c->aof_uring_held_node = NULL;
        if (hold) {
            freeClientAsync(c); /* Held too long: closed without its output. */
            continue;
        }
        if (clientHasPendingReplies(c)) putClientInPendingWriteQueue(c);
        if (c->aof_uring_wrote) n++;
        c->aof_uring_wrote = 0;
    }
    /* Their next writes should join one batch: see "Coalescing". A quarter
     * of the last fsync time bounds the wait. */
    if (n && server.aof_uring_ack == AOF_URING_ACK_DURABLE && aofUringActive()) {
        long long wait_us = last_fsync_us / 4;
        if (wait_us > AOF_URING_COALESCE_MAX_US) wait_us = AOF_URING_COALESCE_MAX_US;
        coalesce_wait = n;
        coalesce_deadline = getMonotonicUs() + wait_us;
    }
}

sds aofUringInfo(sds info) {
    int inflight = 0;
    long long inflight_bytes = 0;
    size_t direct_align = 0;
    int active = aofUringActive(), sqpoll = 0, defer = 0;
#ifdef HAVE_LIBURING
    direct_align = U.direct_align; /* The last file's, 0 before any */
    inflight = U.inflight;
    inflight_bytes = U.inflight_bytes;
    sqpoll = active && U.sqpoll;
    defer = active && U.defer_taskrun;
#endif
    long long durable = server.fsynced_reploff;
    info = sdscatprintf(info,
                        "aof_engine:%s\r\n"
                        "aof_uring_active:%d\r\n"
                        "aof_uring_fallback_reason:%s\r\n"
                        "aof_uring_ack:%s\r\n"
                        "aof_uring_queue_depth:%d\r\n"
                        "aof_uring_sqpoll:%d\r\n"
                        "aof_uring_defer_taskrun:%d\r\n"
                        "aof_uring_submitted_batches:%lld\r\n"
                        "aof_uring_completed_batches:%lld\r\n"
                        "aof_uring_inflight_batches:%d\r\n"
                        "aof_uring_inflight_bytes:%lld\r\n"
                        "aof_uring_pending_bytes:%zu\r\n"
                        "aof_uring_submitted_bytes:%lld\r\n"
                        "aof_uring_written_bytes:%lld\r\n"
                        "aof_uring_backpressure_events:%lld\r\n"
                        "aof_uring_short_writes:%lld\r\n"
                        "aof_uring_write_errors:%lld\r\n"
                        "aof_uring_held_clients:%lu\r\n"
                        "aof_uring_held_events:%lld\r\n"
                        "aof_uring_held_output_bytes:%zu\r\n"
                        "aof_uring_gated_reads:%lld\r\n"
                        "aof_uring_gated_pushes:%lld\r\n"
                        "aof_uring_hold_timeouts:%lld\r\n"
                        "aof_uring_coalesce_waits:%lld\r\n"
                        "aof_uring_wakeups:%lld\r\n"
                        "aof_uring_fed_bytes:%lld\r\n"
                        "aof_uring_durable_bytes:%lld\r\n"
                        "aof_uring_durable_offset:%lld\r\n"
                        "aof_uring_durable_lag_bytes:%lld\r\n",
                        server.aof_engine == AOF_ENGINE_URING ? "uring" : "posix", active, fallback_reason,
                        server.aof_uring_ack == AOF_URING_ACK_DURABLE ? "durable" : "fast",
                        server.aof_uring_queue_depth, sqpoll, defer, stats.submitted_batches,
                        stats.completed_batches, inflight, inflight_bytes,
                        server.aof_buf ? sdslen(server.aof_buf) : 0, stats.submitted_bytes, stats.written_bytes,
                        stats.backpressure_events, stats.short_writes, stats.write_errors,
                        held_clients ? listLength(held_clients) : 0UL, stats.held_events, aofUringHeldOutputMemory(), stats.gated_reads, stats.gated_pushes,
                        stats.hold_timeouts, stats.coalesce_waits, stats.wakeups, aof_fed, durable_fed, durable,
                        durable >= 0 ? server.primary_repl_offset - durable : 0);
    info = aofFsyncHistogramInfo(&fsyncs, info, "aof_uring_fsync");
    info = sdscatprintf(info,
                        "aof_uring_ack_replicas:%d\r\n"
                        "aof_uring_replica_durable_offset:%lld\r\n"
                        "aof_uring_replica_durable_bytes:%lld\r\n"
                        "aof_uring_replica_checkpoints:%zu\r\n"
                        "aof_uring_noreplicas_refusals:%lld\r\n",
                        server.aof_uring_ack_replicas, replica_reploff, replica_fed, ckpt_len, noreplicas_refusals);
    info = sdscatprintf(info,
                        "aof_uring_direct_writes:%lld\r\n"
                        "aof_uring_direct_padding_bytes:%lld\r\n"
                        "aof_uring_direct_declined:%lld\r\n"
                        "aof_uring_direct_declined_reason:%s\r\n"
                        "aof_uring_direct_align:%zu\r\n",
                        stats.direct_writes, stats.direct_padding_bytes, stats.direct_declined,
                        direct_declined_reason, direct_align);
    return info;
}
