# aof-uring-direct-writes (src/aof_uring.c, "Direct writes"): in durable mode
# a batch that overwrites the preallocated zeros goes to the ring as one
# O_DIRECT write with RWF_DSYNC, padded with annotation lines to the device's
# direct-I/O block; everywhere else the write(2) + fdatasync path runs and
# INFO says why. The padding is part of the log: the loader, DEBUG LOADAOF and
# valkey-check-aof skip it, and a killed server's zeros after it are cut off
# without calling it an unfinished write.
source tests/support/aofmanifest.tcl

proc direct_info {r field} {
    return [getInfoProperty [$r info persistence] aof_uring_direct_$field]
}

proc incr_file_bytes {path} {
    set fp [open $path r]
    fconfigure $fp -translation binary
    set data [read $fp]
    close $fp
    return $data
}

# Writes until the preallocated region is ahead of the log (a fresh INCR
# file's first chunk is written by the preallocation thread) and a batch went
# out as a direct write.
proc direct_warm_up {r prefix} {
    set i 0
    set writes [direct_info $r writes]
    wait_for_condition 200 10 {
        [$r set $prefix[incr i] v] eq "OK" && [direct_info $r writes] > $writes
    } else {
        fail "no direct write: [$r info persistence]"
    }
    return $i
}

tags {"aof external:skip"} {
    set base {appendonly yes appendfsync-engine uring aof-uring-ack durable aof-uring-direct-writes yes
        aof-use-rdb-preamble no aof-preallocate-size 4mb auto-aof-rewrite-percentage 0}

    start_server [list overrides $base] {
        test "direct writes: durable batches over the preallocated zeros are O_DIRECT writes, padded to the block" {
            set n [direct_warm_up r k]
            set writes [direct_info r writes]
            set batches [getInfoProperty [r info persistence] aof_uring_submitted_batches]
            for {set j 0} {$j < 100} {incr j} { r set k[incr n] v }
            # One client: every SET is its own batch, and every one is direct.
            assert_equal [expr {$writes + 100}] [direct_info r writes]
            assert_equal [expr {$batches + 100}] [getInfoProperty [r info persistence] aof_uring_submitted_batches]
            assert_equal none [direct_info r declined_reason]
            set align [direct_info r align]
            assert {$align >= 512 && ($align & ($align - 1)) == 0}
            assert {[direct_info r padding_bytes] > 0}
            set ::direct_keys $n
        }

        test "direct writes: the padding is annotation lines; DEBUG LOADAOF and valkey-check-aof skip them" {
            set path [get_last_incr_aof_path r]
            r debug loadaof
            assert_equal $::direct_keys [r dbsize]
            # DEBUG LOADAOF cut the zeros off: the file is the log, a whole
            # number of blocks, ending in a padding line.
            set data [incr_file_bytes $path]
            assert_equal 0 [expr {[string length $data] % [direct_info r align]}]
            assert_match "*\r\n#.*.\r\n" $data
            assert_equal -1 [string first "\x00" $data]
            set dir [lindex [r config get dir] 1]
            set out [exec src/valkey-check-aof "$dir/appendonlydir/appendonly.aof.manifest"]
            assert_match "*is valid*" $out
        }

        test "direct writes: a killed server loads every acknowledged write, and its zeros are not an unfinished write" {
            set n [direct_warm_up r killed]
            set path [get_last_incr_aof_path r]
            catch {exec kill -9 [srv 0 pid]}
            wait_for_condition 50 100 {
                ![is_alive [srv 0 pid]]
            } else {
                fail "server did not die"
            }
            assert_equal "\x00" [string index [incr_file_bytes $path] end]
            restart_server 0 true false
            for {set j 1} {$j <= $n} {incr j} { assert_equal v [r get killed$j] }
            assert_equal [expr {$::direct_keys + $n}] [r dbsize]
            verify_log_message 0 "*ends in zero bytes after offset*" 0
            assert_equal 0 [count_log_message 0 "bytes of an unfinished write"]
        }

        test "direct writes: a log that does not end on a block is realigned by one padded write(2)" {
            r config set aof-uring-direct-writes no
            r set unaligned 1
            r config set aof-uring-direct-writes yes
            set declined [direct_info r declined]
            set writes [direct_info r writes]
            r set realigned 1
            assert_equal unaligned_tail [direct_info r declined_reason]
            assert_equal [expr {$declined + 1}] [direct_info r declined]
            r set direct-again 1
            assert_equal [expr {$writes + 1}] [direct_info r writes]
            assert_equal none [direct_info r declined_reason]
            r debug loadaof
            assert_equal 1 [r get realigned]
            assert_equal 1 [r get direct-again]
        }

        test "direct writes: BGREWRITEAOF moves them to the new INCR file and keeps no descriptor of the old one" {
            set old [get_last_incr_aof_path r]
            r bgrewriteaof
            waitForBgrewriteaof r
            assert {[get_last_incr_aof_path r] ne $old}
            direct_warm_up r rotated
            # The old INCR file is deleted by the rewrite's cleanup; no
            # descriptor may keep its blocks allocated.
            wait_for_condition 50 100 {
                ![file exists $old]
            } else {
                fail "old INCR file still there"
            }
            set fds [exec ls -l /proc/[srv 0 pid]/fd]
            assert_equal -1 [string first "(deleted)" $fds]
        }

        test "direct writes: no preallocation declines and INFO says why; fast mode and the option off never write direct" {
            set writes [direct_info r writes]
            r config set aof-preallocate no
            r set no-prealloc 1
            assert_equal past_preallocated [direct_info r declined_reason]
            r config set aof-preallocate yes
            # Fast mode acknowledges before the write: not a durable batch
            # declined, and no direct write.
            set declined [direct_info r declined]
            r config set aof-uring-ack fast
            r set fast 1
            assert_equal $declined [direct_info r declined]
            assert_equal $writes [direct_info r writes]
            r config set aof-uring-ack durable
            r config set aof-uring-direct-writes no
            for {set j 0} {$j < 20} {incr j} { r set off$j 1 }
            assert_equal $declined [direct_info r declined]
            assert_equal $writes [direct_info r writes]
            r config set aof-uring-direct-writes yes
            r debug loadaof
            assert_equal 1 [r get no-prealloc]
            assert_equal 1 [r get fast]
            assert_equal 1 [r get off19]
        }
    }

    start_server [list overrides [concat $base {aof-uring-fsyncs-in-flight 4}]] {
        test "direct writes: four in flight under concurrent clients, then kill -9: every acknowledged INCR is there" {
            direct_warm_up r warm
            set host [srv 0 host]
            set port [srv 0 port]
            exec src/valkey-benchmark -h $host -p $port --dbnum 9 -c 16 -n 20000 -t incr -q
            assert_equal 20000 [r get counter:__rand_int__]
            assert {[direct_info r writes] > 100}
            catch {exec kill -9 [srv 0 pid]}
            wait_for_condition 50 100 {
                ![is_alive [srv 0 pid]]
            } else {
                fail "server did not die"
            }
            restart_server 0 true false
            assert_equal 20000 [r get counter:__rand_int__]
        }
    }
}
