/* aof_prealloc.c - a log laid out for cheap fsyncs (aof-preallocate).
 *
 * DESIGN
 * ------
 *
 * Purpose. Every append to a file changes its size, so on ext4 every
 * fdatasync() of an appended AOF waits for a jbd2 journal commit, and ext4
 * runs one commit at a time: that, not the device, is what caps
 * 'appendfsync always' and the io_uring engine alike. An fdatasync of blocks
 * that are already allocated, written and inside the file's size changes no
 * metadata that fdatasync must persist: it writes the data and flushes the
 * device cache, and ext4_fsync() returns without a commit. PostgreSQL
 * (wal_init_zero), RocksDB (recycle_log_file_num) and InnoDB lay out their
 * logs this way. So the INCR file the server appends to is kept zero-written
 * and fdatasync'ed ahead of its tail, and the log's writes overwrite those
 * zeros at explicit offsets (pwrite at server.aof_last_incr_size). Both
 * engines, every appendfsync policy, go through the same write and get it.
 * fallocate() alone would not do: it leaves unwritten extents, and their
 * conversion on first write is a metadata change again.
 *
 * The region. bytes [0, region_end) of the attached INCR file are written
 * (log data below the tail, zeros above it). When a complete write leaves
 * less than half of aof-preallocate-size ahead of the tail, the worker is
 * asked to extend region_end to tail + aof-preallocate-size. It writes
 * zeros in chunks (256 KiB doubling to 4 MiB, so that a fresh file has a
 * first chunk quickly) from a zero buffer, fdatasyncs each chunk (the size
 * change commits the journal there, off the write path) and only then
 * publishes the new region_end under the lock. Whole blocks of zeros go
 * through a second descriptor of the file opened O_DIRECT: written through
 * the page cache they would sit there dirty, and the log's own fdatasync,
 * which writes back every dirty page of the file, would write them out on
 * the write path (buffered zeros with a 64 MiB region made 'always' slower
 * than without preallocation in short runs: docs/measurements.md). Where
 * O_DIRECT is refused the zeros go through the page cache.
 *
 * Cached zeros. The log's appends are buffered writes of less than a page
 * (the io_uring engine's direct writes aside): a write into a page the page
 * cache does not hold makes ext4 read the block first, on the event loop.
 * Zeros written with O_DIRECT are not cached, and every 4 KiB of log would
 * cost a synchronous read, slowest on the volumes whose flushes are slow
 * (docs/measurements.md). So once a chunk is durable the worker has it read
 * back (POSIX_FADV_WILLNEED): the pages are then cached and clean, and the
 * log's writes into them read nothing. 'everysec''s fsync job keeps the
 * cache of the file the preallocator holds (patch 0029), where upstream drops
 * it after every fsync: also when the tail has caught up with the zeros, or a
 * job queued then would drop the next chunk, read back just after.
 *
 * Threading. One worker thread, started on first use, is the only one that
 * writes zeros. The main thread writes the log and never writes at or past
 * region_end while the worker is extending: if a write would (the tail caught
 * up with the zeros being written, or a fresh file's first chunk is not done)
 * it waits for the chunk in progress: a stall, counted, with the latency
 * event aof-prealloc-stall. When the worker is idle a write past region_end
 * is an ordinary append (counted in aof_prealloc_appends) and moves
 * region_end with it. The two never write the same bytes, and the worker
 * never writes below the log's tail.
 *
 * Clean files. The zeros are never part of the log. Wherever the file is
 * closed, fsync'ed for the last time or read back (rotation by BGREWRITEAOF
 * before the manifest names the new INCR file, appendonly no, shutdown,
 * DEBUG LOADAOF) the worker is stopped and the file truncated to the log's
 * length and fdatasync'ed: upstream's loader and valkey-check-aof read it as
 * they always did, and an INCR file that is not the last one never ends in
 * zeros (the loader refuses a truncated file that is not the last). A
 * rotation whose trim fails fails the rewrite, as a failed open does.
 *
 * Crashes. After a crash or a power cut the last INCR file ends in the
 * zeros ahead of the tail (and possibly a torn last write). Bytes never
 * written read as zeros, so the loader sees a malformed tail; with
 * aof-load-truncated yes (the default) the zero-tail rule of patch 0008
 * truncates it as a short read. That is why preallocation is in effect only
 * while aof-load-truncated is yes: with it off a crash would leave a file the
 * server refuses to load. Nothing acknowledged is in the zeros: a write is
 * acknowledged (always, uring durable) only after the fdatasync that covers
 * it.
 *
 * Failure. An extension that fails (ENOSPC, EIO) is logged, counted
 * (aof_prealloc_errors, aof_prealloc_last_error) and retried no sooner than
 * a second later; meanwhile writes append as they would without
 * preallocation, and their own errors take upstream's paths. A short write
 * that upstream truncates away makes the region unknown: it is forgotten and
 * measured again (fstat) at the next write. The region costs up to
 * aof-preallocate-size of disk per instance, reserved ahead: a full disk is
 * noticed by the worker before the log runs out of room.
 *
 * Configuration. aof-preallocate yes|no (default yes) and
 * aof-preallocate-size (default 8mb: zero-writing is device bandwidth taken
 * from the log, and a fresh INCR file after every rewrite starts empty, so
 * the region is kept a few seconds of writes ahead, not more) can be changed
 * at runtime; turning it off stops extending and leaves the zeros already
 * written, which the next trim removes.
 *
 * INFO (section persistence):
 *   aof_prealloc_active          1 if the current INCR file is preallocated
 *   aof_prealloc_bytes_ahead     zeroed bytes ahead of the log's tail
 *   aof_prealloc_extensions      extensions started
 *   aof_prealloc_extended_bytes  zero bytes written and fdatasync'ed
 *   aof_prealloc_appends         writes that went past the region (appends)
 *   aof_prealloc_stalls          writes that waited for an extension
 *   aof_prealloc_stall_usec      time spent in those waits
 *   aof_prealloc_trims           files cut back to the log's length
 *   aof_prealloc_errors          failed extensions
 *   aof_prealloc_last_error      none | enospc | edquot | eio | erofs | efbig | other
 * Measurements: docs/measurements.md.
 */

