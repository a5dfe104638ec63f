/* Client replies through io_uring: one submission per event-loop pass.
 *
 * DESIGN
 * ------
 *
 * Purpose. Upstream writes each client's pending replies with its own
 * write(2)/writev(2) in handleClientsWithPendingWrites, before the event loop
 * sleeps: with 50 clients that is 50 system calls per pass. With
 * `io-uring-replies yes` those writes become IORING_OP_SENDMSG requests on a
 * ring of their own, all submitted with one io_uring_enter at the end of the
 * pass (the AOFUring thesis' "async/batch" server). Durable-mode releases
 * benefit the same way: a completed fdatasync puts tens of held clients back
 * in the pending-write queue, and they go out in one submission.
 *
 * Synchronous batches. Every send carries MSG_DONTWAIT, so the kernel either
 * copies what fits into the socket buffer or fails with EAGAIN at once; it
 * never parks a send waiting for the socket to drain. The submission is
 * io_uring_submit_and_wait() for all the sends queued, so when
 * replyUringFlush returns every send has completed and been accounted for:
 * nothing is ever in flight across passes. That keeps upstream's contracts
 * unchanged without touching its I/O-thread state machine: no client can be
 * freed, resized, killed or written to while the kernel holds pointers into
 * its reply buffers, and each client has at most one send per pass, so
 * per-client ordering needs no IOSQE_IO_DRAIN or links (what cost the thesis
 * 5% at pipeline depth 16).
 *
 * Completions are applied exactly as writeToClient applies a writev: the
 * byte count goes to c->nwritten and postWriteToClient advances sentlen and
 * frees sent blocks; a short send or EAGAIN leaves replies pending and the
 * writable handler is installed, as upstream does after a short write; any
 * other error marks the connection as connSocketWritev would, so the client
 * is freed the same way. The writable handler itself (a client that could not
 * take its replies at once) keeps upstream's synchronous write: that path is
 * per client and rare.
 *
 * Scope. Plain TCP and unix-socket clients that are not replicas: replicas
 * have their own write path, TLS writes through OpenSSL. With I/O threads
 * active, upstream offloads writes to them first and only what they decline
 * comes here.
 *
 * Failure and fallback. If the ring cannot be set up (no io_uring in the
 * kernel, a seccomp profile that denies it, a memory limit) the server logs
 * why, INFO says it in io_uring_replies_fallback_reason, and replies go out
 * through write(2) as upstream. A submission error other than EINTR/EAGAIN
 * completes the batch through writeToClient and turns the ring off with the
 * reason. The option can be switched at runtime (CONFIG SET
 * io-uring-replies); switching it off flushes nothing because nothing is
 * ever in flight.
 *
 * INFO (stats section): io_uring_replies (0/1 active),
 * io_uring_replies_fallback_reason, io_uring_replies_batches (submissions),
 * io_uring_replies_sends, io_uring_replies_short_sends (fewer bytes than
 * offered), io_uring_replies_eagain, io_uring_replies_errors. Latency event
 * "io-uring-replies" times a submission with its completions.
 */

#include "server.h"
#include "latency.h"
#include "reply_uring.h"

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#define REPLY_URING_ENTRIES 256 /* Sends per submission; a larger pass submits in chunks. */
#define REPLY_URING_IOV 16      /* iovecs per send: the static buffer and reply blocks. */

static struct {
    long long batches, sends, short_sends, eagain, errors;
} stats;

static char fallback_reason[128] = "disabled";

#ifdef HAVE_LIBURING

typedef struct pendingSend {
    client *c;
    ssize_t len; /* Bytes offered. */
    struct msghdr msg;
    struct iovec iov[REPLY_URING_IOV];
} pendingSend;

static struct {
    int active;
    struct io_uring ring;
    int queued;
    pendingSend sends[REPLY_URING_ENTRIES];
} R;

static void setFallback(const char *what, int err) {
    snprintf(fallback_reason, sizeof(fallback_reason), "%s: %s", what, strerror(err));
}

static int startRing(void) {
    struct io_uring_params p = {0};
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int ret = io_uring_queue_init_params(REPLY_URING_ENTRIES, &R.ring, &p);
    if (ret == -EINVAL) {
        /* Kernels before 6.1 reject SINGLE_ISSUER/DEFER_TASKRUN. */
        p.flags = 0;
        ret = io_uring_queue_init_params(REPLY_URING_ENTRIES, &R.ring, &p);
    }
    if (ret < 0) {
        setFallback("io_uring_setup", -ret);
        serverLog(LL_WARNING, "io-uring-replies: no ring (%s); replies go out through write(2).", fallback_reason);
        return C_ERR;
    }
    R.active = 1;
    R.queued = 0;
    snprintf(fallback_reason, sizeof(fallback_reason), "none");
    serverLog(LL_NOTICE, "io-uring-replies: client replies go out through io_uring, up to %d sends per submission.",
              REPLY_URING_ENTRIES);
    return C_OK;
}

static void stopRing(const char *reason) {
    io_uring_queue_exit(&R.ring);
    R.active = 0;
    snprintf(fallback_reason, sizeof(fallback_reason), "%s", reason);
}

/* Applies a completion (res: bytes sent or -errno) as writeToClient applies
 * a writev, then does what handleClientsWithPendingWrites does after it. */
