/* aof_uring.c - the io_uring AOF engine (appendfsync-engine uring).
 *
 * DESIGN
 * ------
 *
 * Purpose. Upstream 'appendfsync always' runs write()+fdatasync() inline in
 * beforeSleep(): the event loop sleeps in every fdatasync and every reply,
 * reads included, waits for it. 'everysec' hands the fsync to a bio thread and
 * acknowledges writes that a power cut can erase. This engine hands the AOF
 * buffer to an io_uring as a write at an explicit file offset linked
 * (IOSQE_IO_LINK) to an IORING_FSYNC_DATASYNC fsync, returns to the event loop
 * at once, and learns about completion through an eventfd registered with the
 * ring and watched by the ae loop. There is no completion thread.
 *
 * Batches (group commit). Everything appended to server.aof_buf between two
 * submissions forms one batch. The batch takes ownership of the sds (it is
 * swapped with a recycled spare buffer, so there is no copy and no per-write
 * malloc). At most ONE batch is in flight: while its write+fdatasync runs, new
 * commands accumulate in aof_buf and are submitted together as soon as it
 * completes (or after the coalescing wait below). With one batch the durable
 * offset is simply the end of the last completed batch, there are never holes
 * in the file, and a short write or an error concerns exactly one buffer.
 *
 * Why not several batches in flight (measured 2026-11-22, 2 vCPU VM, kernel
 * 6.18). The kernel does group concurrent fdatasyncs: N threads doing
 * write+fdatasync at increasing offsets of one file reach, on a loop ext4
 * (jbd2), 1203/1540/2811/5781 fsyncs/s for N = 1/2/4/8 at 0.83/1.30/1.42/
 * 1.39 ms each, and on the root disk (ext4 without journal) 3632/4671/11271/
 * 16329 at 0.28/0.43/0.36/0.49 ms. But every fsync still waits for the
 * commit running when it arrives, then for its own: commits serialize per
 * filesystem. With closed-loop clients that means a client whose write
 * arrives during a commit waits for two commits whatever the number of
 * batches in flight, so more batches only split the same clients into more,
 * smaller batches. A bounded FIFO of write+fsync batches (contiguous durable
 * prefix, per-batch short writes, requeue of everything after a failed batch)
 * was built and measured side by side against this engine with 50 clients,
 * 6 interleaved repetitions per volume: 2 or 4 batches in flight gave medians
 * within the run-to-run noise of one batch (loop 10.0k/12.1k vs 10.4k SET/s,
 * root 22.1k/18.1k vs 20.1k), 20-100% more fsyncs per op and 7-20% more CPU
 * per op (io-wq context switches). It was not kept.
 *
 * Coalescing (durable mode). What did help is the opposite: keeping the
 * clients together. When a batch becomes durable its clients are released
 * and send their next commands about one round trip later; submitting the
 * commands that arrived meanwhile at once splits the clients into two groups
 * that alternate, each batch carrying half of them and each client waiting
 * for two fsyncs per write. So after a release the next submission waits
 * until as many writes have executed as clients were released, or at most a
 * quarter of the last fsync time (AOF_URING_COALESCE_MAX_US at most; a
 * timeout on the ring wakes the event loop). A lone client is never delayed
 * (its write is the one awaited); the worst case costs a quarter of an fsync
 * per batch. Measured the same way (5 interleaved repetitions, 50 clients,
 * SET): loop ext4 7.4-8.4k SET/s with coalescing vs 6.6-7.2k without (posix
 * always 6.6-7.7k), 27 instead of 42 fsyncs per 1k writes; on the root disk
 * (L ~0.3 ms, CPU-bound) within the noise (medians 11.5k vs 13.4k, always
 * 11.4k). aof_uring_coalesce_waits counts the waits.
 *
 * Durable offset. Each batch records server.primary_repl_offset at submission
 * (every byte fed to aof_buf up to that offset is in the batch or before it).
 * When its fdatasync completes, that offset (or primary_repl_offset itself if
 * aof_buf is empty, exactly as upstream does when nothing is pending) is
 * stored in server.fsynced_reploff_pending, and beforeSleep publishes it as
 * server.fsynced_reploff. WAITAOF keeps working unchanged on top of it.
 *
 * Ack modes (aof-uring-ack).
 *  - durable (default). THE RULE: while the engine is active, AOF is ON and
 *    fsynced_reploff is valid, a normal client C (not a primary/replica link)
 *    with C->woff > server.fsynced_reploff
 *      1. gets no reply bytes written to its socket (handleClientsWithPendingWrites
 *         and the writable handler skip it; the handler is removed), and
 *      2. has no further input parsed or executed (pipelined commands wait in
 *         its query buffer, canParseCommand / processPendingCommandAndInputBuffer).
 *    C->woff is the offset upstream sets after a command that propagated (the
 *    writer's own write). Readers are gated through the same field: after every
 *    command, for each key it names, the reader's woff is raised to the offset
 *    of the last write to that key (kept in a fixed table of 65536 slots hashed
 *    by db+key; a collision only delays a reply, never releases one early).
 *    Write commands without key arguments (FLUSHALL, SWAPDB, ...) dirty every
 *    key; read commands without key arguments (KEYS, SCAN, DBSIZE, RANDOMKEY)
 *    wait for the last write. So nobody observes a write a power cut could
 *    erase, while clients touching clean keys are served immediately.
 *    Held clients are kept in a list and resumed in beforeSleep once
 *    fsynced_reploff >= woff. Not covered: keys deleted by active expiry or
 *    eviction (no command names them), and messages pushed to other clients
 *    (pub/sub, keyspace notifications, tracking invalidations, MONITOR).
 *  - fast: replies go out before the fsync (the AOFUring thesis' choice), but
 *    the write itself is upstream's write(2) in flushAppendOnlyFile (with all
 *    its error handling); only the fdatasync goes through the ring, as an
 *    fsync-only batch, group-committed the same way. Writing inline keeps
 *    upstream's "a reply means the bytes are in the page cache": a killed
 *    process loses nothing (a ring write still queued when the process dies
 *    would be cancelled), and the upstream tests that read the AOF right after
 *    a reply hold. The power-cut loss window is the bytes written but not yet
 *    covered by a completed fdatasync; when that exceeds
 *    aof-uring-max-inflight-bytes the flush waits for the fsync in flight
 *    (back-pressure, counted in aof_uring_backpressure_events). Below that
 *    bound the fsyncs are paced: the next one starts no sooner than
 *    AOF_URING_FAST_FSYNC_SPACING (4) times the last one's duration after the
 *    last one started (10 ms at most, so one slow fsync does not stretch the
 *    next gap), so the device spends at most a quarter of its time in our
 *    fdatasyncs and the loss window is about 5 L. Back-to-back fsyncs
 *    (one per ~30 writes at 50 clients) cost 1.25-1.5x everysec's CPU per
 *    write in io-wq and event-loop wake-ups (make bench-server, 2026-11-22).
 *
 * Threading. Everything runs on the main thread: submissions (one
 * io_uring_enter per loop pass; none with SQPOLL while the SQ thread is awake),
 * the eventfd handler that reaps CQEs, and the client gating. The ring is set
 * up with IORING_SETUP_SINGLE_ISSUER and, without SQPOLL,
 * IORING_SETUP_DEFER_TASKRUN (falling back to no flags on kernels that reject
 * them); with DEFER_TASKRUN the eventfd means "call io_uring_get_events()".
 * The kernel runs buffered writes and fsyncs in io-wq workers, bounded with
 * io_uring_register_iowq_max_workers (aof-uring-max-workers). The AOF fd is a
 * registered file (slot 0), updated whenever server.aof_fd changes.
 *
 * Ordering. One batch in flight, written at offset aof_last_incr_size (the
 * INCR file size), so bytes reach the file in aof_buf order. Ring writes do
 * not move the fd's file position, so before write(2) writes again (fast
 * mode, or the posix engine after a switch) the position is set to
 * aof_last_incr_size; a durable batch still in flight at a durable -> fast
 * switch is waited for first. Rotation
 * (BGREWRITEAOF opening a new INCR file), stopAppendOnly and shutdown call
 * flushAppendOnlyFile(1): the engine then submits aof_buf and waits until the
 * ring is idle and aof_buf is empty, so every byte belonging to the old file is
 * written and fdatasync'ed there before it is closed (by a plain bio close job:
 * a bio fsync job would later store a stale fsynced_reploff_pending).
 *
 * Failure.
 *  - Short write: the rest is resubmitted at the right offset, with a new
 *    linked fsync (the first one completes with -ECANCELED).
 *    aof_uring_short_writes counts them.
 *  - Write error: the upstream contract. aof_last_write_status = C_ERR and
 *    aof_last_write_errno are set (write commands are refused), the unwritten
 *    rest of the batch is put back in front of aof_buf and retried at most
 *    every 100 ms; when a write succeeds the status is cleared. In durable mode
 *    no reply has left, so unlike 'always' there is no need to exit. In fast
 *    mode the write is upstream's write(2) and its error path is upstream's
 *    everysec one (flushAppendOnlyFile does not take the 'always' exit while
 *    the engine is active): replies already left at write time, as with
 *    everysec, the bytes stay in aof_buf and writes are refused until a
 *    retry succeeds.
 *  - fsync error: fail-stop (log and exit(1)), as upstream 'always' does: the
 *    page cache state after a failed fsync is unknown.
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
 * sets up a new one. aof-uring-ack, aof-uring-max-workers and
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
 *   aof_uring_submitted_batches       batches handed to the ring
 *   aof_uring_completed_batches       batches durable (write + fdatasync done)
 *   aof_uring_inflight_batches        0 or 1
 *   aof_uring_inflight_bytes          bytes of the batch in flight
 *   aof_uring_pending_bytes           bytes waiting in aof_buf
 *   aof_uring_submitted_bytes         bytes handed to the ring
 *   aof_uring_written_bytes           bytes the kernel reported written
 *   aof_uring_backpressure_events     fast mode: flushes that had to wait
 *   aof_uring_short_writes            writes resubmitted after a short write
 *   aof_uring_write_errors            failed writes (retried)
 *   aof_uring_held_clients            clients currently held (durable mode)
 *   aof_uring_held_events             times a client was held
 *   aof_uring_gated_reads             commands whose reply waited for a dirty key
 *   aof_uring_coalesce_waits          submissions that waited for released clients
 *   aof_uring_durable_offset          fsynced replication offset
 *   aof_uring_durable_lag_bytes       primary_repl_offset - durable offset
 *   aof_uring_fsync_count             completed batches timed below
 *   aof_uring_fsync_usec_sum          sum of submit->fdatasync-done times, usec
 *   aof_uring_fsync_usec_p50/_p99/_max
 *   aof_uring_fsync_usec_bucket_le_<N> cumulative count of times <= N usec,
 *                                     N in 50,100,250,500,1000,2500,5000,10000,
 *                                     25000,50000,100000,250000,1000000, and _le_inf
 * Latency monitor events: aof-uring-fsync (submit to durable),
 * aof-uring-backpressure (time flush waited), aof-uring-drain (force flush).
 */