#include "server.h"
#include "latency.h"
#include "aof_prealloc.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#define PREALLOC_FIRST_CHUNK (256 * 1024)
#define PREALLOC_MAX_CHUNK (4 * 1024 * 1024)
#define PREALLOC_RETRY_MS 1000

#define PREALLOC_ALIGN 4096

/* Aligned for O_DIRECT. */
static const char zeros[1024 * 1024] __attribute__((aligned(PREALLOC_ALIGN)));

/* Shared with the worker, under lock. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;     /* main -> worker: busy was set */
    pthread_cond_t progress; /* worker -> main: a chunk was published or the job ended */
    int fd;                  /* attached INCR file, -1 none */
    int dfd;                 /* the same file opened O_DIRECT for the zeros, -1 if that failed */
    off_t region_end;        /* [0, region_end) is written: log below the tail, zeros above */
    off_t target;            /* the worker extends region_end up to here */
    int busy;                /* the worker is extending fd */
    int cancel;              /* stop after the current chunk */
    long long extended_bytes, errors;
    int last_errno;
} P = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, -1, -1, 0, 0, 0, 0, 0, 0, 0};

/* Main thread only. */
static int started = 0;
static off_t tail = 0; /* The log's length in the attached file, as last written. */
static int zeroed_fd = -1; /* The file this process wrote zeros into, until trimmed. */
static long long extensions = 0, appends = 0, stalls = 0, stall_usec = 0, trims = 0;
static long long errors_logged = 0;
static mstime_t last_error_ms = 0;
static int disabled_logged = 0;

/* INFO-friendly name of an extension's error. */
static const char *errnoName(int err) {
    switch (err) {
    case 0: return "none";
    case ENOSPC: return "enospc";
    case EDQUOT: return "edquot";
    case EIO: return "eio";
    case EROFS: return "erofs";
    case EFBIG: return "efbig";
    default: return "other";
    }
}

/* Write zeros at [from, to) of fd and make them durable: 0 or an errno.
 * Whole aligned blocks go through *dfd (O_DIRECT) while it is not -1, the
 * rest through the page cache; a filesystem that refuses the direct write
 * (EINVAL) gets everything through the page cache from then on. Then the
 * zeros are read into the page cache, clean (see "Cached zeros"). */
