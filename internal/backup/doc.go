// Package backup is the backup agent's library: it takes a backup of a
// running server and stores it in S3-compatible object storage, and reads
// one back for a restore.
//
// # What a backup is
//
// A backup is one RDB: the server's whole dataset (every database, the
// functions, each key's TTL) at one instant, in the format the server loads
// at start from its dbfilename. An RDB begins with its magic and version
// ("REDIS0011" from Valkey 8.1) and ends with the EOF opcode and a CRC-64 of
// everything before it, so a copy can be checked on its own (VerifyRDB)
// before a server is started on it. Beside it the agent writes its
// Metadata: where the RDB is stored and the Snapshot FetchRDB returned (size,
// SHA-256, the server's version and role, the replication ID and offset the
// RDB holds, and when it was taken).
//
// The AOF is not backed up: the RDB holds the same data, at one instant.
// A server with appendonly yes loads only its AOF and ignores dbfilename
// (loadDataFromDisk), so Restore writes the RDB as the base of a new
// multi-part AOF: appendonlydir/appendonly.aof.1.base.rdb and a manifest
// naming only it, which the server loads as it loads a base an AOF rewrite
// wrote (the RDB preamble) before it opens a new INCR file. Without an AOF
// the RDB becomes dump.rdb.
//
// # How it is taken
//
// FetchRDB asks the server for its dataset the way a new replica does, and
// valkey-cli --rdb: over the replication protocol, on one connection, with
// no file left on the agent's side and no access to the pod's volume. It
// signs in, reads INFO, announces that it reads the diskless format
// (REPLCONF capa eof) and wants the RDB alone (REPLCONF rdb-only 1), then
// sends PSYNC ? -1. The server forks, as for BGSAVE; the child's copy of
// memory is the consistent point, and the server says so at once with
// +FULLRESYNC <replid> <offset>. The child writes the RDB either to the
// server's own dbfilename, which the server then sends after "$<length>"
// (disk-based), or through the parent straight to the connection between
// "$EOF:<mark>" and the mark (diskless, repl-diskless-sync yes, Valkey 8's
// default). FetchRDB streams it to its writer as it arrives, hashing and
// checking it, and the server closes the connection once it is sent.
//
// rdb-only keeps the server from buffering the writes made during the
// transfer for us, as it does for a replica that will stream them next, and
// from counting us as a replica once the RDB is sent. No rdb-filter-only:
// an include filter would leave the data out.
//
// # What a backup costs the server
//
//   - A fork and its copy-on-write memory, as BGSAVE; a snapshot waits while
//     another child runs (an AOF rewrite), and a diskless one waits
//     repl-diskless-sync-delay (5 s by default) for other replicas to share it.
//   - Disk-based: the RDB is written to the data volume first (dump.rdb
//     overwritten), which needs the free space of one more RDB there.
//   - A primary without a replication backlog (no replica since it started,
//     or none for repl-backlog-ttl, an hour by default) creates one
//     (repl-backlog-size) and takes a new replication ID, as for a replica.
//   - While the snapshot runs, INFO replication lists the agent as one more
//     replica, state wait_bgsave, port 0 (connected_slaves counts it; checks
//     for state=online do not). Sentinel reads the primary's list every 10 s
//     and keeps any replica it sees there: a backup of the primary that
//     spans one of its reads leaves a replica <agent IP>:0 in every
//     Sentinel's table (and sentinel.conf), down and never connected, until
//     SENTINEL RESET. Sentinel does not read replicas' lists: an instance
//     with replicas is backed up from one of them
//     (TestFetchRDBSentinelSeesBackupsOfThePrimaryOnly).
//
// # The backup user
//
// On a server with a password the agent signs in as BackupUser, whose ACL
// rules are BackupUserRules: INFO, REPLCONF and PSYNC, nothing else. PSYNC
// hands over every key, so the rules cannot confine it to some: the user's
// password is as sensitive as the data.
package backup
