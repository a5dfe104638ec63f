# aof-preallocate (src/aof_prealloc.c): the INCR file is kept zero-written
# ahead of the log, the zeros are cut off wherever a file is closed or read
# back, and a killed server's zeros load (a torn write before them:
# uring-aof-zero-tail.tcl).
source tests/support/aofmanifest.tcl

# The INCR file's last byte: a clean file ends in the last command's "\n".
proc last_byte {path} {
    set fp [open $path r]
    fconfigure $fp -translation binary
    seek $fp -1 end
    set b [read $fp 1]
    close $fp
    return $b
}

proc prealloc_info {r field} {
    return [getInfoProperty [$r info persistence] aof_prealloc_$field]
}

tags {"aof external:skip"} {
    start_server {overrides {appendonly yes aof-preallocate-size 4mb aof-use-rdb-preamble no}} {
        test "aof-preallocate: the INCR file is zero-written ahead of the log" {
            for {set i 0} {$i < 100} {incr i} { r set k$i v$i }
            wait_for_condition 100 20 {
                [prealloc_info r bytes_ahead] >= 2*1024*1024
            } else {
                fail "no region ahead: [r info persistence]"
            }
            assert_equal 1 [prealloc_info r active]
            assert_equal 0 [prealloc_info r errors]
            set path [get_last_incr_aof_path r]
            assert {[file size $path] >= 4*1024*1024}
            assert_equal "\x00" [last_byte $path]
        }

        test "aof-preallocate: DEBUG LOADAOF reads the log, not the zeros" {
            set trims [prealloc_info r trims]
            r debug loadaof
            assert_equal v99 [r get k99]
            assert_equal 100 [r dbsize]
            assert_equal [expr {$trims + 1}] [prealloc_info r trims]
            assert_equal "\n" [last_byte [get_last_incr_aof_path r]]
        }

        test "aof-preallocate: BGREWRITEAOF cuts the zeros off before the manifest moves on" {
            r set after-load 1
            wait_for_condition 100 20 {
                [prealloc_info r bytes_ahead] > 0
            } else {
                fail "no region ahead after the reload"
            }
            set old [get_last_incr_aof_path r]
            set trims [prealloc_info r trims]
            r config set aof-disable-auto-gc yes
            r bgrewriteaof
            waitForBgrewriteaof r
            assert_equal [expr {$trims + 1}] [prealloc_info r trims]
            assert_equal "\n" [last_byte $old]
            r config set aof-disable-auto-gc no
        }

        test "aof-preallocate: a clean shutdown leaves the file ending with the log" {
            r set last 1
            wait_for_condition 100 20 {
                [prealloc_info r bytes_ahead] > 0
            } else {
                fail "no region ahead of the new INCR file"
            }
            set path [get_last_incr_aof_path r]
            restart_server 0 true false
            assert_equal "\n" [last_byte $path]
            assert_equal 1 [r get last]
            assert_equal v0 [r get k0]
        }

        test "aof-preallocate: a killed server leaves zeros; valkey-check-aof passes and the server loads them away" {
            r set killed 1
            wait_for_condition 100 20 {
                [prealloc_info r bytes_ahead] > 0
            } else {
                fail "no region ahead"
            }
            set path [get_last_incr_aof_path r]
            set dir [lindex [r config get dir] 1]
            set manifest "$dir/appendonlydir/appendonly.aof.manifest"
            catch {exec kill -9 [srv 0 pid]}
            wait_for_condition 50 100 {
                ![is_alive [srv 0 pid]]
            } else {
                fail "server did not die"
            }
            assert_equal "\x00" [last_byte $path]
            set out [exec src/valkey-check-aof $manifest]
            assert_match "*zero bytes after offset*preallocated*" $out
            assert_match "*is valid*" $out
            restart_server 0 true false
            assert_equal 1 [r get killed]
            verify_log_message 0 "*ends in zero bytes after offset*" 0
        }

        test "aof-preallocate no: the file is the log and nothing else" {
            r config set aof-preallocate no
            r bgrewriteaof
            waitForBgrewriteaof r
            for {set i 0} {$i < 10} {incr i} { r set n$i $i }
            assert_equal 0 [prealloc_info r active]
            assert_equal "\n" [last_byte [get_last_incr_aof_path r]]
            r config set aof-preallocate yes
        }

        test "aof-preallocate is not in effect with aof-load-truncated no, and says so" {
            r config set aof-load-truncated no
            r bgrewriteaof
            waitForBgrewriteaof r
            r set x 1
            assert_equal 0 [prealloc_info r active]
            assert_equal "\n" [last_byte [get_last_incr_aof_path r]]
            verify_log_message 0 "*aof-preallocate is not in effect while aof-load-truncated is no*" 0
            r config set aof-load-truncated yes
            r set y 1
            assert_equal 1 [prealloc_info r active]
        }
    }
}
