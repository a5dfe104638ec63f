# io-uring-replies: a pass's client replies go out as io_uring sends in one
# submission (src/reply_uring.c). What upstream's write path guarantees must
# hold: every byte in order, a client that cannot take its reply at once gets
# the rest through the writable handler, a client that goes away mid-reply is
# freed, and where io_uring is denied the replies still go out.

proc replies_info {r field} {
    return [getInfoProperty [$r info stats] $field]
}

tags {"uring external:skip"} {
    start_server {overrides {io-uring-replies yes}} {
        test {io-uring-replies: on, and the replies of one pass share a submission} {
            assert_equal 1 [replies_info r io_uring_replies]
            assert_equal none [replies_info r io_uring_replies_fallback_reason]
            set batches0 [replies_info r io_uring_replies_batches]
            set sends0 [replies_info r io_uring_replies_sends]
            set clients {}
            for {set i 0} {$i < 50} {incr i} { lappend clients [valkey_deferring_client] }
            for {set round 0} {$round < 20} {incr round} {
                foreach c $clients { $c incr counter }
                foreach c $clients { $c read }
            }
            foreach c $clients { $c close }
            assert_equal 1000 [r get counter]
            set batches [expr {[replies_info r io_uring_replies_batches] - $batches0}]
            set sends [expr {[replies_info r io_uring_replies_sends] - $sends0}]
            assert_morethan_equal $sends 1000
            # 50 clients waiting on each other's replies: some passes serve several.
            assert_lessthan $batches $sends
        }

        test {io-uring-replies: a reply larger than the socket takes goes out whole, the rest by the write handler} {
            r set big [string repeat x 20000000]
            set short0 [expr {[replies_info r io_uring_replies_short_sends] + [replies_info r io_uring_replies_eagain]}]
            set rd [valkey_deferring_client]
            $rd get big
            $rd get counter
            # The reader sleeps while the server's send fills the socket.
            after 200
            assert_equal 20000000 [string length [$rd read]]
            assert_equal 1000 [$rd read]
            $rd close
            set short [expr {[replies_info r io_uring_replies_short_sends] + [replies_info r io_uring_replies_eagain]}]
            assert_morethan $short $short0
        }

        test {io-uring-replies: pipelined replies keep their order} {
            set rd [valkey_deferring_client]
            for {set i 0} {$i < 200} {incr i} { $rd set key:$i [string repeat $i 1000] }
            for {set i 0} {$i < 200} {incr i} { $rd get key:$i }
            for {set i 0} {$i < 200} {incr i} { assert_equal OK [$rd read] }
            for {set i 0} {$i < 200} {incr i} { assert_equal [string repeat $i 1000] [$rd read] }
            $rd close
        }

        test {io-uring-replies: a client that leaves in the middle of its replies is freed, the others served} {
            set before 1 ;# r
            for {set n 0} {$n < 5} {incr n} {
                set rd [valkey_deferring_client]
                for {set i 0} {$i < 20} {incr i} { $rd get big }
                $rd flush
                $rd close
            }
            wait_for_condition 100 50 {[s connected_clients] == $before} else {
                fail "clients that left mid-reply were not freed: [s connected_clients] connected, $before before"
            }
            assert_equal PONG [r ping]
            assert_equal 1000 [r get counter]
        }

        test {io-uring-replies: switched off and on at runtime} {
            r config set io-uring-replies no
            assert_equal 0 [replies_info r io_uring_replies]
            assert_equal disabled [replies_info r io_uring_replies_fallback_reason]
            set sends [replies_info r io_uring_replies_sends]
            assert_equal 1000 [r get counter]
            assert_equal $sends [replies_info r io_uring_replies_sends]
            r config set io-uring-replies yes
            assert_equal 1 [replies_info r io_uring_replies]
            assert_equal 1000 [r get counter]
            assert_morethan [replies_info r io_uring_replies_sends] $sends
        }
    }

    test {io-uring-replies: io_uring denied by seccomp -> write(2), reason reported} {
        set launcher $::env(DENY_IO_URING)
        set dir [file normalize [tmpdir uring-replies-denied]]
        set port [find_available_port $::baseport $::portcount]
        set log $dir/valkey.log
        set pid [exec $launcher src/valkey-server --port $port --dir $dir --save "" \
                     --io-uring-replies yes --logfile $log &]
        wait_for_condition 100 50 {[ping_server 127.0.0.1 $port]} else {
            catch {exec kill -9 $pid}
            fail "server under seccomp did not start"
        }
        set c [valkey 127.0.0.1 $port 0 $::tls]
        $c set k [string repeat v 100000]
        assert_equal 100000 [string length [$c get k]]
        assert_equal 0 [replies_info $c io_uring_replies]
        assert_match {io_uring_setup: *} [replies_info $c io_uring_replies_fallback_reason]
        assert_equal yes [lindex [$c config get io-uring-replies] 1]
        assert_match {*io-uring-replies: no ring*} [exec cat $log]
        $c close
        catch {exec kill $pid}
        wait_for_condition 100 50 {![ping_server 127.0.0.1 $port]} else {
            catch {exec kill -9 $pid}
        }
    }
}
