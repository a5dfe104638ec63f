# io_uring AOF engine: ordering of concurrent pipelined writers, and
# BGREWRITEAOF (INCR file rotation) under load, in both ack modes. The AOF is
# replayed with DEBUG LOADAOF and after a restart; the dataset must match.

tags {"uring external:skip"} {
foreach ack {durable fast} {
start_server [list overrides [list appendonly yes appendfsync-engine uring aof-uring-ack $ack]] {
    test "uring $ack: pipelined writers keep their order and the AOF replays them" {
        set nclients 6
        set per 200
        set clients {}
        for {set c 0} {$c < $nclients} {incr c} {
            set rd [valkey_deferring_client]
            lappend clients $rd
            for {set i 1} {$i <= $per} {incr i} {
                $rd rpush list:$c $i
                $rd incr counter
                $rd rpush all $c:$i
            }
            $rd flush
        }
        # Each client sees its own replies in order; INCR replies increase.
        for {set c 0} {$c < $nclients} {incr c} {
            set rd [lindex $clients $c]
            set last 0
            for {set i 1} {$i <= $per} {incr i} {
                assert_equal $i [$rd read]
                set v [$rd read]
                assert_morethan $v $last
                set last $v
                $rd read
            }
            $rd close
        }
        assert_equal [expr {$nclients * $per}] [r get counter]
        # Per-client order inside the interleaved list.
        set next [lrepeat $nclients 1]
        foreach e [r lrange all 0 -1] {
            lassign [split $e :] c i
            assert_equal [lindex $next $c] $i
            lset next $c [expr {$i + 1}]
        }
        set digest [debug_digest]
        r debug loadaof
        assert_equal $digest [debug_digest]
        assert_equal 0 [s aof_uring_write_errors]
    }

    test "uring $ack: BGREWRITEAOF under load rotates without losing or duplicating writes" {
        r flushall
        set load [valkey_deferring_client]
        set sent 0
        set rewrites 0
        set t0 [clock milliseconds]
        # Keep INCRs in flight while rewrites rotate the INCR file.
        while {$rewrites < 3} {
            for {set i 0} {$i < 10} {incr i} {
                $load incr c
                $load rpush l $sent
                incr sent
            }
            $load flush
            if {[s aof_rewrite_in_progress] == 0 && [s aof_rewrite_scheduled] == 0} {
                r bgrewriteaof
                incr rewrites
            }
            after 50
        }
        for {set i 0} {$i < 100} {incr i} {
            $load incr c
            $load rpush l $sent
            incr sent
        }
        $load flush
        for {set i 0} {$i < $sent} {incr i} {
            assert_equal [expr {$i + 1}] [$load read]
            assert_equal [expr {$i + 1}] [$load read]
        }
        $load close
        waitForBgrewriteaof r
        assert_equal $sent [r get c]
        assert_equal $sent [r llen l]
        set digest [debug_digest]
        r debug loadaof
        assert_equal $digest [debug_digest]
        assert_equal $sent [r get c]
        # And after a restart from the files on disk.
        restart_server 0 true false
        assert_equal $digest [debug_digest]
        assert_equal 1 [s aof_uring_active]
    }
}
}
}