#include "server.h"
#include "hdr_histogram.h"
#include "latency.h"
#include "bio.h"

#include <sys/eventfd.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#define AOF_URING_DIRTY_SLOTS (1 << 16)   /* Power of two; 512 KiB of offsets. */
#define AOF_URING_KEEP_BUF (1024 * 1024)  /* Recycle batch buffers up to this size. */
#define AOF_URING_RETRY_MS 100            /* Write retry interval after an error. */
#define AOF_URING_COALESCE_MAX_US 2000    /* Longest coalescing wait. */
#define AOF_URING_FAST_FSYNC_SPACING 4    /* fast mode: fsync period >= 4x its duration, */
#define AOF_URING_FAST_FSYNC_MAX_GAP_US 10000 /* but never longer than 10 ms. */

static const long long fsync_buckets[] = {50, 100, 250, 500, 1000, 2500, 5000,
                                          10000, 25000, 50000, 100000, 250000, 1000000};
#define AOF_URING_BUCKETS (sizeof(fsync_buckets) / sizeof(fsync_buckets[0]))

/* Counters survive ring restarts; they are what INFO shows. */
static struct {
    long long submitted_batches, completed_batches, submitted_bytes, written_bytes;
    long long backpressure_events, short_writes, write_errors, held_events, gated_reads, coalesce_waits;
    long long fsync_usec_sum;
    long long bucket[AOF_URING_BUCKETS + 1];
    struct hdr_histogram *fsync_hist;
} stats;

