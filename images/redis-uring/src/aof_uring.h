/* io_uring AOF engine: see the DESIGN comment at the top of aof_uring.c. */
#ifndef AOF_URING_H
#define AOF_URING_H

/* appendfsync-engine */
#define AOF_ENGINE_POSIX 0
#define AOF_ENGINE_URING 1

/* aof-uring-ack */
#define AOF_URING_ACK_DURABLE 0
#define AOF_URING_ACK_FAST 1

struct client;

/* True when the ring is up and carries the AOF writes. */
int aofUringActive(void);
/* flushAppendOnlyFile(): before it write(2)s aof_buf (0: not now, durable
 * mode's group commit waits for the fdatasync in flight), when that write
 * failed, and instead of its fsync step (fdatasync through the ring; fast
 * mode paces it and applies back-pressure over aof-uring-max-inflight-bytes;
 * force = wait until everything written is durable). */
int aofUringBeforeWrite(int force);
void aofUringWriteFailed(int short_write);
void aofUringFsync(int force);
/* flushAppendOnlyFile(), before it writes aof_buf: in durable mode with
 * aof-uring-direct-writes, write it through the ring as one O_DIRECT write
 * with RWF_DSYNC (its own fdatasync) and return 1; else return 0 and let the
 * write(2) path run (it may have padded aof_buf to realign the log). */
int aofUringDirectWrite(int force);
/* Try to bring the ring up if the engine is selected; no-op when it is up or
 * a previous attempt failed. Returns aofUringActive(). */
int aofUringEnsure(void);
/* Drain and tear down the ring (stopAppendOnly, shutdown, engine switch). */
void aofUringStop(void);
/* beforeSleep(), before flushAppendOnlyFile(): publish the durable offset and
 * resume clients that were held for it. */
void aofUringBeforeSleep(void);
/* True if c must not get reply bytes nor have more input parsed yet; the
 * client is remembered and resumed by aofUringBeforeSleep(). */
int aofUringHoldClient(struct client *c);
/* The durable gate's hooks (durable mode; no-ops otherwise):
 * feedAppendOnlyFile() appended len bytes to aof_buf; */
void aofUringFed(size_t len);
/* the keyspace looked up / modified a key, or emptied or swapped a db; */
struct serverDb;
struct serverObject;
void aofUringKeyRead(struct serverDb *db, char *key);
void aofUringKeyModified(struct serverDb *db, struct serverObject *key);
void aofUringDbModified(struct serverDb *db);
/* call() ran a command (nested ones too), before the unit's propagation; */
void aofUringAfterCommand(struct client *c);
/* output is queued for, or a WATCHed key changed under, a client other than
 * the one whose command runs; */
void aofUringPushed(struct client *c);
/* postExecutionUnitOperations(): the unit has propagated. */
void aofUringExecutionUnitDone(void);
/* INFO keyspace: replace db j's live counts with those of the last durable
 * point while some write is not durable yet. */
void aofUringKeyspaceCounts(int j, long long *keys, long long *vkeys);
/* freeMemoryGetNotCountedMemory(): output the gate holds, like aof_buf
 * memory waiting for the disk. */
size_t aofUringHeldOutputMemory(void);
/* freeClient(): forget a held client. */
void aofUringClientFreed(struct client *c);
/* Durable acks across replicas (aof-uring-ack-replicas): REPLCONF ACK moved
 * a replica's reported AOF fsync offset; */
void aofUringReplicaAcked(void);
/* false when a primary holding replies for aof-uring-ack-replicas has fewer
 * connected replicas than that: writes are refused (-NOREPLICAS). */
int aofUringEnoughReplicas(void);
/* true when replies wait for aof-uring-ack-replicas replicas: a script may
 * not keep its writes off the replicas (server.set_repl). */
int aofUringReplicasRequired(void);
/* Config apply callbacks. */
int aofUringUpdateAckReplicas(const char **err);
int aofUringUpdateEngine(const char **err);
int aofUringUpdateMaxWorkers(const char **err);
int aofUringUpdateRing(const char **err);
int aofUringIsValidQueueDepth(long long val, const char **err);
int aofUringIsValidEngine(int val, const char **err);
int aofUringIsValidAck(int val, const char **err);
/* Startup check of option combinations; NULL or the error to report. */
const char *aofUringConfigConflict(void);
/* INFO persistence fields (aof_engine, aof_uring_*). */
sds aofUringInfo(sds info);

#endif