static int zeroFill(int fd, int *dfd, off_t from, off_t to) {
    off_t start = from;
    while (from < to) {
        int direct = *dfd != -1 && from % PREALLOC_ALIGN == 0 && to - from >= PREALLOC_ALIGN;
        off_t end = to;
        if (direct)
            end = to - (to - from) % PREALLOC_ALIGN;
        else if (*dfd != -1 && from - from % PREALLOC_ALIGN + PREALLOC_ALIGN < to)
            end = from - from % PREALLOC_ALIGN + PREALLOC_ALIGN;
        size_t n = end - from > (off_t)sizeof(zeros) ? sizeof(zeros) : (size_t)(end - from);
        ssize_t w = pwrite(direct ? *dfd : fd, zeros, n, from);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (direct && errno == EINVAL) {
                close(*dfd);
                *dfd = -1;
                continue;
            }
            return errno;
        }
        from += w;
    }
    if (valkey_fsync(fd) == -1) return errno;
    /* Best effort (a page not cached is read when the log reaches it);
     * readahead(2) would want the write-only fd to be readable. */
    int ra = posix_fadvise(fd, start, to - start, POSIX_FADV_WILLNEED);
    if (ra) serverLog(LL_VERBOSE, "AOF preallocation: can't read the zeros ahead: %s", strerror(ra));
    return 0;
}

/* The attached file opened again with O_DIRECT, so that the zeros never sit
 * dirty in the page cache: the log's own fdatasync would write them out. -1
 * where the filesystem or /proc does not allow it (the zeros then go through
 * the page cache). */
static int openDirect(int fd) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    return open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
}

static void *preallocWorker(void *arg) {
    UNUSED(arg);
    sigset_t sigset;
    off_t chunk = 0;

    valkey_set_thread_title("aof_prealloc");
    serverSetCpuAffinity(server.bio_cpulist);
    /* Only the main thread gets the watchdog's SIGALRM. */
    sigemptyset(&sigset);
    sigaddset(&sigset, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &sigset, NULL);

    pthread_mutex_lock(&P.lock);
    while (1) {
        if (!P.busy) {
            chunk = 0;
            pthread_cond_wait(&P.work, &P.lock);
            continue;
        }
        if (P.cancel || P.region_end >= P.target) {
            P.busy = 0;
            pthread_cond_broadcast(&P.progress);
            continue;
        }
        chunk = chunk ? chunk * 2 : PREALLOC_FIRST_CHUNK;
        if (chunk > PREALLOC_MAX_CHUNK) chunk = PREALLOC_MAX_CHUNK;
        int fd = P.fd, dfd = P.dfd;
        off_t from = P.region_end, to = from + chunk < P.target ? from + chunk : P.target;
        /* End chunks on a block boundary, so the next ones are all O_DIRECT. */
        if (to < P.target && to - to % PREALLOC_ALIGN > from) to -= to % PREALLOC_ALIGN;
        pthread_mutex_unlock(&P.lock);
        int err = zeroFill(fd, &dfd, from, to);
        pthread_mutex_lock(&P.lock);
        P.dfd = dfd;
        if (err) {
            P.errors++;
            P.last_errno = err;
            P.busy = 0;
        } else {
            P.region_end = to;
            P.extended_bytes += to - from;
        }
        pthread_cond_broadcast(&P.progress);
    }
    return NULL;
}

static void startWorker(void) {
    pthread_t thread;

    if (started) return;
    if (pthread_create(&thread, NULL, preallocWorker, NULL) != 0) {
        serverLog(LL_WARNING, "Fatal: can't start the AOF preallocation thread: %s", strerror(errno));
        exit(1);
    }
    started = 1;
}

/* Preallocation needs aof-load-truncated: a crash leaves the zeros after the
 * log, which only a loader that truncates a zero tail accepts. */
static int preallocEnabled(void) {
    int enabled = server.aof_preallocate && server.aof_load_truncated;
    if (server.aof_preallocate && !server.aof_load_truncated && !disabled_logged) {
        serverLog(LL_WARNING, "aof-preallocate is not in effect while aof-load-truncated is no: "
                              "after a crash the zeros ahead of the log would make the AOF unloadable.");
    }
    disabled_logged = server.aof_preallocate && !server.aof_load_truncated;
    return enabled;
}

void aofPreallocForget(int fd) {
    if (!started) return;
    pthread_mutex_lock(&P.lock);
    if (P.fd == fd) {
        P.cancel = 1;
        while (P.busy) pthread_cond_wait(&P.progress, &P.lock);
        P.cancel = 0;
        P.fd = -1;
        if (P.dfd != -1) close(P.dfd);
        P.dfd = -1;
        P.region_end = 0;
    }
    pthread_mutex_unlock(&P.lock);
}