static void completeSend(pendingSend *ps, int res) {
    client *c = ps->c;
    c->nwritten = 0;
    c->write_flags = 0;
    if (res > 0) {
        c->nwritten = res;
        if (res < ps->len) stats.short_sends++;
    } else {
        c->nwritten = res == 0 ? 0 : -1;
        c->write_flags |= WRITE_FLAGS_WRITE_ERROR;
        if (res == -EAGAIN) {
            stats.eagain++;
        } else if (res < 0) {
            stats.errors++;
            c->conn->last_errno = -res;
            if (res != -EINTR && c->conn->state == CONN_STATE_CONNECTED) c->conn->state = CONN_STATE_ERROR;
        }
    }
    if (postWriteToClient(c) == C_ERR) return;
    if (clientHasPendingReplies(c)) installClientWriteHandler(c);
}

#endif /* HAVE_LIBURING */

/* Starts the ring at server start when the option is on. */
void replyUringStart(void) {
#ifdef HAVE_LIBURING
    if (server.io_uring_replies && !R.active) startRing();
#else
    if (server.io_uring_replies) {
        snprintf(fallback_reason, sizeof(fallback_reason), "not_built");
        serverLog(LL_WARNING, "io-uring-replies: this server was built without liburing; replies go out through write(2).");
    }
#endif
}

/* CONFIG SET io-uring-replies: start or stop the ring. Turning it on where
 * io_uring is unavailable is not an error: the option stays on, the reason is
 * in INFO, and replies go out through write(2). */
int replyUringUpdate(const char **err) {
    UNUSED(err);
#ifdef HAVE_LIBURING
    if (server.io_uring_replies && !R.active) {
        startRing();
    } else if (!server.io_uring_replies && R.active) {
        replyUringFlush();
        stopRing("disabled");
    }
#else
    replyUringStart();
#endif
    return 1;
}

/* Queues c's pending replies as one send of the current pass. Returns 1 when
 * queued (replyUringFlush completes it), 0 when the caller should write them
 * itself. */
int replyUringQueue(client *c) {
#ifdef HAVE_LIBURING
    if (!R.active || getClientType(c) == CLIENT_TYPE_REPLICA || c->flag.lua_debug) return 0;
    const char *type = connGetType(c->conn);
    if (strcmp(type, CONN_TYPE_SOCKET) != 0 && strcmp(type, CONN_TYPE_UNIX) != 0) return 0;
    if (R.queued == REPLY_URING_ENTRIES) replyUringFlush();
    if (!R.active) return 0;

    pendingSend *ps = &R.sends[R.queued];
    int iovcnt = clientReplyIov(c, ps->iov, min(REPLY_URING_IOV, c->conn->iovcnt), &ps->len);
    if (iovcnt == 0) return 0;
    ps->c = c;
    memset(&ps->msg, 0, sizeof(ps->msg));
    ps->msg.msg_iov = ps->iov;
    ps->msg.msg_iovlen = iovcnt;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&R.ring);
    serverAssert(sqe != NULL); /* R.queued < entries, and every pass submits all it queued. */
    io_uring_prep_sendmsg(sqe, c->conn->fd, &ps->msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, (unsigned long long)R.queued);
    R.queued++;
    return 1;
#else
    UNUSED(c);
    return 0;
#endif
}

/* Submits the sends queued in this pass and applies every completion. */
void replyUringFlush(void) {
#ifdef HAVE_LIBURING
    if (!R.active || R.queued == 0) return;
    int queued = R.queued, done = 0, ret;
    mstime_t latency;

    latencyStartMonitor(latency);
    do {
        ret = io_uring_submit_and_wait(&R.ring, queued);
    } while (ret == -EINTR || ret == -EAGAIN);
    if (ret < 0) {
        /* Nothing was submitted: write the batch as upstream would. */
        serverLog(LL_WARNING, "io-uring-replies: io_uring_submit: %s; replies go out through write(2).",
                  strerror(-ret));
        R.queued = 0;
        for (int i = 0; i < queued; i++) {
            client *c = R.sends[i].c;
            if (writeToClient(c) == C_OK && clientHasPendingReplies(c)) installClientWriteHandler(c);
        }
        setFallback("io_uring_submit", -ret);
        io_uring_queue_exit(&R.ring);
        R.active = 0;
        return;
    }
    while (done < queued) {
        struct io_uring_cqe *cqe;
        ret = io_uring_wait_cqe(&R.ring, &cqe);
        if (ret == -EINTR) continue;
        if (ret < 0) serverPanic("io-uring-replies: io_uring_wait_cqe: %s", strerror(-ret));
        unsigned long long idx = io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&R.ring, cqe);
        serverAssert(idx < (unsigned long long)queued);
        completeSend(&R.sends[idx], res);
        done++;
    }
    R.queued = 0;
    stats.batches++;
    stats.sends += queued;
    latencyEndMonitor(latency);
    latencyAddSampleIfNeeded("io-uring-replies", latency);
#endif
}

sds replyUringInfo(sds info) {
    int active = 0;
#ifdef HAVE_LIBURING
    active = R.active;
#endif
    return sdscatprintf(info,
                        "io_uring_replies:%d\r\n"
                        "io_uring_replies_fallback_reason:%s\r\n"
                        "io_uring_replies_batches:%lld\r\n"
                        "io_uring_replies_sends:%lld\r\n"
                        "io_uring_replies_short_sends:%lld\r\n"
                        "io_uring_replies_eagain:%lld\r\n"
                        "io_uring_replies_errors:%lld\r\n",
                        active, fallback_reason, stats.batches, stats.sends, stats.short_sends, stats.eagain,
                        stats.errors);
}
