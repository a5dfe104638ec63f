/* uring-redis-fsprobe: measure the volume under a directory before a server
 * trusts it with an append-only file.
 *
 *   uring-redis-fsprobe [-t MILLIS] DIR
 *
 * The operator runs it in the server pod's prepare container, on the data
 * volume, and reads what it prints from the container's termination message
 * (controllers/redispersistence_storage.go parses it). It prints key=value
 * lines, at most about 1 KiB in all (a termination message holds 4 KiB):
 *
 *   mountOptions=rw,relatime,nobarrier,data=writeback
 *   writeCache=write back
 *   fsyncSamples=812
 *   fsyncP50Micros=410
 *   fsyncP99Micros=1890
 *   fsyncMaxMicros=2301
 *   overwriteFsyncSamples=2710
 *   overwriteFsyncP50Micros=160
 *   overwriteFsyncP99Micros=540
 *   overwriteFsyncMaxMicros=1210
 *   overwriteParallelFsyncsPerSecond=8610
 *   probeMillis=2000
 *
 * Mount facts: the per-mount and the filesystem's options of the mount that
 * holds DIR, from /proc/self/mountinfo (ext4 lists nobarrier and a data=
 * journal mode other than ordered there), and the block device's write cache
 * ("write back" when it has a volatile cache that needs flushes, "write
 * through" when the kernel sends none) from sysfs, "unknown" where the device
 * has no queue or sysfs is not readable.
 *
 * Latency: the operation an `appendfsync always` AOF performs per event-loop
 * pass, a 4 KiB write followed by fdatasync, timed pair by pair, on the two
 * layouts a server may use (MILLIS, default 2000, is split between them):
 *  - fsync*: appending, as an AOF grows without aof-preallocate: every
 *    fdatasync also commits the file's new size (on ext4 a journal commit).
 *    The scratch file is truncated every 256 writes, outside the timed part,
 *    so that the probe fits a nearly full volume and every timed write
 *    extends the file as an append does.
 *  - overwriteFsync*: overwriting a 1 MiB file zero-written and fdatasync'ed
 *    beforehand (untimed), as the server does with aof-preallocate (the
 *    default): the fdatasync writes data and flushes the cache, no metadata.
 *    This is the figure the server pays. overwriteParallelFsyncsPerSecond is
 *    the rate of 4 writers doing the same at once (several fdatasyncs in
 *    flight), over the last quarter of the budget.
 * The bound is MILLIS plus the one write+fdatasync per writer under way when
 * it passes: a volume whose fdatasync never returns keeps the probe (and
 * would keep the server) waiting.
 *
 * A failure to measure (a full or read-only volume) is reported as
 * probeError=<why> and still exits 0: the server starts and the operator
 * says what it could not measure. Only a usage error exits non-zero. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WRITE_SIZE 4096
#define WRITES_PER_FILE 256
#define MAX_SAMPLES 20000
#define MAX_OPTIONS 512
#define PARALLEL_WRITERS 4

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s) {
    char *out = s;
    for (char *in = s; *in; in++) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' && in[3] >= '0' &&
            in[3] <= '7') {
            *out++ = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
            in += 3;
        } else {
            *out++ = *in;
        }
    }
    *out = '\0';
}

/* Is mountpoint dir itself or one of its ancestors? */
static size_t covers(const char *mountpoint, const char *dir) {
    size_t n = strlen(mountpoint);
    if (strcmp(mountpoint, "/") == 0) return 1;
    if (strncmp(mountpoint, dir, n) == 0 && (dir[n] == '\0' || dir[n] == '/')) return n;
    return 0;
}

