# io_uring AOF engine, durable mode: nobody is told of, or sees, a write
# before it is durable, whatever path the write or the observation takes.
# Each test holds every batch back with the hidden knob
# aof-uring-debug-fsync-delay-ms and checks that the observer gets nothing
# before the delay is over (on the engine that keyed the gate on the command's
# key arguments and the replication offset, each of these was served at once).

set ::gate_delay 1000
# Replies that must wait for the delay may not arrive much before it ends.
set ::gate_min [expr {$::gate_delay - 150}]

proc elapsed_ms {t0} {
    expr {[clock milliseconds] - $t0}
}

proc gate_settle {} {
    wait_for_condition 500 10 {[s aof_uring_inflight_batches] == 0 && [s aof_uring_held_clients] == 0} else {
        fail "batches still in flight"
    }
}

# Hold every batch back from now on.
proc gate_hold {} {
    gate_settle
    r config set aof-uring-debug-fsync-delay-ms $::gate_delay
}

proc gate_release {} {
    r config set aof-uring-debug-fsync-delay-ms 0
    gate_settle
}

# $client read, asserting that the reply came no sooner than the delay after t0.
proc gate_read_late {client t0 what} {
    set reply [$client read]
    set ms [elapsed_ms $t0]
    if {$ms < $::gate_min} {
        fail "$what was served after $ms ms, before its write was durable ($::gate_delay ms)"
    }
    return $reply
}

