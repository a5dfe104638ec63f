/* fdatasync latency histograms of the AOF: see aof_fsync_stats.c. */
#ifndef AOF_FSYNC_STATS_H
#define AOF_FSYNC_STATS_H

#include <pthread.h>

#define AOF_FSYNC_BUCKETS 13

struct hdr_histogram;

/* One histogram: recorded from any thread, read by INFO on the main thread. */
typedef struct aofFsyncHistogram {
    pthread_mutex_t lock;
    long long count, usec_sum;
    long long bucket[AOF_FSYNC_BUCKETS + 1]; /* Not cumulative; the last one is +Inf. */
    struct hdr_histogram *hist;
} aofFsyncHistogram;

#define AOF_FSYNC_HISTOGRAM_INIT {PTHREAD_MUTEX_INITIALIZER, 0, 0, {0}, NULL}

void aofFsyncHistogramRecord(aofFsyncHistogram *h, long long usec);
/* INFO lines <prefix>_count, _usec_sum, _usec_p50/_p99/_max and the
 * cumulative _usec_bucket_le_<N> and _le_inf. */
sds aofFsyncHistogramInfo(aofFsyncHistogram *h, sds info, const char *prefix);

/* Every fdatasync of the AOF, whichever engine ran it (INFO aof_fsync_*):
 * posix 'always' inline, everysec's bio job, the io_uring engine's batches. */
void aofFsyncRecord(long long usec);
sds aofFsyncInfo(sds info);

#endif
