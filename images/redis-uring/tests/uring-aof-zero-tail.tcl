# A crash can leave an AOF whose last bytes are zeros: ext4 may commit a file
# size covering a page written back before the appends that filled it (an
# fdatasync concurrent with appends; the harness' uring-fast power cuts hit it
# about once in 20). patches/0008 treats zeros after the last complete command
# as a truncated tail, so aof-load-truncated decides; zeros followed by more
# data, or any other garbage, stay a format error. A preallocated file
# (aof-preallocate) ends in zeros after every crash, possibly after a torn
# write, which is cut off the same way (patch 0021).
source tests/support/aofmanifest.tcl
set defaults { appendonly {yes} appendfilename {appendonly.aof} appenddirname {appendonlydir} auto-aof-rewrite-percentage {0}}
set server_path [tmpdir server.aof-zero-tail]
set aof_dirname "appendonlydir"
set aof_basename "appendonly.aof"
set aof_dirpath "$server_path/$aof_dirname"
set aof_file "$server_path/$aof_dirname/${aof_basename}.1$::incr_aof_suffix$::aof_format_suffix"
set aof_manifest_file "$server_path/$aof_dirname/$aof_basename$::manifest_suffix"

# zero_tail_aof writes an incr AOF of three commands followed by tail, and its manifest.
proc zero_tail_aof {aof_dirpath aof_file aof_manifest_file tail} {
    file mkdir $aof_dirpath
    set fp [open $aof_file w]
    fconfigure $fp -translation binary
    puts -nonewline $fp "[formatCommand set foo hello][formatCommand incr n][formatCommand incr n]$tail"
    close $fp
    set fp [open $aof_manifest_file w]
    puts -nonewline $fp "file appendonly.aof.1.incr.aof seq 1 type i\n"
    close $fp
}

tags {"aof external:skip"} {
    zero_tail_aof $aof_dirpath $aof_file $aof_manifest_file [string repeat "\x00" 3000]
    # Test bodies run inside start_server_aof, which sees only its own names.
    set ::zero_tail_file $aof_file
    set ::zero_tail_size [file size $aof_file]

    start_server_aof [list dir $server_path aof-load-truncated yes] {
        test "Zero-filled AOF tail: the server starts with aof-load-truncated yes" {
            assert_equal 1 [is_alive [srv pid]]
            set client [valkey [srv host] [srv port] 0 $::tls]
            wait_done_loading $client
            assert_equal hello [$client get foo]
            assert_equal 2 [$client get n]
            verify_log_message 0 "*ends in zero bytes after offset*" 0
        }

        test "Zero-filled AOF tail: the zeros are truncated and new writes follow the last command" {
            assert_equal [expr {$::zero_tail_size - 3000}] [file size $::zero_tail_file]
            $client incr n
            $client debug loadaof
            assert_equal 3 [$client get n]
        }
    }

    zero_tail_aof $aof_dirpath $aof_file $aof_manifest_file [string repeat "\x00" 3000]
    start_server_aof_ex [list dir $server_path aof-load-truncated no] [list wait_ready false] {
        test "Zero-filled AOF tail: aof-load-truncated no refuses it" {
            wait_for_log_messages 0 {"*Bad file format reading the append only file*"} 0 10 1000
        }
    }

    zero_tail_aof $aof_dirpath $aof_file $aof_manifest_file "[string repeat "\x00" 100][formatCommand set foo bar]"
    start_server_aof_ex [list dir $server_path aof-load-truncated yes] [list wait_ready false] {
        test "Zeros followed by data are a format error, not a truncated tail" {
            wait_for_log_messages 0 {"*Bad file format reading the append only file*"} 0 10 1000
        }
    }

    # What a crash leaves in a preallocated file (aof-preallocate): the pages
    # of the write that was not fdatasync'ed yet, whole or in part, then zeros.
    # A command cut inside its arguments by zeros:
    zero_tail_aof $aof_dirpath $aof_file $aof_manifest_file "*3\r\n\$3\r\nset\r\n\$3\r\nbar\r\n\$5\r\nab[string repeat "\x00" 5000]"
    start_server_aof [list dir $server_path aof-load-truncated yes] {
        test "A torn write followed by zeros is a truncated tail, and its argument is never loaded" {
            set client [valkey [srv host] [srv port] 0 $::tls]
            wait_done_loading $client
            assert_equal hello [$client get foo]
            assert_equal 2 [$client get n]
            assert_equal 0 [$client exists bar]
            verify_log_message 0 "*ends in 28 bytes of an unfinished write and zero bytes*" 0
        }
    }

    # A write torn right after its first byte: a lone '*' before the zeros
    # (a power cut in the harness hit it; it was an unrecoverable read error).
    zero_tail_aof $aof_dirpath $aof_file $aof_manifest_file "*[string repeat "\x00" 4095]"
    start_server_aof [list dir $server_path aof-load-truncated yes] {
        test "A lone '*' followed by zeros is a truncated tail" {
            set client [valkey [srv host] [srv port] 0 $::tls]
            wait_done_loading $client
            assert_equal hello [$client get foo]
            assert_equal 2 [$client get n]
            verify_log_message 0 "*ends in 1 bytes of an unfinished write and zero bytes*" 0
        }
    }

    # A torn write whose zeros are followed by more data is not a zero tail.
    zero_tail_aof $aof_dirpath $aof_file $aof_manifest_file "*3\r\n\$3\r\nset\r\n\$3\r\nbar\r\nxx[string repeat "\x00" 100]garbage"
    start_server_aof_ex [list dir $server_path aof-load-truncated yes] [list wait_ready false] {
        test "Garbage after the zeros stays a format error" {
            wait_for_log_messages 0 {"*Bad file format reading the append only file*"} 0 10 1000
        }
    }
}