tags {"uring external:skip"} {
start_server {overrides {appendonly yes appendfsync-engine uring aof-uring-ack durable}} {
    test {uring durable: writes with a TTL (argv rewritten for propagation) do not crash} {
        # SET EX is propagated as SET PXAT with an integer-encoded argument.
        r set ttl1 v EX 100
        r set ttl2 v PX 100000
        r set ttl3 v EXAT [expr {[clock seconds] + 100}]
        r set ttl4 v PXAT [expr {[clock milliseconds] + 100000}]
        r setex ttl5 100 v
        r psetex ttl6 100000 v
        r set ttl7 v EX 100 GET
        r getex ttl7 EX 200
        r expire ttl1 300
        r eval {return redis.call('set', KEYS[1], 'v', 'EX', 5)} 1 ttl8
        r multi
        r set ttl9 v EX 100
        r incr ttl10
        r exec
        assert_range [r ttl ttl1] 200 300
        assert_range [r ttl ttl8] 1 5
        assert_equal 1 [r exists ttl9]
        # The engine is still the one answering, and the data survives a reload.
        assert_equal 1 [s aof_uring_active]
        set digest [debug_digest]
        r debug loadaof
        assert_equal $digest [debug_digest]
    }

    test {uring durable: a script that propagates to the AOF only is acknowledged once durable} {
        gate_hold
        set w [valkey_deferring_client]
        set t0 [clock milliseconds]
        $w eval {server.set_repl(server.REPL_AOF); redis.call('set', KEYS[1], 'aof-only')} 1 aofonly
        gate_read_late $w $t0 "the AOF-only script's reply"
        $w close
        gate_release
        assert_equal aof-only [r get aofonly]
    }

    test {uring durable: MOVE and COPY ... DB hold readers of the target db} {
        r set mv-key moved
        r set cp-key copied
        gate_hold
        # Two writers: a held writer's pipelined commands wait as well.
        set w1 [valkey_deferring_client]
        set w2 [valkey_deferring_client]
        set obs1 [valkey_deferring_client]
        set obs2 [valkey_deferring_client]
        $obs1 select 10
        $obs1 read
        $obs2 select 11
        $obs2 read
        set t0 [clock milliseconds]
        $w1 move mv-key 10
        $w1 flush
        $w2 copy cp-key cp-key DB 11
        $w2 flush
        wait_for_condition 100 10 {[s aof_uring_held_clients] >= 2} else { fail "writers not held" }
        $obs1 get mv-key
        $obs1 flush
        $obs2 get cp-key
        $obs2 flush
        assert_equal moved [gate_read_late $obs1 $t0 "GET in MOVE's target db"]
        assert_equal copied [gate_read_late $obs2 $t0 "GET in COPY's target db"]
        assert_equal {1 1} [list [$w1 read] [$w2 read]]
        foreach c [list $w1 $w2 $obs1 $obs2] { $c close }
        gate_release
    }

    test {uring durable: SORT BY/GET patterns hold on the keys they read} {
        r del sort-list
        r rpush sort-list 1 2
        r mset w_1 1 w_2 2 o_1 a o_2 b
        gate_hold
        set w [valkey_deferring_client]
        set obs [valkey_deferring_client]
        set t0 [clock milliseconds]
        $w set o_2 unsynced
        $w flush
        wait_for_condition 100 10 {[s aof_uring_held_clients] >= 1} else { fail "writer not held" }
        # sort-list itself is clean: only the GET pattern reads o_2.
        $obs sort sort-list BY w_* GET o_*
        $obs flush
        assert_equal {a unsynced} [gate_read_late $obs $t0 "SORT ... GET o_*"]
        assert_equal OK [$w read]
        $w close
        $obs close
        gate_release
    }

    test {uring durable: SWAPDB and FLUSHDB hold readers of the dbs they changed} {
        r select 12
        r set swapped from-12
        r select 9
        gate_hold
        set w [valkey_deferring_client]
        set obs [valkey_deferring_client]
        $obs select 13
        $obs read
        set t0 [clock milliseconds]
        $w swapdb 12 13
        $w flush
        wait_for_condition 100 10 {[s aof_uring_held_clients] >= 1} else { fail "writer not held" }
        $obs get swapped
        $obs flush
        assert_equal from-12 [gate_read_late $obs $t0 "GET after SWAPDB"]
        assert_equal OK [$w read]
        gate_hold
        set t0 [clock milliseconds]
        $w select 13
        $w flushdb
        $w flush
        wait_for_condition 100 10 {[s aof_uring_held_clients] >= 1} else { fail "writer not held" }
        $obs exists swapped
        $obs flush
        assert_equal 0 [gate_read_late $obs $t0 "EXISTS after FLUSHDB"]
        assert_equal {OK OK} [list [$w read] [$w read]]
        $w close
        $obs close
        gate_release
    }

    test {uring durable: keyspace notifications reach subscribers once the write is durable} {
        r config set notify-keyspace-events KA
        set sub [valkey_deferring_client]
        $sub subscribe __keyspace@9__:notified
        $sub read
        gate_hold
        set w [valkey_deferring_client]
        set t0 [clock milliseconds]
        $w set notified 1
        $w flush
        set msg [gate_read_late $sub $t0 "the keyspace notification"]
        assert_equal {message __keyspace@9__:notified set} $msg
        assert_equal OK [$w read]
        assert_morethan [s aof_uring_gated_pushes] 0
        $w close
        $sub close
        r config set notify-keyspace-events ""
        gate_release
    }

    test {uring durable: client tracking invalidations wait for the write} {
        set sub [valkey_deferring_client]
        $sub client id
        set sub_id [$sub read]
        $sub subscribe __redis__:invalidate
        $sub read
        set tracker [valkey_client]
        $tracker client tracking on redirect $sub_id
        r set tracked old
        $tracker get tracked
        gate_hold
        set w [valkey_deferring_client]
        set t0 [clock milliseconds]
        $w set tracked new
        $w flush
        set msg [gate_read_late $sub $t0 "the tracking invalidation"]
        assert_equal {message __redis__:invalidate tracked} $msg
        assert_equal OK [$w read]
        foreach c [list $w $sub $tracker] { $c close }
        gate_release
    }

    test {uring durable: MONITOR shows a write once it is durable} {
        set mon [valkey_deferring_client]
        $mon monitor
        assert_equal OK [$mon read]
        gate_hold
        set w [valkey_deferring_client]
        set t0 [clock milliseconds]
        $w set monitored secret
        $w flush
        # MONITOR also shows the INFO calls of this test: skip to the SET.
        while {![string match {*"set" "monitored"*} [set line [$mon read]]]} {}
        if {[elapsed_ms $t0] < $::gate_min} {
            fail "MONITOR showed the SET after [elapsed_ms $t0] ms, before it was durable"
        }
        assert_match {*"set" "monitored" "secret"*} $line
        assert_equal OK [$w read]
        $w close
        $mon close
        gate_release
    }

    test {uring durable: a message published with a value read from a dirty key waits for it} {
        set sub [valkey_deferring_client]
        $sub subscribe relay
        $sub read
        r set relayed old
        gate_hold
        set w [valkey_deferring_client]
        set p [valkey_deferring_client]
        set t0 [clock milliseconds]
        $w set relayed fresh
        $w flush
        wait_for_condition 100 10 {[s aof_uring_held_clients] >= 1} else { fail "writer not held" }
        # The script reads the unsynced value and publishes it: neither its
        # caller nor the subscriber may see it before it is durable.
        $p eval {return redis.call('publish', 'relay', redis.call('get', KEYS[1]))} 1 relayed
        $p flush
        assert_equal {message relay fresh} [gate_read_late $sub $t0 "the published value"]
        assert_equal 1 [gate_read_late $p $t0 "the publisher's reply"]
        assert_equal OK [$w read]
        foreach c [list $w $p $sub] { $c close }
        gate_release
    }

    # An EXEC aborted by another client's write tells its client that the
    # write happened, as a read would: the nil reply waits for the write.
    foreach {what write} {SET {set watched new} FLUSHDB {flushdb}} {
        test "uring durable: EXEC aborted by a WATCHed key's $what waits for that write" {
            r set watched old
            set obs [valkey_deferring_client]
            foreach cmd {{watch watched} {multi} {get watched}} {
                $obs {*}$cmd
                $obs read
            }
            gate_hold
            set w [valkey_deferring_client]
            set t0 [clock milliseconds]
            $w {*}$write
            $w flush
            wait_for_condition 100 10 {[s aof_uring_held_clients] >= 1} else { fail "writer not held" }
            $obs exec
            $obs flush
            assert_equal {} [gate_read_late $obs $t0 "the EXEC aborted by $what"]
            assert_equal OK [$w read]
            $w close
            $obs close
            gate_release
        }
    }

    test {uring durable: read-only commands over the whole keyspace wait for every write} {
        gate_hold
        set w [valkey_deferring_client]
        set obs [valkey_deferring_client]
        set t0 [clock milliseconds]
        $w set keyless-check 1
        $w flush
        wait_for_condition 100 10 {[s aof_uring_held_clients] >= 1} else { fail "writer not held" }
        $obs dbsize
        $obs flush
        gate_read_late $obs $t0 "DBSIZE"
        assert_equal OK [$w read]
        $w close
        $obs close
        gate_release
    }

    test {uring durable: keyless commands that show the data wait for every write} {
        # MEMORY STATS counts keys, DEBUG DIGEST hashes them, FUNCTION LIST
        # lists libraries: none is flagged read-only, and each was served at
        # once on the engine whose rule was "read-only and keyless".
        foreach cmd {{memory stats} {debug digest} {function list}} {
            gate_hold
            set w [valkey_deferring_client]
            set obs [valkey_deferring_client]
            set t0 [clock milliseconds]
            $w set keyless-show 1
            $w flush
            wait_for_condition 100 10 {[s aof_uring_held_clients] >= 1} else { fail "writer not held" }
            $obs {*}$cmd
            $obs flush
            gate_read_late $obs $t0 [string toupper $cmd]
            assert_equal OK [$w read]
            $w close
            $obs close
            gate_release
        }
    }

    test {uring durable: a function library is not seen before its FUNCTION LOAD is durable} {
        # Functions are state the AOF carries besides keys.
        r function flush
        gate_hold
        set w [valkey_deferring_client]
        set t0 [clock milliseconds]
        $w function load {#!lua name=gatelib
server.register_function{function_name='gatefn', callback=function() return 'loaded' end, flags={'no-writes'}}}
        $w flush
        wait_for_condition 100 10 {[s aof_uring_held_clients] >= 1} else { fail "FUNCTION LOAD not held" }
        # FCALL and FCALL_RO without keys, and a second FUNCTION LOAD's error.
        set observers {}
        foreach cmd {{fcall gatefn 0} {fcall_ro gatefn 0} {function load {#!lua name=gatelib
server.register_function('other', function() return 1 end)}}} {
            set obs [valkey_deferring_client]
            $obs {*}$cmd
            $obs flush
            lappend observers $obs [lindex $cmd 0]
        }
        foreach {obs what} $observers {
            catch {gate_read_late $obs $t0 [string toupper $what]} reply
            if {[string match {*served after*} $reply]} { fail $reply }
            $obs close
        }
        assert_equal gatelib [$w read]
        $w close
        gate_release
        assert_equal loaded [r fcall gatefn 0]
        r function flush
    }

    test {uring durable: INFO keyspace counts only durable keys, and a monitoring scrape answers at once} {
        r select 13
        r flushdb
        r set durable-before 1
        gate_hold
        set w [valkey_deferring_client]
        $w select 13
        $w read
        set t0 [clock milliseconds]
        $w set held-key 1
        $w flush
        wait_for_condition 100 10 {[s aof_uring_held_clients] >= 1} else { fail "writer not held" }
        set info [r info keyspace]
        # The rest of an exporter's scrape answers at once too.
        r slowlog get 1
        r latency latest
        r client list
        set ms [elapsed_ms $t0]
        assert_match {*db13:keys=1,*} $info
        if {$ms >= $::gate_min} { fail "INFO keyspace and the exporter's other commands waited $ms ms for the disk" }
        assert_equal OK [$w read]
        $w close
        gate_release
        assert_match {*db13:keys=2,*} [r info keyspace]
        r flushdb
        r select 9
    }

    test {uring durable: after a fast -> durable switch, written but unsynced bytes are fdatasync'ed before they count} {
        # fast mode: the first SET's fdatasync is in flight (held 1 s); the
        # second SET is written and waits for the next one (group commit),
        # which durable mode with one fdatasync in flight (the default)
        # starts after it.
        r config set aof-uring-fsyncs-in-flight 1
        r config set aof-uring-ack fast
        gate_hold
        set f0 [s aof_uring_fsync_count]
        set t0 [clock milliseconds]
        r set unsynced-1 a
        r set unsynced-2 b
        r config set aof-uring-ack durable
        # WAITAOF may only count the local fsync once a second fdatasync (1 s
        # more) covered unsynced-2: the first one completed without it.
        assert_equal {1 0} [r waitaof 1 0 0]
        set ms [elapsed_ms $t0]
        assert_morethan_equal $ms [expr {2 * $::gate_delay - 150}]
        assert_morethan_equal [s aof_uring_fsync_count] [expr {$f0 + 2}]
        gate_release
    }

    test {uring durable: held output does not count against maxmemory (no eviction feedback loop)} {
        # Upstream's scenario (unit/maxmemory): evictions push invalidations
        # to tracking clients; held until the evictions' DELs are durable,
        # they must not make the next commands evict again.
        r flushall
        r config set maxmemory-policy allkeys-lru
        r config set maxmemory-eviction-tenacity 100
        set clients {}
        for {set j 0} {$j < 10} {incr j} {
            set rd [valkey_deferring_client]
            $rd HELLO 3
            $rd read
            $rd CLIENT TRACKING on
            $rd read
            lappend clients $rd
        }
        for {set j 0} {$j < 300} {incr j} {
            set key $j[string repeat x 1000]
            r set $key x
            foreach rd $clients {
                $rd get $key
                $rd read
            }
        }
        after 1100
        gate_hold
        r config set maxmemory [expr {[s used_memory] - 40000}]
        assert_range [r dbsize] 200 300
        assert_range [s evicted_keys] 10 50
        r config set maxmemory 0
        foreach rd $clients { $rd close }
        gate_release
    }

    test {uring durable: a client held longer than aof-uring-hold-timeout-ms is disconnected without its reply} {
        r config set aof-uring-hold-timeout-ms 300
        set timeouts0 [s aof_uring_hold_timeouts]
        r config set aof-uring-debug-fsync-delay-ms 3000
        set w [valkey_deferring_client]
        set t0 [clock milliseconds]
        $w set held-too-long 1
        $w flush
        catch {$w read} err
        assert_lessthan [elapsed_ms $t0] 2500
        assert_match {*I/O error*} $err
        assert_morethan [s aof_uring_hold_timeouts] $timeouts0
        verify_log_message 0 "*closing a client held * ms for durability*" 0
        $w close
        r config set aof-uring-hold-timeout-ms 10000
        gate_release
        # The write itself was executed and is durable now.
        assert_equal 1 [r get held-too-long]
    }
}

start_server {overrides {appendonly yes appendfsync-engine posix io-threads 2}} {
    test {uring durable: refused with io-threads > 1 (CONFIG SET)} {
        assert_error {*io-threads > 1*} {r config set appendfsync-engine uring}
        r config set aof-uring-ack fast
        r config set appendfsync-engine uring
        assert_equal 1 [s aof_uring_active]
        assert_error {*io-threads > 1*} {r config set aof-uring-ack durable}
        assert_equal fast [lindex [r config get aof-uring-ack] 1]
    }
}

test {uring durable: refused with io-threads > 1 (startup)} {
    catch {exec src/valkey-server --port 0 --appendonly yes --appendfsync-engine uring --io-threads 2} err
    assert_match {*FATAL CONFIG FILE ERROR*io-threads > 1*} $err
}
}
