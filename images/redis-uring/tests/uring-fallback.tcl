# io_uring AOF engine: fallback to the posix engine when io_uring is denied.
# The server runs under a real seccomp filter (tools/deny-io-uring.c, built by
# the Makefile and passed in $DENY_IO_URING) that makes io_uring_setup(2)
# fail with EPERM, as container runtimes' default profiles do.

tags {"uring external:skip"} {
    test {uring: io_uring denied by seccomp -> posix engine, reason reported, AOF works} {
        set launcher $::env(DENY_IO_URING)
        set dir [file normalize [tmpdir uring-fallback]]
        set port [find_available_port $::baseport $::portcount]
        set log $dir/valkey.log
        set pid [exec $launcher src/valkey-server --port $port --dir $dir --save "" \
                     --appendonly yes --appendfsync-engine uring --appendfsync always \
                     --enable-debug-command yes --logfile $log &]
        wait_for_condition 100 50 {[ping_server 127.0.0.1 $port]} else {
            catch {exec kill -9 $pid}
            fail "server under seccomp did not start"
        }
        set c [valkey 127.0.0.1 $port 0 $::tls]
        # The fallback happens at the first flush of the event loop.
        $c set k v
        set info [$c info persistence]
        assert_equal uring [getInfoProperty $info aof_engine]
        assert_equal 0 [getInfoProperty $info aof_uring_active]
        assert_equal io_uring_setup_eperm [getInfoProperty $info aof_uring_fallback_reason]
        for {set i 0} {$i < 100} {incr i} { $c incr n }
        set digest [$c debug digest]
        $c debug loadaof
        assert_equal $digest [$c debug digest]
        assert_equal 100 [$c get n]
        # Logged once, however many writes follow; switching the engine back
        # to uring retries once more and logs that retry's failure.
        set lines [llength [regexp -all -inline {io_uring AOF engine unavailable} [exec cat $log]]]
        assert_equal 1 $lines
        $c config set appendfsync-engine posix
        $c config set appendfsync-engine uring
        $c set k2 v2
        assert_equal 0 [getInfoProperty [$c info persistence] aof_uring_active]
        assert_equal 2 [llength [regexp -all -inline {io_uring AOF engine unavailable} [exec cat $log]]]
        $c close
        catch {exec kill $pid}
        wait_for_condition 100 50 {![ping_server 127.0.0.1 $port]} else {
            catch {exec kill -9 $pid}
        }
    }
}