/* Appends the comma-separated options of add to out, skipping ones out has. */
static void merge_options(char *out, size_t size, const char *add) {
    char copy[PATH_MAX];
    snprintf(copy, sizeof(copy), "%s", add);
    char *save = NULL;
    for (char *opt = strtok_r(copy, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
        size_t len = strlen(opt);
        int seen = 0;
        for (const char *p = out; (p = strstr(p, opt)) != NULL; p += len) {
            if ((p == out || p[-1] == ',') && (p[len] == ',' || p[len] == '\0')) {
                seen = 1;
                break;
            }
        }
        if (seen) continue;
        size_t used = strlen(out);
        if (used + (used > 0) + len + 1 > size) return; /* Keep the message small: drop what does not fit. */
        if (used > 0) out[used++] = ',';
        memcpy(out + used, opt, len + 1);
    }
}

/* The mount holding dir: its options (per-mount, then the filesystem's) and
 * its device number. Returns 0 when found. */
static int find_mount(const char *dir, char *options, size_t size, unsigned *major, unsigned *minor) {
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    size_t best = 0;
    while (getline(&line, &cap, f) > 0) {
        /* id parent major:minor root mountpoint options [optional...] - fstype source superoptions */
        char *fields[64];
        int n = 0;
        char *save = NULL;
        for (char *t = strtok_r(line, " \n", &save); t && n < 64; t = strtok_r(NULL, " \n", &save)) fields[n++] = t;
        int dash = 6;
        while (dash < n && strcmp(fields[dash], "-") != 0) dash++;
        if (n < 6 || dash + 3 >= n) continue;
        unescape(fields[4]);
        size_t len = covers(fields[4], dir);
        /* The longest covering mount point wins; of equal ones the last, which is mounted over the others. */
        if (len == 0 || len < best) continue;
        best = len;
        if (sscanf(fields[2], "%u:%u", major, minor) != 2) *major = *minor = 0;
        options[0] = '\0';
        merge_options(options, size, fields[5]);
        merge_options(options, size, fields[dash + 3]);
    }
    free(line);
    fclose(f);
    return best > 0 ? 0 : -1;
}

/* The write-cache mode of the block device major:minor, or of the disk a
 * partition belongs to. */
static void write_cache(unsigned major, unsigned minor, char *out, size_t size) {
    snprintf(out, size, "unknown");
    if (major == 0) return; /* No block device: tmpfs, overlay, btrfs subvolumes. */
    const char *paths[] = {"/sys/dev/block/%u:%u/queue/write_cache", "/sys/dev/block/%u:%u/../queue/write_cache"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        char path[128];
        snprintf(path, sizeof(path), paths[i], major, minor);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        char value[32];
        if (fgets(value, sizeof(value), f)) {
            value[strcspn(value, "\n")] = '\0';
            snprintf(out, size, "%s", value);
        }
        fclose(f);
        return;
    }
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted samples. */
static uint64_t percentile(const uint64_t *sorted, size_t n, unsigned p) {
    size_t rank = (n * p + 99) / 100;
    return sorted[rank > 0 ? rank - 1 : 0];
}

enum layout { APPEND, OVERWRITE };

/* Opens the probe's scratch file in dir (suffix tells writers apart); for
 * OVERWRITE it is zero-written over WRITES_PER_FILE blocks and fdatasync'ed
 * first. Returns the fd, or -1 with *why set. */
static int scratch(const char *dir, const char *suffix, enum layout layout, char *path, size_t size,
                   const char **why) {
    static const char zeros[WRITE_SIZE];
    int fd = -1;
    if (snprintf(path, size, "%s/.uringredis-fsprobe%s", dir, suffix) >= (int)size)
        errno = ENAMETOOLONG;
    else
        fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | (layout == APPEND ? O_APPEND : 0), 0600);
    if (fd < 0) {
        *why = "open";
        return -1;
    }
    if (layout == OVERWRITE) {
        for (int i = 0; i < WRITES_PER_FILE; i++) {
            ssize_t w = write(fd, zeros, sizeof(zeros));
            if (w != (ssize_t)sizeof(zeros)) {
                if (w >= 0) errno = ENOSPC;
                *why = "write";
                goto fail;
            }
        }
        if (fdatasync(fd) != 0) {
            *why = "fdatasync";
            goto fail;
        }
    }
    return fd;
fail:;
    int saved = errno;
    close(fd);
    unlink(path);
    errno = saved;
    return -1;
}

/* Times write+fdatasync pairs on fd for budget_ns into samples (NULL: only
 * count them); returns how many, or -1 with *why set. */
static long timed_pairs(int fd, enum layout layout, uint64_t budget_ns, uint64_t *samples, const char **why) {
    static const char buf[WRITE_SIZE] = {'x'};
    long n = 0;
    uint64_t start = now_ns();
    while (n < MAX_SAMPLES && now_ns() - start < budget_ns) {
        if (layout == APPEND && n > 0 && n % WRITES_PER_FILE == 0 && ftruncate(fd, 0) != 0) {
            *why = "ftruncate";
            return -1;
        }
        uint64_t t0 = now_ns();
        ssize_t w = layout == APPEND ? write(fd, buf, sizeof(buf))
                                     : pwrite(fd, buf, sizeof(buf), (off_t)(n % WRITES_PER_FILE) * WRITE_SIZE);
        if (w != (ssize_t)sizeof(buf)) {
            if (w >= 0) errno = ENOSPC;
            *why = "write";
            return -1;
        }
        if (fdatasync(fd) != 0) {
            *why = "fdatasync";
            return -1;
        }
        if (samples) samples[n] = now_ns() - t0;
        n++;
    }
    return n;
}

/* One layout on one writer: samples and their count, or -1 with *why set. */
static long measure(const char *dir, enum layout layout, uint64_t budget_ns, uint64_t *samples, const char **why) {
    char path[PATH_MAX];
    int fd = scratch(dir, "", layout, path, sizeof(path), why);
    if (fd < 0) return -1;
    long n = timed_pairs(fd, layout, budget_ns, samples, why);
    int saved = errno;
    close(fd);
    unlink(path);
    errno = saved;
    return n;
}

struct writer {
    int fd;
    uint64_t budget_ns;
    long n;
    const char *why;
    int err;
};

static void *parallel_writer(void *arg) {
    struct writer *w = arg;
    w->n = timed_pairs(w->fd, OVERWRITE, w->budget_ns, NULL, &w->why);
    w->err = errno;
    return NULL;
}

/* PARALLEL_WRITERS writers overwriting files of their own at once: the
 * fdatasyncs per second of them all, or -1 with *why set. */
static long measure_parallel(const char *dir, uint64_t budget_ns, const char **why) {
    struct writer w[PARALLEL_WRITERS];
    pthread_t threads[PARALLEL_WRITERS];
    char paths[PARALLEL_WRITERS][PATH_MAX];
    int opened = 0, started = 0;
    long total = -1;
    for (; opened < PARALLEL_WRITERS; opened++) {
        char suffix[8];
        snprintf(suffix, sizeof(suffix), ".%d", opened);
        w[opened] = (struct writer){.budget_ns = budget_ns};
        w[opened].fd = scratch(dir, suffix, OVERWRITE, paths[opened], sizeof(paths[opened]), why);
        if (w[opened].fd < 0) goto done;
    }
    uint64_t start = now_ns();
    for (; started < PARALLEL_WRITERS; started++) {
        if (pthread_create(&threads[started], NULL, parallel_writer, &w[started]) != 0) {
            *why = "pthread_create";
            break;
        }
    }
    total = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(threads[i], NULL);
        if (w[i].n < 0) {
            *why = w[i].why;
            errno = w[i].err;
            total = -1;
        } else if (total >= 0) {
            total += w[i].n;
        }
    }
    if (started < PARALLEL_WRITERS) total = -1;
    if (total >= 0) total = (long)((double)total * 1e9 / (double)(now_ns() - start));
done:;
    int saved = errno;
    for (int i = 0; i < opened; i++) {
        close(w[i].fd);
        unlink(paths[i]);
    }
    errno = saved;
    return total;
}

