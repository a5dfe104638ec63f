# INFO aof_fsync_* (src/aof_fsync_stats.c): every fdatasync of the AOF, whichever
# engine and policy ran it, lands in one histogram, so the modes compare on the
# same fields.

proc fsync_info {field} {
    return [getInfoProperty [r info persistence] aof_fsync_$field]
}

tags {"aof external:skip"} {
    start_server {overrides {appendonly yes appendfsync always}} {
        test "aof_fsync_*: posix always times its inline fdatasync" {
            set before [fsync_info count]
            for {set i 0} {$i < 20} {incr i} { r set k$i v }
            set n [expr {[fsync_info count] - $before}]
            assert {$n >= 20}
            assert_equal [fsync_info count] [fsync_info usec_bucket_le_inf]
            assert {[fsync_info usec_sum] >= [fsync_info count]}
            assert {[fsync_info usec_p50] > 0 && [fsync_info usec_p50] <= [fsync_info usec_max]}
        }

        test "aof_fsync_*: everysec times its background fdatasync" {
            r config set appendfsync everysec
            set before [fsync_info count]
            r set everysec 1
            wait_for_condition 50 100 {
                [fsync_info count] > $before
            } else {
                fail "no background fdatasync counted: [r info persistence]"
            }
        }

        test "aof_fsync_*: the io_uring engine's batches count there as well" {
            r config set appendfsync always
            r config set appendfsync-engine uring
            if {[getInfoProperty [r info persistence] aof_uring_active] != 1} {
                puts "skipped: the io_uring engine is not active here ([getInfoProperty [r info persistence] aof_uring_fallback_reason])"
            } else {
                set before [fsync_info count]
                set ubefore [getInfoProperty [r info persistence] aof_uring_fsync_count]
                for {set i 0} {$i < 10} {incr i} { r set u$i v }
                set n [expr {[fsync_info count] - $before}]
                set un [expr {[getInfoProperty [r info persistence] aof_uring_fsync_count] - $ubefore}]
                assert {$un >= 10}
                assert_equal $un $n
            }
            r config set appendfsync-engine posix
        }
    }
}
