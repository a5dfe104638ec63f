# aof-preallocate (src/aof_prealloc.c): the INCR file is kept zero-written
# ahead of the log, the zeros are cut off wherever a file is closed or read
# back, and what a crash leaves (the zeros, a torn write before them) loads.
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
            verify_log_message 0 "*ends in 0 bytes of an unfinished write and zero bytes*" 0
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

# What a crash leaves in a preallocated file: the pages of the write that was
# not fdatasync'ed yet, whole or in part, then zeros.
set defaults { appendonly {yes} appendfilename {appendonly.aof} appenddirname {appendonlydir} auto-aof-rewrite-percentage {0}}
set server_path [tmpdir server.aof-prealloc-torn]
set aof_dirname "appendonlydir"
set aof_basename "appendonly.aof"
set aof_dirpath "$server_path/$aof_dirname"
set aof_file "$server_path/$aof_dirname/${aof_basename}.1$::incr_aof_suffix$::aof_format_suffix"
set aof_manifest_file "$server_path/$aof_dirname/$aof_basename$::manifest_suffix"

proc torn_aof {aof_dirpath aof_file aof_manifest_file tail} {
    file mkdir $aof_dirpath
    set fp [open $aof_file w]
    fconfigure $fp -translation binary
    puts -nonewline $fp "[formatCommand set foo hello][formatCommand incr n]$tail"
    close $fp
    set fp [open $aof_manifest_file w]
    puts -nonewline $fp "file appendonly.aof.1.incr.aof seq 1 type i\n"
    close $fp
}

tags {"aof external:skip"} {
    # A command cut inside its arguments by zeros.
    torn_aof $aof_dirpath $aof_file $aof_manifest_file "*3\r\n\$3\r\nset\r\n\$3\r\nbar\r\n\$5\r\nab[string repeat "\x00" 5000]"
    start_server_aof [list dir $server_path aof-load-truncated yes] {
        test "A torn write followed by zeros is a truncated tail, and its argument is never loaded" {
            set client [valkey [srv host] [srv port] 0 $::tls]
            wait_done_loading $client
            assert_equal hello [$client get foo]
            assert_equal 1 [$client get n]
            assert_equal 0 [$client exists bar]
            verify_log_message 0 "*ends in 28 bytes of an unfinished write and zero bytes*" 0
        }
    }

    # A torn write ending in non-zero bytes is not a zero tail: a format error.
    torn_aof $aof_dirpath $aof_file $aof_manifest_file "*3\r\n\$3\r\nset\r\n\$3\r\nbar\r\nxx[string repeat "\x00" 100]garbage"
    start_server_aof_ex [list dir $server_path aof-load-truncated yes] [list wait_ready false] {
        test "Garbage after the zeros stays a format error" {
            wait_for_log_messages 0 {"*Bad file format reading the append only file*"} 0 10 1000
        }
    }
}
