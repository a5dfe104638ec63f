# A replica with the AOF on (the product's configuration) through a
# dual-channel sync. After the RDB loads, the replica applies the replication
# stream it buffered meanwhile and serves events while doing so; a REPLICAOF
# NO ONE served then restarts the AOF (replicationUnsetPrimary), and the sync's
# own restart afterwards asserted 'aof_state == AOF_OFF' and crashed the
# server (patch 0012). Found by upstream's integration/dual-channel-replication
# run with the AOF on, where it depends on timing; here the RDB load is slowed
# and the buffered stream made large so that the window is always hit.

tags {"uring repl external:skip"} {
start_server {overrides {repl-diskless-sync yes repl-diskless-sync-delay 0 dual-channel-replication-enabled yes}} {
    set primary [srv 0 client]
    set primary_host [srv 0 host]
    set primary_port [srv 0 port]
    $primary debug populate 20000 key 10

    start_server {overrides {appendonly yes appendfsync-engine uring aof-uring-ack durable dual-channel-replication-enabled yes}} {
        set replica [srv 0 client]
        set replica_log [srv 0 stdout]

        test {uring: REPLICAOF NO ONE while a dual-channel sync applies its buffered stream keeps the AOF (no crash)} {
            # 20000 keys x 200 us: the RDB load takes about 4 s; events are
            # served every 1 KiB of the buffered stream (and 100 ms).
            $replica config set key-load-delay 200
            $replica config set loading-process-events-interval-bytes 1024
            set loglines [count_log_lines 0]
            $replica replicaof $primary_host $primary_port
            wait_for_condition 500 10 {[s 0 loading] == 1} else { fail "the replica did not start loading" }
            # While it loads, the primary takes writes the replica buffers
            # on its main channel: about 0.5 s of stream to apply afterwards.
            exec src/valkey-benchmark -h $primary_host -p $primary_port -n 400000 -P 64 -r 200000 -t set -q
            assert_equal 1 [s 0 loading]
            # REPLICAOF NO ONE is refused with -LOADING until the load ends;
            # the first one served lands while the buffered stream is applied.
            set served 0
            for {set i 0} {$i < 3000 && !$served} {incr i} {
                if {[catch {$replica replicaof no one} err]} {
                    if {![string match "*LOADING*" $err]} { fail "REPLICAOF NO ONE: $err" }
                    after 2
                } else {
                    set served 1
                }
            }
            assert_equal 1 $served
            wait_for_log_messages 0 {"*Failed to stream local replication buffer*"} $loglines 100 50
            # Still alive, a primary, with the AOF on and one rewrite to turn it on.
            assert_equal PONG [$replica ping]
            assert_match "*role:master*" [$replica info replication]
            wait_for_condition 500 10 {[s 0 aof_rewrite_in_progress] == 0 && [s 0 aof_enabled] == 1} else {
                fail "the AOF did not come back on"
            }
            assert_equal ok [s 0 aof_last_bgrewrite_status]
            $replica config set key-load-delay 0
        }
    }
}
}
