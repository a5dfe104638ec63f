package powercut

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
)

// subscriber holds what the keyspace-notification subscriber received; read
// it once wg is done.
type subscriber struct {
	seen  map[[2]int]bool // (writer, index) of every key a notification named
	bad   []string        // messages that are no notification of a workload key
	err   error           // why the connection ended
	ended time.Time
}

// subscribe enables keyspace notifications and PSUBSCRIBEs one connection
// to the workload's keys in db 0 and 1. It returns once the subscription is
// confirmed, so no write of the load can go unnotified.
func subscribe(srv *server.Server, wg *sync.WaitGroup) (*subscriber, error) {
	c, err := srv.Dial()
	if err != nil {
		return nil, err
	}
	if _, err := c.Do("CONFIG", "SET", "notify-keyspace-events", notifyEvents); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("enabling keyspace notifications: %w", err)
	}
	c.Send(append([]string{"PSUBSCRIBE"}, notifyPatterns...)...)
	if err := c.Flush(); err != nil {
		_ = c.Close()
		return nil, err
	}
	for range notifyPatterns {
		v, err := c.Receive()
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("PSUBSCRIBE: %w", err)
		}
		if msg, ok := v.([]any); !ok || len(msg) != 3 || msg[0] != "psubscribe" {
			_ = c.Close()
			return nil, fmt.Errorf("PSUBSCRIBE: unexpected reply %v", v)
		}
	}
	s := &subscriber{seen: map[[2]int]bool{}}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { _ = c.Close() }()
		for {
			v, err := c.Receive()
			if err != nil {
				s.err, s.ended = err, time.Now()
				return
			}
			_, k, _, ok := parseNotification(v)
			w, i, okKey := parseKey(k)
			if !ok || !okKey {
				s.bad = append(s.bad, fmt.Sprint(v))
				continue
			}
			s.seen[[2]int{w, i}] = true
		}
	}()
	return s, nil
}

// assign marks every notified key on its writer. A subscriber that lost its
// connection before the cut, a message that is not a notification of a
// workload key, or a notification of a key never sent fails the trial.
func (s *subscriber) assign(workers []*worker, cut time.Time) error {
	if s.ended.Before(cut) {
		return fmt.Errorf("notification subscriber disconnected before the cut: %w", s.err)
	}
	if len(s.bad) > 0 {
		return fmt.Errorf("%d unexpected messages on the notification subscriber, first: %s", len(s.bad), s.bad[0])
	}
	var unknown []string
	for wi := range s.seen {
		w, i := wi[0], wi[1]
		if w >= len(workers) || i > len(workers[w].acks) || (i == len(workers[w].acks) && !workers[w].inFlight) {
			unknown = append(unknown, key(w, i))
			continue
		}
		workers[w].notified[i] = true
	}
	if len(unknown) > 0 {
		return fmt.Errorf("notifications name %d keys never written, e.g. %s", len(unknown), strings.Join(unknown[:min(len(unknown), 5)], " "))
	}
	return nil
}
