# io_uring AOF engine: durable-mode reply gating, fast mode, INFO fields.
# The hidden knob aof-uring-debug-fsync-delay-ms links a timeout behind each
# batch's fdatasync, so a batch only becomes durable after that delay.

set ::uring_info_fields {
    aof_engine aof_uring_active aof_uring_fallback_reason aof_uring_ack
    aof_uring_queue_depth aof_uring_sqpoll aof_uring_defer_taskrun
    aof_uring_submitted_batches aof_uring_completed_batches aof_uring_inflight_batches
    aof_uring_inflight_bytes aof_uring_pending_bytes aof_uring_submitted_bytes
    aof_uring_written_bytes aof_uring_backpressure_events aof_uring_short_writes
    aof_uring_write_errors aof_uring_held_clients aof_uring_held_events
    aof_uring_gated_reads aof_uring_coalesce_waits aof_uring_wakeups aof_uring_durable_offset
    aof_uring_durable_lag_bytes
    aof_uring_fsync_count aof_uring_fsync_usec_sum aof_uring_fsync_usec_p50
    aof_uring_fsync_usec_p99 aof_uring_fsync_usec_max
    aof_uring_fsync_usec_bucket_le_50 aof_uring_fsync_usec_bucket_le_1000
    aof_uring_fsync_usec_bucket_le_1000000 aof_uring_fsync_usec_bucket_le_inf
}

proc elapsed_ms {t0} {
    expr {[clock milliseconds] - $t0}
}