void aofPreallocBeforeWrite(int fd, off_t offset, size_t len) {
    off_t end = offset + (off_t)len;
    int stalled = 0;
    long long waited_us = 0;
    mstime_t latency = 0;

    if (!preallocEnabled()) {
        if (started && P.fd != -1) aofPreallocForget(P.fd);
        return;
    }
    startWorker();
    if (P.fd != fd) {
        struct stat st;
        if (P.fd != -1) aofPreallocForget(P.fd);
        int dfd = openDirect(fd);
        pthread_mutex_lock(&P.lock);
        P.fd = fd;
        P.dfd = dfd;
        P.region_end = fstat(fd, &st) == 0 ? st.st_size : 0;
        tail = offset;
    } else {
        pthread_mutex_lock(&P.lock);
    }
    if (end > P.region_end && P.busy) {
        stalled = 1;
        waited_us = ustime();
        latencyStartMonitor(latency);
        while (end > P.region_end && P.busy) pthread_cond_wait(&P.progress, &P.lock);
        latencyEndMonitor(latency);
        waited_us = ustime() - waited_us;
    }
    if (end > P.region_end) appends++;
    pthread_mutex_unlock(&P.lock);
    if (stalled) {
        stalls++;
        stall_usec += waited_us;
        latencyAddSampleIfNeeded("aof-prealloc-stall", latency);
    }
}

void aofPreallocWritten(int fd, off_t end) {
    long long errors;
    int last_errno;

    if (!started) return;
    pthread_mutex_lock(&P.lock);
    if (P.fd != fd) {
        pthread_mutex_unlock(&P.lock);
        return;
    }
    tail = end;
    /* aofPreallocBeforeWrite() waited unless the write fit below region_end
     * or the worker was idle, and only this thread starts it. */
    if (end > P.region_end) P.region_end = end;
    errors = P.errors;
    last_errno = P.last_errno;
    if (errors != errors_logged) last_error_ms = server.mstime;
    if (!P.busy && P.region_end - end < server.aof_preallocate_size / 2 &&
        server.mstime - last_error_ms >= PREALLOC_RETRY_MS) {
        P.target = end + server.aof_preallocate_size;
        P.busy = 1;
        zeroed_fd = fd;
        pthread_cond_signal(&P.work);
        extensions++;
    }
    pthread_mutex_unlock(&P.lock);
    if (errors != errors_logged) {
        serverLog(LL_WARNING, "Preallocating the AOF failed: %s. Writes append until it succeeds.", strerror(last_errno));
        errors_logged = errors;
    }
}

int aofPreallocCovers(int fd, off_t end) {
    int covers;

    if (!started || fd == -1 || !preallocEnabled()) return 0;
    pthread_mutex_lock(&P.lock);
    covers = P.fd == fd && end <= P.region_end;
    pthread_mutex_unlock(&P.lock);
    return covers;
}

int aofPreallocHolds(int fd) {
    int holds;

    if (!started || fd == -1 || !preallocEnabled()) return 0;
    pthread_mutex_lock(&P.lock);
    holds = P.fd == fd;
    pthread_mutex_unlock(&P.lock);
    return holds;
}

int aofPreallocTrim(int fd, off_t size) {
    struct stat st;

    aofPreallocForget(fd);
    /* Only zeros this process wrote are cut: whatever else lies past the
     * log's length (a file rewritten under a running server by a test) is
     * left as upstream leaves it. */
    if (fd == -1 || fd != zeroed_fd) return C_OK;
    if (fstat(fd, &st) == -1) return C_ERR;
    if (st.st_size > size) {
        if (ftruncate(fd, size) == -1 || valkey_fsync(fd) == -1) return C_ERR;
        trims++;
    }
    zeroed_fd = -1;
    return C_OK;
}

sds aofPreallocInfo(sds info) {
    long long extended_bytes, errors, ahead = 0;
    int last_errno, active;

    pthread_mutex_lock(&P.lock);
    active = P.fd != -1 && P.fd == server.aof_fd;
    if (active && P.region_end > tail) ahead = P.region_end - tail;
    extended_bytes = P.extended_bytes;
    errors = P.errors;
    last_errno = P.last_errno;
    pthread_mutex_unlock(&P.lock);
    return sdscatprintf(info,
                        "aof_prealloc_active:%d\r\n"
                        "aof_prealloc_bytes_ahead:%lld\r\n"
                        "aof_prealloc_extensions:%lld\r\n"
                        "aof_prealloc_extended_bytes:%lld\r\n"
                        "aof_prealloc_appends:%lld\r\n"
                        "aof_prealloc_stalls:%lld\r\n"
                        "aof_prealloc_stall_usec:%lld\r\n"
                        "aof_prealloc_trims:%lld\r\n"
                        "aof_prealloc_errors:%lld\r\n"
                        "aof_prealloc_last_error:%s\r\n",
                        active, ahead, extensions, extended_bytes, appends, stalls, stall_usec, trims, errors,
                        errnoName(last_errno));
}