static char fallback_reason[64] = "none";
static int setup_failed = 0; /* Don't retry setup until the engine is re-selected. */

/* Client gating (durable mode), used whether or not the ring is up so that
 * held clients are released when the engine goes away. */
static list *held_clients = NULL;
static long long *dirty_off = NULL;  /* Last write offset per key slot. */
static long long dirty_all = 0;      /* Last write that touched every key. */
static long long last_write_off = 0; /* Last write of any key. */
static uint32_t *pending_slots = NULL; /* Slots written in the current execution unit. */
static size_t pending_len = 0, pending_cap = 0;
static int pending_all = 0;
static uint64_t *release_ids = NULL;
static size_t release_cap = 0;

/* Coalescing (durable mode): clients released by the last durable batch whose
 * next write has not been executed yet, and until when the next submission
 * waits for them. */
static size_t coalesce_wait = 0;
static monotime coalesce_deadline = 0;
static long long last_fsync_us = 0;

#ifdef HAVE_LIBURING

enum { OP_WRITE = 1, OP_FSYNC = 2, OP_DELAY = 3, OP_COALESCE = 4 };

static struct {
    int active;
    struct io_uring ring;
    int efd;
    int defer_taskrun;
    int sqpoll;
    int fixed;        /* Slot 0 is a registered file table. */
    int fixed_fd;     /* fd currently in slot 0, -1 if none. */
    /* The batch in flight. */
    int inflight;
    sds buf;
    size_t written;
    off_t offset;
    int fd;
    long long reploff;
    monotime start;
    int pending_cqes;
    int write_res, fsync_res;
    long long fsync_bytes; /* fast mode: bytes the fsync-only batch covers. */
    int coalesce_timers;       /* Wake-up timeouts of coalescing waits queued. */
    monotime coalesce_armed;   /* Deadline the last one was queued for. */
    struct __kernel_timespec coalesce_ts;
    int ring_wrote;        /* Ring writes don't move the fd's file position. */
    sds spare;
    mstime_t last_error_ms;
    struct __kernel_timespec delay_ts;
} U = {.efd = -1, .fixed_fd = -1};

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
        p.flags |= IORING_SETUP_DEFER_TASKRUN;
    }
    ret = io_uring_queue_init_params(server.aof_uring_queue_depth, &U.ring, &p);
    if (ret == -EINVAL) {
        /* Kernels before 6.1 reject SINGLE_ISSUER/DEFER_TASKRUN. */
        p.flags &= ~(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
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
    U.coalesce_timers = 0;
    U.coalesce_armed = 0;
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
    /* The ring has >= 8 entries and a batch uses at most 3, so a full SQ means
     * a bug, not load. */
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
static int linkDebugDelay(struct io_uring_sqe *fsync_sqe) {
    struct io_uring_sqe *sqe;

    if (server.aof_uring_debug_fsync_delay_ms <= 0) return 0;
    fsync_sqe->flags |= IOSQE_IO_LINK;
    U.delay_ts.tv_sec = server.aof_uring_debug_fsync_delay_ms / 1000;
    U.delay_ts.tv_nsec = (long long)(server.aof_uring_debug_fsync_delay_ms % 1000) * 1000000;
    sqe = getSqe();
    io_uring_prep_timeout(sqe, &U.delay_ts, 0, 0);
    io_uring_sqe_set_data64(sqe, OP_DELAY);
    return 1;
}

/* Queue write(rest of batch) -> fdatasync [-> debug delay], all linked. */
static void submitRound(void) {
    struct io_uring_sqe *sqe;
    int fd = U.fixed ? 0 : U.fd;
    unsigned char fixed = U.fixed ? IOSQE_FIXED_FILE : 0;
    size_t len = sdslen(U.buf) - U.written;

    U.ring_wrote = 1;
    sqe = getSqe();
    io_uring_prep_write(sqe, fd, U.buf + U.written, len, U.offset + U.written);
    sqe->flags |= IOSQE_IO_LINK | fixed;
    io_uring_sqe_set_data64(sqe, OP_WRITE);
    sqe = getSqe();
    io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
    sqe->flags |= fixed;
    io_uring_sqe_set_data64(sqe, OP_FSYNC);
    U.pending_cqes = 2 + linkDebugDelay(sqe);
    U.write_res = U.fsync_res = 0;
    submitRing();
}

/* fast mode: fdatasync [-> debug delay] for bytes already written. */
static void submitFsync(void) {
    struct io_uring_sqe *sqe;
    int fd;

    setFixedFile(server.aof_fd);
    fd = U.fixed ? 0 : server.aof_fd;
    U.buf = NULL;
    U.fsync_bytes = server.aof_last_incr_size - server.aof_last_incr_fsync_offset;
    U.reploff = server.primary_repl_offset;
    U.start = getMonotonicUs();
    server.aof_last_incr_fsync_offset = server.aof_last_incr_size;
    sqe = getSqe();
    io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
    if (U.fixed) sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, OP_FSYNC);
    U.pending_cqes = 1 + linkDebugDelay(sqe);
    U.write_res = U.fsync_res = 0;
    U.inflight = 1;
    stats.submitted_batches++;
    submitRing();
}

static void recycleBuffer(sds buf) {
    if (U.spare == NULL && sdsalloc(buf) <= AOF_URING_KEEP_BUF) {
        sdsclear(buf);
        U.spare = buf;
    } else {
        sdsfree(buf);
    }
}

static void recordFsync(monotime start) {
    long long us = (long long)(getMonotonicUs() - start);
    size_t i;
    if (stats.fsync_hist == NULL && hdr_init(1, 100LL * 1000 * 1000, 2, &stats.fsync_hist) != 0)
        serverPanic("io_uring AOF engine: can't allocate the fsync latency histogram");
    hdr_record_value(stats.fsync_hist, us);
    last_fsync_us = us;
    stats.fsync_usec_sum += us;
    for (i = 0; i < AOF_URING_BUCKETS && us > fsync_buckets[i]; i++);
    stats.bucket[i]++;
    latencyAddSampleIfNeeded("aof-uring-fsync", us / 1000);
}

static void writeFailed(int err) {
    static time_t last_log = 0;
    size_t rest = sdslen(U.buf) - U.written;

    stats.write_errors++;
    if (server.unixtime - last_log > 30) {
        serverLog(LL_WARNING, "Error writing to the AOF file: %s", strerror(err));
        last_log = server.unixtime;
    }
    server.aof_last_write_errno = err;
    server.aof_last_write_status = C_ERR;
    U.last_error_ms = server.mstime;
    /* Put the unwritten rest back in front of aof_buf: it is retried in order
     * by the next flush. This copy happens on the error path only. */
    sds merged = sdsnewlen(U.buf + U.written, rest);
    merged = sdscatsds(merged, server.aof_buf);
    sdsfree(server.aof_buf);
    server.aof_buf = merged;
    recycleBuffer(U.buf);
    U.buf = NULL;
    U.inflight = 0;
}

/* fast mode: the fsync-only batch completed. */
static void fsyncDone(void) {
    if (U.fsync_res < 0) failStop("fdatasync of the AOF failed", -U.fsync_res);
    recordFsync(U.start);
    stats.completed_batches++;
    server.aof_last_fsync = server.mstime;
    long long durable = (server.aof_last_incr_fsync_offset == server.aof_last_incr_size && sdslen(server.aof_buf) == 0)
                            ? server.primary_repl_offset
                            : U.reploff;
    atomic_store_explicit(&server.fsynced_reploff_pending, durable, memory_order_relaxed);
    U.fsync_bytes = 0;
    U.inflight = 0;
}

/* All CQEs of the current round are in. */
static void roundDone(void) {
    if (U.buf == NULL) {
        fsyncDone();
        return;
    }
    size_t want = sdslen(U.buf) - U.written;
    int wres = U.write_res;

    if (wres == -EINTR || wres == -EAGAIN) {
        submitRound();
        return;
    }
    if (wres < 0) {
        writeFailed(-wres);
        return;
    }
    if (wres == 0) {
        /* No progress on a regular file: treat like upstream's short write. */
        writeFailed(ENOSPC);
        return;
    }
    U.written += wres;
    stats.written_bytes += wres;
    server.aof_current_size += wres;
    server.aof_last_incr_size += wres;
    if ((size_t)wres < want) {
        /* The linked fsync came back -ECANCELED: write the rest, fsync again. */
        stats.short_writes++;
        submitRound();
        return;
    }
    if (U.fsync_res < 0) failStop("fdatasync of the AOF failed", -U.fsync_res);

    recordFsync(U.start);
    stats.completed_batches++;
    server.aof_last_incr_fsync_offset = server.aof_last_incr_size;
    server.aof_last_fsync = server.mstime;
    if (server.aof_last_write_status == C_ERR) {
        serverLog(LL_NOTICE, "AOF write error looks solved. The server can write again.");
        server.aof_last_write_status = C_OK;
    }
    long long durable = sdslen(server.aof_buf) == 0 ? server.primary_repl_offset : U.reploff;
    atomic_store_explicit(&server.fsynced_reploff_pending, durable, memory_order_relaxed);
    recycleBuffer(U.buf);
    U.buf = NULL;
    U.inflight = 0;
}

static void handleCqe(struct io_uring_cqe *cqe) {
    switch (io_uring_cqe_get_data64(cqe)) {
    case OP_WRITE: U.write_res = cqe->res; break;
    case OP_FSYNC: U.fsync_res = cqe->res; break;
    case OP_DELAY: break; /* -ETIME when it fired, -ECANCELED after a short write. */
    case OP_COALESCE: U.coalesce_timers--; return; /* The wake-up alone is the point. */
    default: serverPanic("io_uring AOF engine: unknown completion");
    }
    if (--U.pending_cqes == 0) roundDone();
}

/* Handle the CQEs already posted. With enter (eventfd handler) and
 * DEFER_TASKRUN, first let the kernel post them: completions are only run
 * when the issuer enters the kernel. Elsewhere a peek costs no syscall. */
static void reapCompletions(int enter) {
    struct io_uring_cqe *cqe;
    if (enter && U.defer_taskrun) {
        int ret = io_uring_get_events(&U.ring);
        if (ret < 0 && ret != -EINTR && ret != -EAGAIN) failStop("io_uring_get_events", -ret);
    }
    while ((U.inflight || U.coalesce_timers) && io_uring_peek_cqe(&U.ring, &cqe) == 0) {
        handleCqe(cqe);
        io_uring_cqe_seen(&U.ring, cqe);
    }
}

/* Block until the batch in flight is durable or failed. */
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

static void submitBatch(void) {
    if (server.aof_flush_sleep) usleep(server.aof_flush_sleep);
    /* Take ownership of aof_buf: swap in the recycled buffer, no copy. */
    U.buf = server.aof_buf;
    server.aof_buf = U.spare ? U.spare : sdsempty();
    U.spare = NULL;
    U.written = 0;
    U.fd = server.aof_fd;
    U.offset = server.aof_last_incr_size;
    U.reploff = server.primary_repl_offset;
    U.start = getMonotonicUs();
    setFixedFile(U.fd);
    U.inflight = 1;
    stats.submitted_batches++;
    stats.submitted_bytes += sdslen(U.buf);
    submitRound();
}

/* Durable mode: should the submission of aof_buf wait for the clients the
 * last batch released? See "Coalescing" in the DESIGN comment. Queues a
 * timeout on the ring so the event loop wakes up at the deadline. */
static int coalesceWait(void) {
    if (coalesce_wait == 0) return 0;
    monotime now = getMonotonicUs();
    if (now >= coalesce_deadline) {
        coalesce_wait = 0;
        return 0;
    }
    if (U.coalesce_armed != coalesce_deadline) {
        long long us = (long long)(coalesce_deadline - now);
        struct io_uring_sqe *sqe = getSqe();
        U.coalesce_ts.tv_sec = us / 1000000;
        U.coalesce_ts.tv_nsec = (us % 1000000) * 1000;
        io_uring_prep_timeout(sqe, &U.coalesce_ts, 0, 0);
        io_uring_sqe_set_data64(sqe, OP_COALESCE);
        U.coalesce_timers++;
        U.coalesce_armed = coalesce_deadline;
        stats.coalesce_waits++;
        submitRing();
    }
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

void aofUringFlush(int force) {
    if (force) {
        mstime_t latency;
        latencyStartMonitor(latency);
        /* Everything in aof_buf must be durable in the current file. */
        while (U.inflight || (sdslen(server.aof_buf) && server.aof_fd != -1)) {
            if (!U.inflight) {
                submitBatch();
            }
            waitInflight();
            if (server.aof_last_write_status == C_ERR) break;
        }
        latencyEndMonitor(latency);
        latencyAddSampleIfNeeded("aof-uring-drain", latency);
        /* Drop the registered reference so the old file really closes. */
        setFixedFile(-1);
        return;
    }
    /* Group commit: aof_buf goes when the batch in flight is durable. */
    if (U.inflight) return;
    if (sdslen(server.aof_buf) == 0) {
        /* Nothing pending anywhere: all fed offsets are durable (upstream does
         * the same, see flushAppendOnlyFile). */
        if (!U.inflight && server.aof_last_write_status == C_OK)
            atomic_store_explicit(&server.fsynced_reploff_pending, server.primary_repl_offset, memory_order_relaxed);
        return;
    }
    if (server.aof_last_write_status == C_ERR && server.mstime - U.last_error_ms < AOF_URING_RETRY_MS) return;
    if (coalesceWait()) return;
    submitBatch();
}

/* Ring writes use explicit offsets and leave the fd's file position behind:
 * move it to the end of what was written before write(2) takes over. */
static void syncFilePosition(void) {
    if (!U.ring_wrote || server.aof_fd == -1) return;
    if (lseek(server.aof_fd, server.aof_last_incr_size, SEEK_SET) == -1)
        failStop("can't position the AOF for write(2)", errno);
    U.ring_wrote = 0;
}

void aofUringBeforeWrite(void) {
    /* A durable-mode batch from before a switch to fast must land first. */
    if (U.inflight && U.buf) waitInflight();
    syncFilePosition();
}

void aofUringFsync(int force) {
    if (U.inflight && U.buf) waitInflight();
    long long unsynced = server.aof_last_incr_size - server.aof_last_incr_fsync_offset;
    int waited = 0;
    if (U.inflight && !force) {
        /* Group commit, unless the loss window would exceed its bound. */
        if (unsynced + U.fsync_bytes <= server.aof_uring_max_inflight_bytes) return;
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
    if (!force && !waited && unsynced > 0 && unsynced < server.aof_uring_max_inflight_bytes &&
        server.aof_uring_debug_fsync_delay_ms == 0) {
        long long gap = AOF_URING_FAST_FSYNC_SPACING * last_fsync_us;
        if (gap > AOF_URING_FAST_FSYNC_MAX_GAP_US) gap = AOF_URING_FAST_FSYNC_MAX_GAP_US;
        if ((long long)(getMonotonicUs() - U.start) < gap) return;
    }
    if (unsynced > 0) {
        submitFsync();
        if (force) waitInflight();
    } else if (!U.inflight && sdslen(server.aof_buf) == 0 && server.aof_last_write_status == C_OK) {
        atomic_store_explicit(&server.fsynced_reploff_pending, server.primary_repl_offset, memory_order_relaxed);
    }
    if (force) setFixedFile(-1);
}

void aofUringStop(void) {
    if (!U.active) return;
    if (server.aof_fd != -1) aofUringFlush(1);
    /* An error may have left the batch unfinished; wait for the kernel to be
     * done with its buffer before freeing it. */
    waitInflight();
    syncFilePosition();
    aeDeleteFileEvent(server.el, U.efd, AE_READABLE);
    io_uring_queue_exit(&U.ring);
    close(U.efd);
    U.efd = -1;
    U.fixed_fd = -1;
    U.active = 0;
    if (U.spare) {
        sdsfree(U.spare);
        U.spare = NULL;
    }
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

void aofUringFlush(int force) {
    UNUSED(force);
}

void aofUringFsync(int force) {
    UNUSED(force);
}

void aofUringBeforeWrite(void) {
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
 * Durable-mode client gating
 * ------------------------------------------------------------------------ */

static int gatingEnabled(void) {
    return aofUringActive() && server.aof_uring_ack == AOF_URING_ACK_DURABLE && server.aof_state == AOF_ON &&
           server.fsynced_reploff != -1;
}

static int mustHold(client *c) {
    return c->woff > server.fsynced_reploff && gatingEnabled() && c->conn && !c->flag.primary &&
           !c->flag.replica && !c->flag.module;
}

int aofUringHoldClient(client *c) {
    if (!mustHold(c)) return 0;
    if (c->aof_uring_held_node == NULL) {
        if (held_clients == NULL) held_clients = listCreate();
        listAddNodeTail(held_clients, c);
        c->aof_uring_held_node = listLast(held_clients);
        stats.held_events++;
    }
    return 1;
}

void aofUringClientFreed(client *c) {
    if (c->aof_uring_held_node == NULL) return;
    listDelNode(held_clients, c->aof_uring_held_node);
    c->aof_uring_held_node = NULL;
}

void aofUringBeforeSleep(void) {
#ifdef HAVE_LIBURING
    if (U.inflight) reapCompletions(0);
#endif
    /* Publish the durable offset now (upstream does it after the flush) so
     * that the commands of released clients join the next batch. */
    if (server.aof_state == AOF_ON && server.fsynced_reploff != -1)
        server.fsynced_reploff = atomic_load_explicit(&server.fsynced_reploff_pending, memory_order_relaxed);
    if (held_clients == NULL || listLength(held_clients) == 0) return;

    /* Collect ids first: resuming one client may free another one. */
    size_t n = 0;
    listIter li;
    listNode *ln;
    listRewind(held_clients, &li);
    while ((ln = listNext(&li))) {
        client *c = listNodeValue(ln);
        if (mustHold(c)) continue;
        if (n == release_cap) {
            release_cap = release_cap ? release_cap * 2 : 64;
            release_ids = zrealloc(release_ids, release_cap * sizeof(*release_ids));
        }
        release_ids[n++] = c->id;
        listDelNode(held_clients, ln);
        c->aof_uring_held_node = NULL;
    }
    /* Their next writes should join one batch: see "Coalescing". A quarter
     * of the last fsync time bounds the wait. */
    if (n && server.aof_uring_ack == AOF_URING_ACK_DURABLE && aofUringActive()) {
        long long wait_us = last_fsync_us / 4;
        if (wait_us > AOF_URING_COALESCE_MAX_US) wait_us = AOF_URING_COALESCE_MAX_US;
        coalesce_wait = n;
        coalesce_deadline = getMonotonicUs() + wait_us;
    }
    for (size_t i = 0; i < n; i++) {
        client *c = lookupClientByID(release_ids[i]);
        if (c == NULL) continue;
        if (clientHasPendingReplies(c)) putClientInPendingWriteQueue(c);
        if (c->flag.blocked) continue;
        /* Run what the client pipelined while it was held (like
         * processUnblockedClients). */
        if (processPendingCommandAndInputBuffer(c) == C_ERR) continue;
        beforeNextClient(c);
    }
}

/* Key argument -> slot in the dirty table (db-qualified). */
static uint32_t keySlot(int dbid, robj *key) {
    char buf[LONG_STR_SIZE];
    const char *p;
    size_t len;
    if (sdsEncodedObject(key)) {
        p = key->ptr;
        len = sdslen(key->ptr);
    } else {
        len = ll2string(buf, sizeof(buf), (long)key->ptr);
        p = buf;
    }
    uint64_t h = dictGenHashFunction(p, len) ^ ((uint64_t)dbid * 0x9E3779B97F4A7C15ULL);
    return (uint32_t)(h & (AOF_URING_DIRTY_SLOTS - 1));
}

void aofUringAfterCommand(client *c, long long dirty) {
    if (!gatingEnabled()) {
        pending_len = 0;
        pending_all = 0;
        return;
    }
    if (dirty_off == NULL) dirty_off = zcalloc(sizeof(long long) * AOF_URING_DIRTY_SLOTS);

    getKeysResult result;
    initGetKeysResult(&result);
    int numkeys = getKeysFromCommand(c->cmd, c->argv, c->argc, &result);
    long long need = dirty_all;
    if (numkeys == 0 && (c->cmd->flags & CMD_READONLY) && need < last_write_off) need = last_write_off;
    for (int i = 0; i < numkeys; i++) {
        uint32_t slot = keySlot(c->db->id, c->argv[result.keys[i].pos]);
        if (dirty_off[slot] > need) need = dirty_off[slot];
        if (dirty > 0) {
            if (pending_len == pending_cap) {
                pending_cap = pending_cap ? pending_cap * 2 : 256;
                pending_slots = zrealloc(pending_slots, pending_cap * sizeof(*pending_slots));
            }
            pending_slots[pending_len++] = slot;
        }
    }
    if (dirty > 0 && numkeys == 0 && (c->cmd->flags & CMD_WRITE)) pending_all = 1;
    getKeysFreeResult(&result);

    /* primary_repl_offset can move backwards when this server starts
     * replicating from another primary; older entries must not hold readers
     * beyond what is being written now. */
    if (need > server.primary_repl_offset) need = server.primary_repl_offset;

    /* Scripts run commands through a fake client: gate the caller. */
    client *target = server.current_client ? server.current_client : c;
    if (need > server.fsynced_reploff && need > target->woff) {
        target->woff = need;
        stats.gated_reads++;
    }

    /* Nested commands (MULTI/EXEC, scripts) propagate when the outermost
     * execution unit ends; only then is the offset of their writes known. */
    if (server.execution_nesting == 0 && (pending_len || pending_all)) {
        long long off = server.primary_repl_offset;
        for (size_t i = 0; i < pending_len; i++) dirty_off[pending_slots[i]] = off;
        if (pending_all) dirty_all = off;
        last_write_off = off;
        if (coalesce_wait) coalesce_wait--;
        pending_len = 0;
        pending_all = 0;
    }
}

sds aofUringInfo(sds info) {
    long long p50 = 0, p99 = 0, max = 0, cum = 0;
    int inflight = 0;
    long long inflight_bytes = 0;
    int active = aofUringActive(), sqpoll = 0, defer = 0;
#ifdef HAVE_LIBURING
    inflight = U.inflight;
    if (U.inflight) inflight_bytes = U.buf ? (long long)(sdslen(U.buf) - U.written) : U.fsync_bytes;
    sqpoll = active && U.sqpoll;
    defer = active && U.defer_taskrun;
#endif
    if (stats.fsync_hist) {
        p50 = hdr_value_at_percentile(stats.fsync_hist, 50.0);
        p99 = hdr_value_at_percentile(stats.fsync_hist, 99.0);
        max = hdr_max(stats.fsync_hist);
    }
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
                        "aof_uring_gated_reads:%lld\r\n"
                        "aof_uring_coalesce_waits:%lld\r\n"
                        "aof_uring_durable_offset:%lld\r\n"
                        "aof_uring_durable_lag_bytes:%lld\r\n"
                        "aof_uring_fsync_count:%lld\r\n"
                        "aof_uring_fsync_usec_sum:%lld\r\n"
                        "aof_uring_fsync_usec_p50:%lld\r\n"
                        "aof_uring_fsync_usec_p99:%lld\r\n"
                        "aof_uring_fsync_usec_max:%lld\r\n",
                        server.aof_engine == AOF_ENGINE_URING ? "uring" : "posix", active, fallback_reason,
                        server.aof_uring_ack == AOF_URING_ACK_DURABLE ? "durable" : "fast",
                        server.aof_uring_queue_depth, sqpoll, defer, stats.submitted_batches,
                        stats.completed_batches, inflight, inflight_bytes,
                        server.aof_buf ? sdslen(server.aof_buf) : 0, stats.submitted_bytes, stats.written_bytes,
                        stats.backpressure_events, stats.short_writes, stats.write_errors,
                        held_clients ? listLength(held_clients) : 0UL, stats.held_events, stats.gated_reads, stats.coalesce_waits, durable,
                        durable >= 0 ? server.primary_repl_offset - durable : 0, stats.completed_batches,
                        stats.fsync_usec_sum, p50, p99, max);
    for (size_t i = 0; i < AOF_URING_BUCKETS; i++) {
        cum += stats.bucket[i];
        info = sdscatprintf(info, "aof_uring_fsync_usec_bucket_le_%lld:%lld\r\n", fsync_buckets[i], cum);
    }
    cum += stats.bucket[AOF_URING_BUCKETS];
    info = sdscatprintf(info, "aof_uring_fsync_usec_bucket_le_inf:%lld\r\n", cum);
    return info;
}
