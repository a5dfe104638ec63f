// Package backup is the backup agent's library: it takes a backup of a
// running server and stores it in S3-compatible object storage, archives
// the server's AOF as it grows, and reads either back for a restore.
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
// # Continuous archiving
//
// A backup holds one instant; the Archiver, a sidecar beside the server on
// its volume, ships the AOF as the server writes it, so that
// ArchiveRestore can bring the data back as of any second since. Valkey's
// AOF is multi-part: in appendonlydir/ a manifest names a base (an RDB, or
// RESP with aof-use-rdb-preamble no) and the INCR files of commands since,
// in seq order. An AOF rewrite opens a new INCR file as it forks, writes a
// new base, and deletes the old base and INCR files. With
// aof-timestamp-enabled yes the server writes "#TS:<unix seconds>" before
// the first command of each second, which is where a restore cuts (as
// valkey-check-aof --truncate-to-timestamp does): every write of the
// target second is kept, none after.
//
// Every Interval a pass ships, under the destination's prefix:
//
//	archive/<timeline>/base/<seq>/<file>      each base, whole, once, before its INCR files
//	archive/<timeline>/incr/<seq>/<offset>    the new complete entries of each INCR file
//	archive/<timeline>/timeline.json          what is archived (Timeline), rewritten last
//
// timeline.json records each base's and each INCR file's size and SHA-256
// (of all its segments together, so that it does not grow with every
// pass), which a restore checks what it downloads against.
// A segment is never rewritten: the next starts where it ended; the
// archiver deletes only what no recovery to its horizon or later needs
// (prune: behind the oldest backup in the store, or MaxAge). An INCR
// file the manifest no longer lists last is read to its end (through the
// descriptor held since, if a rewrite deleted it) and marked closed. The
// open INCR file is preallocated: zeros, and in durable mode padding
// annotations, follow the log, so its size is no end; ScanAOF finds the
// last complete entry, and bytes are shipped only once two reads agree on
// them (a read may overtake a write in progress). Before it reads the tail
// a pass asks INFO for an instant, by the server's clock, before which
// every executed write is in the file; timeline.json records it as
// LastArchivedTime, the end of what can be restored: the recovery point
// objective is Interval (30 s by default) plus a pass's time. When the pod
// stops, a last pass ships what the server wrote before it stopped. The
// timeline's name (<UTC start>-<6 hex>) is kept in the data directory
// (TimelineFile): a restarted pod goes on with its timeline, and rebuilds
// what it shipped from the store; a new volume, or one whose log no longer
// holds what was archived of it (a crash took writes the archiver had read),
// starts a new one.
//
// Only a primary (INFO role:master) archives. A replica's AOF repeats the
// primary's, and archives of both would be two histories of one dataset; a
// replica promoted to primary archives from then on. The agent's user
// needs INFO only.
//
// A base's point is conservative: an RDB's ctime is when the rewrite's
// child began writing it, at or after the fork whose data it holds, so a
// restore to a second at or after it replays, from the INCR file the
// rewrite opened, every write the base may lack. A RESP base's point is
// its first #TS annotation, or its file's mtime. A restore (Plan) takes
// the latest base at or before the target whose chain (the base, its
// first INCR file and every later one, the INCR files being one log a
// rewrite splits) is archived up to the target without a hole; a chain
// ends at an INCR file whose tail was deleted before it was read (the agent
// was down through a rewrite).
//
// # The backup user
//
// On a server with a password the agent signs in as BackupUser, whose ACL
// rules are BackupUserRules: INFO, REPLCONF and PSYNC, nothing else. PSYNC
// hands over every key, so the rules cannot confine it to some: the user's
// password is as sensitive as the data.
package backup
