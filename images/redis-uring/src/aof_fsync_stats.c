/* aof_fsync_stats.c - fdatasync latency histograms of the AOF.
 *
 * Every engine and policy fdatasyncs the AOF somewhere else: posix
 * 'appendfsync always' inline in flushAppendOnlyFile(), everysec in a bio
 * thread, the io_uring engine through its ring (submit to completion). Each
 * site times its fdatasync and records it here, so INFO aof_fsync_* (and
 * the dashboards' fsync panels, through redis_exporter) compare the modes on
 * one histogram: count, sum, p50/p99/max from an HDR histogram and
 * cumulative Prometheus-style buckets. Records come from the main thread and
 * the bio thread, at most a few thousand a second: a mutex is enough.
 */

#include "server.h"
#include "hdr_histogram.h"
#include "aof_fsync_stats.h"

static const long long fsync_buckets[AOF_FSYNC_BUCKETS] = {50, 100, 250, 500, 1000, 2500, 5000,
                                                           10000, 25000, 50000, 100000, 250000, 1000000};

static aofFsyncHistogram all_fsyncs = AOF_FSYNC_HISTOGRAM_INIT;

void aofFsyncHistogramRecord(aofFsyncHistogram *h, long long usec) {
    int i;

    if (usec < 1) usec = 1;
    pthread_mutex_lock(&h->lock);
    if (h->hist == NULL && hdr_init(1, 100LL * 1000 * 1000, 2, &h->hist) != 0)
        serverPanic("can't allocate the AOF fsync latency histogram");
    hdr_record_value(h->hist, usec);
    h->count++;
    h->usec_sum += usec;
    for (i = 0; i < AOF_FSYNC_BUCKETS && usec > fsync_buckets[i]; i++);
    h->bucket[i]++;
    pthread_mutex_unlock(&h->lock);
}

sds aofFsyncHistogramInfo(aofFsyncHistogram *h, sds info, const char *prefix) {
    long long p50 = 0, p99 = 0, max = 0, cum = 0;
    int i;

    pthread_mutex_lock(&h->lock);
    if (h->hist) {
        p50 = hdr_value_at_percentile(h->hist, 50.0);
        p99 = hdr_value_at_percentile(h->hist, 99.0);
        max = hdr_max(h->hist);
    }
    info = sdscatprintf(info,
                        "%s_count:%lld\r\n"
                        "%s_usec_sum:%lld\r\n"
                        "%s_usec_p50:%lld\r\n"
                        "%s_usec_p99:%lld\r\n"
                        "%s_usec_max:%lld\r\n",
                        prefix, h->count, prefix, h->usec_sum, prefix, p50, prefix, p99, prefix, max);
    for (i = 0; i < AOF_FSYNC_BUCKETS; i++) {
        cum += h->bucket[i];
        info = sdscatprintf(info, "%s_usec_bucket_le_%lld:%lld\r\n", prefix, fsync_buckets[i], cum);
    }
    cum += h->bucket[AOF_FSYNC_BUCKETS];
    info = sdscatprintf(info, "%s_usec_bucket_le_inf:%lld\r\n", prefix, cum);
    pthread_mutex_unlock(&h->lock);
    return info;
}

void aofFsyncRecord(long long usec) {
    aofFsyncHistogramRecord(&all_fsyncs, usec);
}

sds aofFsyncInfo(sds info) {
    return aofFsyncHistogramInfo(&all_fsyncs, info, "aof_fsync");
}
