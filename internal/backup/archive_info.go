package backup

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"time"
)

// writtenLimit bounds how long a pass waits for the server to have
// written what it executed before the pass began (see serverState).
const writtenLimit = 3 * time.Second

// serverState reads the server's INFO. idle is why the archiver does
// nothing now: the server is a replica, or has no AOF. Only a primary's log
// is archived: a replica's repeats it, and an archive per replica would be
// several histories of one dataset; a replica promoted to primary archives
// from then on, in its volume's own timeline.
//
// through is an instant, by the server's clock (the one its #TS
// annotations follow), before which every write it executed is in its AOF
// file: the uring engine counts the AOF bytes it was fed and the prefix of
// them that is durable, so once the durable count reaches what was fed at
// the first INFO, the first INFO's time is such an instant; the posix
// engine writes its buffer before it acknowledges anything, so an INFO that
// finds the buffer empty is one. It is zero when the server did not get
// there within writtenLimit (the pass then ships what it finds but does not
// move the archive's end).
func (a *Archiver) serverState(ctx context.Context) (idle string, through time.Time, err error) {
	s, err := connect(ctx, a.Source)
	if err != nil {
		return "", time.Time{}, err
	}
	defer s.close()
	first, err := s.info("server", "replication", "persistence")
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%s: %w", a.Source.Addr, err)
	}
	switch {
	case first["role"] != "master":
		return fmt.Sprintf("the server is a replica (role:%s); only a primary's AOF is archived", first["role"]), time.Time{}, nil
	case first["aof_enabled"] != "1":
		return "the server's AOF is off (appendonly no): there is no log to archive", time.Time{}, nil
	}
	deadline := time.Now().Add(writtenLimit)
	for info := first; ; {
		if t, ok := writtenThrough(first, info); ok {
			return "", t, nil
		}
		if time.Now().After(deadline) {
			return "", time.Time{}, nil
		}
		select {
		case <-ctx.Done():
			return "", time.Time{}, context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
		if info, err = s.info("server", "persistence"); err != nil {
			return "", time.Time{}, fmt.Errorf("%s: %w", a.Source.Addr, err)
		}
	}
}

// writtenThrough is the instant serverState looks for, from the INFO
// fields of the pass's first reply and of the latest one.
func writtenThrough(first, latest map[string]string) (time.Time, bool) {
	if first["aof_engine"] == "uring" {
		fed, err1 := strconv.ParseInt(first["aof_uring_fed_bytes"], 10, 64)
		durable, err2 := strconv.ParseInt(latest["aof_uring_durable_bytes"], 10, 64)
		if err1 == nil && err2 == nil {
			return serverTime(first), durable >= fed
		}
	}
	return serverTime(latest), latest["aof_buffer_length"] == "0"
}

// serverTime is INFO's server_time_usec.
func serverTime(info map[string]string) time.Time {
	usec, _ := strconv.ParseInt(info["server_time_usec"], 10, 64)
	return time.UnixMicro(usec).UTC()
}

// infoSession is a signed-in connection that sends INFO.
type infoSession struct {
	*replicaSession
	close func()
}

// connect signs in to src for INFO, once: the archiver runs beside its
// server and reads a refusal as the server being gone (its last pass, after
// the server stopped with the pod), so it does not retry as dial does.
func connect(ctx context.Context, src Source) (infoSession, error) {
	conn, err := dialOnce(ctx, src)
	if err != nil {
		return infoSession{}, fmt.Errorf("connecting to %s: %w", src.Addr, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	s := infoSession{
		replicaSession: &replicaSession{conn: conn, r: bufio.NewReader(deadlineReader{conn})},
		close:          func() { stop(); _ = conn.Close() },
	}
	if err := s.signIn(src); err != nil {
		s.close()
		return infoSession{}, fmt.Errorf("%s: %w", src.Addr, err)
	}
	return s, nil
}
