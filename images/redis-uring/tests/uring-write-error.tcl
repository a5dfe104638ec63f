# io_uring AOF engine: an AOF write error follows upstream's everysec contract
# in both ack modes (the config says 'appendfsync always', which upstream
# answers with exit(1)): aof_last_write_status goes to err, writes are refused
# with MISCONF, reads are served, and writes resume once the file can grow.
# The error is real: the server runs with RLIMIT_FSIZE (SIGXFSZ ignored, so
# write(2) and the ring's writes fail with EFBIG, after a short write) and the
# limit is lifted with prlimit --pid. The harness' diskfull check does the same
# on a full ext4.

proc uring_start_limited {dir port mode fsize} {
    set script {trap '' XFSZ; exec "$@"}
    return [exec sh -c $script sh prlimit --fsize=$fsize:unlimited \
                src/valkey-server --port $port --dir $dir --save "" --appendonly yes \
                --appendfsync always --appendfsync-engine uring --aof-uring-ack $mode \
                --enable-debug-command yes --logfile $dir/valkey.log &]
}

tags {"uring external:skip"} {
    foreach mode {fast durable} {
        test "uring $mode: AOF write error -> writes refused, reads served, writes resume, AOF intact" {
            set dir [file normalize [tmpdir uring-write-error]]
            set port [find_available_port $::baseport $::portcount]
            set pid [uring_start_limited $dir $port $mode 262144]
            wait_for_condition 100 50 {[ping_server 127.0.0.1 $port]} else {
                catch {exec kill -9 $pid}
                fail "server with RLIMIT_FSIZE did not start"
            }
            try {
                set c [valkey 127.0.0.1 $port 0 $::tls]
                assert_equal 1 [getInfoProperty [$c info persistence] aof_uring_active]
                for {set i 0} {$i < 10} {incr i} { $c set small$i $i }

                # One write larger than the limit: it fails (after a short write)
                # whichever path writes it.
                set w [valkey 127.0.0.1 $port 1 $::tls]
                $w set big [string repeat x 300000]
                $w flush
                wait_for_condition 100 50 {
                    [getInfoProperty [$c info persistence] aof_last_write_status] eq "err"
                } else {
                    fail "the oversized write did not set aof_last_write_status:err"
                }
                assert_error {MISCONF*} {$c set refused 1}
                # Reads are served (upstream refuses PING too while writes are
                # refused).
                assert_equal 3 [$c get small3]

                exec prlimit --pid $pid --fsize=unlimited:unlimited
                wait_for_condition 100 50 {
                    ![catch {$c set resumed 1}]
                } else {
                    fail "writes still refused after the file size limit was lifted"
                }
                # fast acknowledged the write at submission, durable held it until
                # it was on disk; either way it is answered OK and is in the AOF.
                assert_equal OK [$w read]
                $c debug loadaof
                assert_equal 300000 [$c strlen big]
                assert_equal 9 [$c get small9]
                assert_equal 1 [$c get resumed]
                assert_equal {} [$c get refused]
                $w close
                $c close
            } finally {
                catch {exec kill $pid}
                wait_for_condition 100 50 {![ping_server 127.0.0.1 $port]} else {
                    catch {exec kill -9 $pid}
                }
            }
        }
    }
}