tags {"uring external:skip"} {
start_server {overrides {appendonly yes appendfsync-engine uring aof-uring-ack durable}} {
    test {uring: engine is active and INFO has its fields} {
        assert_equal uring [s aof_engine]
        assert_equal 1 [s aof_uring_active]
        assert_equal none [s aof_uring_fallback_reason]
        set info [r info persistence]
        foreach f $::uring_info_fields {
            assert_match "*$f:*" $info
        }
    }

    test {uring: INFO counters move with writes} {
        set b0 [s aof_uring_completed_batches]
        set f0 [s aof_uring_fsync_count]
        for {set i 0} {$i < 20} {incr i} { r set k$i $i }
        assert_morethan_equal [s aof_uring_completed_batches] [expr {$b0 + 20}]
        assert_morethan_equal [s aof_uring_fsync_count] [expr {$f0 + 20}]
        assert_equal [s aof_uring_fsync_count] [s aof_uring_fsync_usec_bucket_le_inf]
        assert_morethan [s aof_uring_fsync_usec_sum] 0
        assert_morethan [s aof_uring_fsync_usec_max] 0
        assert_morethan [s aof_uring_written_bytes] 0
        assert_equal [s aof_uring_submitted_bytes] [s aof_uring_written_bytes]
        assert_equal 0 [s aof_uring_inflight_batches]
        assert_equal 0 [s aof_uring_durable_lag_bytes]
        assert_equal [s master_repl_offset] [s aof_uring_durable_offset]
    }

    test {uring: WAITAOF sees the durable offset} {
        r set waitaof-key 1
        assert_equal {1 0} [r waitaof 1 0 0]
    }

    test {uring durable: coalescing never delays a lone client} {
        # A batch's released client is awaited only until its next write
        # executes, and a lone client's next write is exactly that.
        set waits0 [s aof_uring_coalesce_waits]
        for {set i 0} {$i < 100} {incr i} { r set lone$i $i }
        assert_equal $waits0 [s aof_uring_coalesce_waits]
    }

    test {uring durable: the next batch waits (boundedly) for the clients a batch released} {
        # c0's write is in flight (the knob delays it 300 ms) while c1..c3
        # write; when c0 is released, the batch of c1..c3 waits for c0's next
        # write, which never comes: it goes after the bounded wait.
        # One fdatasync in flight (the default): with more, c1..c3 would go in their own.
        r config set aof-uring-fsyncs-in-flight 1
        set waits0 [s aof_uring_coalesce_waits]
        r config set aof-uring-debug-fsync-delay-ms 300
        set clients {}
        for {set i 0} {$i < 4} {incr i} { lappend clients [valkey_deferring_client] }
        [lindex $clients 0] set co0 v
        wait_for_condition 50 10 {[s aof_uring_inflight_batches] == 1} else {
            fail "c0's batch is not in flight"
        }
        for {set i 1} {$i < 4} {incr i} { [lindex $clients $i] set co$i v }
        foreach c $clients {
            assert_equal OK [$c read]
            $c close
        }
        r config set aof-uring-debug-fsync-delay-ms 0
        assert_morethan [s aof_uring_coalesce_waits] $waits0
    }

    test {uring durable: the next batch does not wait for a released reader} {
        # c0's write is in flight (delayed 300 ms); c1 reads the key it
        # wrote and is held; c2's write waits in aof_buf. c0 goes away, so
        # the batch releases only the reader c1, whose next command is not
        # awaited: c2's write goes at once, with no coalescing wait.
        r config set aof-uring-fsyncs-in-flight 1
        r config set aof-uring-debug-fsync-delay-ms 300
        set c0 [valkey_deferring_client]
        set c1 [valkey_deferring_client]
        set c2 [valkey_deferring_client]
        $c0 set rd-key v
        wait_for_condition 50 10 {[s aof_uring_inflight_batches] == 1} else {
            fail "c0's batch is not in flight"
        }
        set held0 [s aof_uring_held_events]
        $c1 get rd-key
        wait_for_condition 50 10 {[s aof_uring_held_events] > $held0} else {
            fail "the reader was not held"
        }
        $c2 set rd-other v
        wait_for_condition 50 10 {[s aof_uring_pending_bytes] > 0} else {
            fail "c2's write is not waiting in aof_buf"
        }
        set clients0 [s connected_clients]
        $c0 close
        wait_for_condition 50 10 {[s connected_clients] < $clients0} else {
            fail "c0 is still connected"
        }
        set waits0 [s aof_uring_coalesce_waits]
        assert_equal v [$c1 read]
        assert_equal OK [$c2 read]
        assert_equal $waits0 [s aof_uring_coalesce_waits]
        $c1 close
        $c2 close
        r config set aof-uring-debug-fsync-delay-ms 0
    }

    test {uring durable: the ring's eventfd wakes the event loop once per batch} {
        # Reaping the completions signals the eventfd again unless it is off
        # meanwhile: that second wake-up would find nothing.
        set wakeups0 [s aof_uring_wakeups]
        set batches0 [s aof_uring_completed_batches]
        for {set i 0} {$i < 200} {incr i} { r set wake$i $i }
        set batches [expr {[s aof_uring_completed_batches] - $batches0}]
        set wakeups [expr {[s aof_uring_wakeups] - $wakeups0}]
        assert_morethan_equal $batches 200
        assert_lessthan_equal $wakeups [expr {$batches + 10}]
    }

    test {uring durable: with two fdatasyncs in flight, a write arriving while one runs gets its own at once} {
        # c0's fdatasync is in flight (the knob delays each one 300 ms); c1's
        # write is written and fdatasync'ed without waiting for it, so c1 is
        # answered about one delay after its write, not two.
        r config set aof-uring-fsyncs-in-flight 2
        r config set aof-uring-debug-fsync-delay-ms 300
        set c0 [valkey_deferring_client]
        set c1 [valkey_deferring_client]
        $c0 set par0 v
        wait_for_condition 50 10 {[s aof_uring_inflight_batches] == 1} else {
            fail "c0's batch is not in flight"
        }
        set t0 [clock milliseconds]
        $c1 set par1 v
        wait_for_condition 50 10 {[s aof_uring_inflight_batches] == 2} else {
            fail "c1's batch did not go in flight beside c0's"
        }
        assert_equal OK [$c1 read]
        set ms [expr {[clock milliseconds] - $t0}]
        assert_equal OK [$c0 read]
        assert_morethan_equal $ms 250
        assert_lessthan $ms 550
        $c0 close
        $c1 close
        r config set aof-uring-debug-fsync-delay-ms 0
        r config set aof-uring-fsyncs-in-flight 1
    }

    test {uring durable: a write is answered only once durable; clean readers are not held} {
        r set clean v0
        r set hot old
        r config set aof-uring-debug-fsync-delay-ms 2000
        set writer [valkey_deferring_client]
        set hotreader [valkey_deferring_client]
        set other [valkey_client]
        set t0 [clock milliseconds]
        # SET, then a pipelined INCR: both execute at once and join one
        # batch (as under 'always'); neither reply leaves before it is durable.
        # One write(2), so that the server reads both at once.
        $writer write "SET hot new\r\nINCR pipelined\r\n"
        $writer flush
        wait_for_condition 100 10 {[s aof_uring_held_clients] >= 1} else {
            fail "writer was not held"
        }
        set gated0 [s aof_uring_gated_reads]
        $hotreader get hot
        $hotreader flush
        # A key nobody wrote is served at once.
        assert_equal v0 [$other get clean]
        assert_lessthan [elapsed_ms $t0] 1500
        # The reader of the just-written key is held too.
        wait_for_condition 100 10 {[s aof_uring_held_clients] >= 2} else {
            fail "reader of a dirty key was not held"
        }
        assert_morethan [s aof_uring_gated_reads] $gated0
        assert_equal OK [$writer read]
        assert_morethan_equal [elapsed_ms $t0] 1900
        assert_equal new [$hotreader read]
        assert_morethan_equal [elapsed_ms $t0] 1900
        # The INCR's write was in the same batch: one fsync, not two.
        assert_equal 1 [$writer read]
        assert_lessthan [elapsed_ms $t0] 3500
        r config set aof-uring-debug-fsync-delay-ms 0
        $writer close
        $hotreader close
        $other close
    }

    test {uring durable: a pipeline runs at once and pays one fsync per batch, not one per command} {
        set f0 [s aof_uring_fsync_count]
        set rd [valkey_deferring_client]
        set buf ""
        for {set i 0} {$i < 1000} {incr i} { append buf "SET pipe$i $i\r\n" }
        $rd write $buf
        $rd flush
        for {set i 0} {$i < 1000} {incr i} { assert_equal OK [$rd read] }
        $rd close
        # The server reads 16 KiB at a time: a few batches (1000 before).
        assert_lessthan [expr {[s aof_uring_fsync_count] - $f0}] 20
        assert_equal 999 [r get pipe999]
    }

    test {uring durable: MULTI/EXEC and scripts dirty the keys they write} {
        r config set aof-uring-debug-fsync-delay-ms 1500
        set writer [valkey_deferring_client]
        set other [valkey_client]
        set t0 [clock milliseconds]
        $writer eval {redis.call('set', KEYS[1], 'scripted')} 1 script-key
        $writer flush
        wait_for_condition 100 10 {[s aof_uring_held_clients] >= 1} else {
            fail "script caller was not held"
        }
        # The reader must not see the scripted write before it is durable.
        assert_equal scripted [$other get script-key]
        assert_morethan_equal [elapsed_ms $t0] 1400
        assert_equal {} [$writer read]
        r config set aof-uring-debug-fsync-delay-ms 0
        $writer close
        $other close
    }

    test {uring fast: replies before the fsync, back-pressure bounds the unsynced bytes} {
        r config set aof-uring-ack fast
        r config set aof-uring-debug-fsync-delay-ms 1500
        set t0 [clock milliseconds]
        r set fast-key 1
        assert_lessthan [elapsed_ms $t0] 1000
        assert_equal 1 [s aof_uring_inflight_batches]
        # Over the in-flight bound the flush waits for the batch in flight.
        r config set aof-uring-max-inflight-bytes 4096
        set bp0 [s aof_uring_backpressure_events]
        r set big1 [string repeat x 8192]
        r set big2 [string repeat y 8192]
        assert_morethan [s aof_uring_backpressure_events] $bp0
        r config set aof-uring-debug-fsync-delay-ms 0
        r config set aof-uring-max-inflight-bytes 4mb
        r config set aof-uring-ack durable
        wait_for_condition 100 50 {[s aof_uring_inflight_batches] == 0} else {
            fail "batch did not complete"
        }
        assert_equal [string repeat y 8192] [r get big2]
    }

    test {uring: after a rotation, durable -> fast -> posix switches append at the right offset} {
        # The INCR file opened by a rewrite has no O_APPEND: ring writes at
        # explicit offsets leave the file position at 0 for write(2).
        r bgrewriteaof
        waitForBgrewriteaof r
        for {set i 0} {$i < 50} {incr i} { r rpush rot durable-$i }
        r config set aof-uring-ack fast
        for {set i 0} {$i < 50} {incr i} { r rpush rot fast-$i }
        r config set appendfsync-engine posix
        for {set i 0} {$i < 50} {incr i} { r rpush rot posix-$i }
        r config set appendfsync-engine uring
        r config set aof-uring-ack durable
        for {set i 0} {$i < 50} {incr i} { r rpush rot durable2-$i }
        set digest [debug_digest]
        r debug loadaof
        assert_equal $digest [debug_digest]
        assert_equal 200 [r llen rot]
        assert_equal {durable-0 fast-0 posix-0 durable2-0} [list [r lindex rot 0] [r lindex rot 50] [r lindex rot 100] [r lindex rot 150]]
    }

    test {uring fast: acknowledged writes survive kill -9 while their fsync is still in flight} {
        r config set aof-uring-ack fast
        # No fdatasync completes before the kill.
        r config set aof-uring-debug-fsync-delay-ms 10000
        for {set i 0} {$i < 200} {incr i} { r incr killed-counter }
        assert_equal 1 [s aof_uring_inflight_batches]
        exec kill -9 [srv 0 pid]
        wait_for_condition 100 50 {![ping_server [srv 0 host] [srv 0 port]]} else {
            fail "server did not die"
        }
        restart_server 0 true false
        assert_equal 200 [r get killed-counter]
        assert_equal 1 [s aof_uring_active]
    }

    test {uring: engine switch at runtime drains and keeps the data} {
        r set before-switch 1
        r config set appendfsync-engine posix
        assert_equal 0 [s aof_uring_active]
        r set during-posix 2
        r config set appendfsync-engine uring
        assert_equal 1 [s aof_uring_active]
        r set after-switch 3
        r config set aof-uring-queue-depth 64
        assert_equal 64 [s aof_uring_queue_depth]
        assert_equal 1 [s aof_uring_active]
        set digest [debug_digest]
        r debug loadaof
        assert_equal $digest [debug_digest]
        assert_equal {1 2 3} [r mget before-switch during-posix after-switch]
    }
}
}