static void print_latency(const char *prefix, uint64_t *samples, long n) {
    qsort(samples, (size_t)n, sizeof(samples[0]), compare_u64);
    printf("%sSamples=%ld\n", prefix, n);
    printf("%sP50Micros=%llu\n", prefix, (unsigned long long)(percentile(samples, (size_t)n, 50) / 1000));
    printf("%sP99Micros=%llu\n", prefix, (unsigned long long)(percentile(samples, (size_t)n, 99) / 1000));
    printf("%sMaxMicros=%llu\n", prefix, (unsigned long long)(samples[n - 1] / 1000));
}

int main(int argc, char **argv) {
    long millis = 2000;
    int opt;
    while ((opt = getopt(argc, argv, "t:")) != -1) {
        char *end;
        switch (opt) {
        case 't':
            millis = strtol(optarg, &end, 10);
            if (*end != '\0' || millis < 1 || millis > 60000) {
                fprintf(stderr, "uring-redis-fsprobe: -t takes milliseconds between 1 and 60000\n");
                return 2;
            }
            break;
        default:
            fprintf(stderr, "usage: uring-redis-fsprobe [-t MILLIS] DIR\n");
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: uring-redis-fsprobe [-t MILLIS] DIR\n");
        return 2;
    }
    char dir[PATH_MAX];
    if (!realpath(argv[optind], dir)) {
        printf("probeError=%s: %s\n", argv[optind], strerror(errno));
        return 0;
    }

    char options[MAX_OPTIONS] = "";
    char cache[32] = "unknown";
    unsigned major = 0, minor = 0;
    if (find_mount(dir, options, sizeof(options), &major, &minor) == 0) {
        printf("mountOptions=%s\n", options);
        write_cache(major, minor, cache, sizeof(cache));
    }
    printf("writeCache=%s\n", cache);
    fflush(stdout);

    /* Half the budget appending, three eighths overwriting alone, one
     * eighth overwriting with several writers. */
    static uint64_t samples[MAX_SAMPLES];
    const char *why = "";
    uint64_t budget = (uint64_t)millis * 1000000u, start = now_ns();
    long n = measure(dir, APPEND, budget / 2, samples, &why);
    if (n < 0) {
        printf("probeError=%s: %s\n", why, strerror(errno));
        return 0;
    }
    print_latency("fsync", samples, n);
    fflush(stdout);
    n = measure(dir, OVERWRITE, budget * 3 / 8, samples, &why);
    if (n < 0) {
        printf("probeError=overwrite %s: %s\n", why, strerror(errno));
        return 0;
    }
    print_latency("overwriteFsync", samples, n);
    long rate = measure_parallel(dir, budget / 8, &why);
    if (rate < 0) {
        printf("probeError=parallel overwrite %s: %s\n", why, strerror(errno));
        return 0;
    }
    printf("overwriteParallelFsyncsPerSecond=%ld\n", rate);
    printf("probeMillis=%llu\n", (unsigned long long)((now_ns() - start) / 1000000));
    return 0;
}
