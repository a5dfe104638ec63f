# io_uring AOF engine, durable mode with aof-uring-ack-replicas: a primary
# tells nobody of a write, and shows it to nobody, before it is durable here
# AND fdatasync'ed by that many replicas. The replica's batches are held back
# with the hidden knob aof-uring-debug-fsync-delay-ms, so the replica's ack
# comes late while the primary's own fsync is quick: every observer on the
# primary must wait for the replica.

set ::ack_delay 1000
set ::ack_min [expr {$::ack_delay - 150}]

proc ack_elapsed {t0} {
    expr {[clock milliseconds] - $t0}
}

# $client read, asserting that the reply came no sooner than the replica's delay.
proc ack_read_late {client t0 what} {
    set reply [$client read]
    set ms [ack_elapsed $t0]
    if {$ms < $::ack_min} {
        fail "$what was served after $ms ms, before the replica's fsync ($::ack_delay ms)"
    }
    return $reply
}

tags {"uring repl external:skip"} {
start_server {overrides {appendonly yes appendfsync-engine uring aof-uring-ack durable}} {
    set primary [srv 0 client]
    set primary_host [srv 0 host]
    set primary_port [srv 0 port]

    start_server {overrides {appendonly yes appendfsync-engine uring aof-uring-ack durable}} {
        set replica [srv 0 client]

        proc ack_settle {primary} {
            wait_for_condition 500 10 {
                [status $primary aof_uring_held_clients] == 0 &&
                [status $primary aof_uring_replica_checkpoints] == 0
            } else {
                fail "writes still wait for the replica: [status $primary aof_uring_replica_checkpoints] checkpoints"
            }
        }

        $replica replicaof $primary_host $primary_port
        wait_for_sync $replica
        $primary config set aof-uring-ack-replicas 1

        test {uring ack-replicas: INFO reports the option and the replica's durable offset} {
            $primary set warm v
            ack_settle $primary
            assert_equal 1 [status $primary aof_uring_ack_replicas]
            assert_morethan [status $primary aof_uring_replica_durable_offset] 0
            assert_morethan [status $primary aof_uring_replica_durable_bytes] 0
        }

        test {uring ack-replicas: a write's reply waits for the replica's fsync} {
            $replica config set aof-uring-debug-fsync-delay-ms $::ack_delay
            set rd [valkey_deferring_client -1]
            set t0 [clock milliseconds]
            $rd set k1 v1
            # Durable on the primary at once; held for the replica.
            wait_for_condition 100 10 {[status $primary aof_uring_held_clients] == 1} else {
                fail "the write's client is not held"
            }
            assert_equal OK [ack_read_late $rd $t0 "SET's reply"]
            $rd close
            $replica config set aof-uring-debug-fsync-delay-ms 0
            ack_settle $primary
        }

        test {uring ack-replicas: a read of a key not yet on the replica's disk waits too} {
            $replica config set aof-uring-debug-fsync-delay-ms $::ack_delay
            set wr [valkey_deferring_client -1]
            set rd [valkey_deferring_client -1]
            set t0 [clock milliseconds]
            $wr set k2 v2
            wait_for_condition 100 10 {[status $primary aof_uring_held_clients] == 1} else {
                fail "the write's client is not held"
            }
            $rd get k2
            assert_equal v2 [ack_read_late $rd $t0 "GET of the write"]
            assert_equal OK [$wr read]
            # A key the replica has made durable is served at once.
            set t0 [clock milliseconds]
            assert_equal v1 [$primary get k1]
            assert_lessthan [ack_elapsed $t0] $::ack_min
            $wr close
            $rd close
            $replica config set aof-uring-debug-fsync-delay-ms 0
            ack_settle $primary
        }

        test {uring ack-replicas: pipelined writes share the replica's acknowledgement} {
            $replica config set aof-uring-debug-fsync-delay-ms 300
            set rd [valkey_deferring_client -1]
            set t0 [clock milliseconds]
            for {set i 0} {$i < 100} {incr i} { $rd incr counter }
            for {set i 1} {$i <= 100} {incr i} { assert_equal $i [$rd read] }
            # One replica batch (or two) for the whole pipeline, not 100.
            assert_lessthan [ack_elapsed $t0] 3000
            $rd close
            $replica config set aof-uring-debug-fsync-delay-ms 0
            ack_settle $primary
        }

        test {uring ack-replicas: a script may not keep a write off the replicas} {
            catch {$primary eval {server.set_repl(server.REPL_AOF); return server.call('set', KEYS[1], 'v')} 1 aofonly} err
            assert_match {*aof-uring-ack-replicas is set*keep REPL_REPLICA*} $err
            assert_equal 0 [$primary exists aofonly]
            # REPL_ALL (and the default) are fine.
            assert_equal OK [$primary eval {server.set_repl(server.REPL_ALL); return server.call('set', KEYS[1], 'v')} 1 replicated]
            wait_for_ofs_sync $primary $replica
            assert_equal v [$replica get replicated]
        }

        test {uring ack-replicas: with fewer replicas than required, writes are refused (NOREPLICAS), reads served} {
            $replica replicaof no one
            wait_for_condition 100 50 {[status $primary connected_slaves] == 0} else {
                fail "the primary still counts the replica"
            }
            set before [status $primary aof_uring_noreplicas_refusals]
            catch {$primary set k3 v3} err
            assert_match {NOREPLICAS*} $err
            assert_equal {} [$primary get k3]
            assert_equal v1 [$primary get k1]
            assert_equal [expr {$before + 1}] [status $primary aof_uring_noreplicas_refusals]
            # A second required replica that does not exist refuses writes too.
            $replica replicaof $primary_host $primary_port
            wait_for_sync $replica
            $primary config set aof-uring-ack-replicas 2
            catch {$primary set k3 v3} err
            assert_match {NOREPLICAS*} $err
            $primary config set aof-uring-ack-replicas 1
            assert_equal OK [$primary set k3 v3]
            assert_equal v3 [$replica get k3]
        }

        test {uring ack-replicas: a write held when the replica goes away is closed without a reply after the hold timeout} {
            $primary config set aof-uring-hold-timeout-ms 1000
            $replica config set aof-uring-debug-fsync-delay-ms 5000
            set loglines [count_log_lines -1]
            set rd [valkey_deferring_client -1]
            $rd set k4 v4
            wait_for_condition 100 10 {[status $primary aof_uring_held_clients] == 1} else {
                fail "the write's client is not held"
            }
            $replica replicaof no one
            set timeouts [status $primary aof_uring_hold_timeouts]
            catch {$rd read} err
            assert_match {*I/O error*} $err
            assert_equal [expr {$timeouts + 1}] [status $primary aof_uring_hold_timeouts]
            wait_for_log_messages -1 {"*waiting for aof-uring-ack-replicas replicas*"} $loglines 100 10
            $rd close
            $primary config set aof-uring-hold-timeout-ms 10000
            $replica config set aof-uring-debug-fsync-delay-ms 0
        }

        test {uring ack-replicas: turning the option off releases what waits for replicas} {
            $replica replicaof $primary_host $primary_port
            wait_for_sync $replica
            $replica config set aof-uring-debug-fsync-delay-ms 5000
            set rd [valkey_deferring_client -1]
            set t0 [clock milliseconds]
            $rd set k5 v5
            wait_for_condition 100 10 {[status $primary aof_uring_held_clients] == 1} else {
                fail "the write's client is not held"
            }
            $primary config set aof-uring-ack-replicas 0
            assert_equal OK [$rd read]
            assert_lessthan [ack_elapsed $t0] 4000
            $rd close
            $replica config set aof-uring-debug-fsync-delay-ms 0
            $primary config set aof-uring-ack-replicas 1
            ack_settle $primary
        }

        test {uring ack-replicas: a promoted replica holds every acknowledged write; reads wait for its first replica} {
            for {set i 0} {$i < 200} {incr i} { assert_equal OK [$primary set ack:$i $i] }
            # Every acknowledged write is already on the replica (and on its disk).
            for {set i 0} {$i < 200} {incr i} { assert_equal $i [$replica get ack:$i] }
            # Promote the replica (configured like its primary). What it holds
            # may be on no other disk yet: until a replica of the new history
            # acknowledges it, reads wait; the admin's own reply does not.
            $replica config set aof-uring-ack-replicas 1
            $replica replicaof no one
            set rd [valkey_deferring_client]
            $rd get ack:7
            wait_for_condition 100 10 {[status $replica aof_uring_held_clients] == 1} else {
                fail "the read of a key of the old history is not held"
            }
            catch {$replica set new v} err
            assert_match {NOREPLICAS*} $err
            $primary replicaof [srv 0 host] [srv 0 port]
            wait_for_sync $primary
            assert_equal 7 [$rd read]
            $rd close
            assert_equal OK [$replica set after v]
            wait_for_ofs_sync $replica $primary
            assert_equal v [$primary get after]
            ack_settle $replica
            assert_morethan [status $replica aof_uring_replica_durable_offset] 0
            # Back to the first topology for whatever runs next.
            $replica config set aof-uring-ack-replicas 0
            $primary replicaof no one
            $replica replicaof $primary_host $primary_port
            wait_for_sync $replica
        }
    }
}
}
