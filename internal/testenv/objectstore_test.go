package testenv

import (
	"net"
	"strconv"
	"testing"
)

// A port given to weed that another process took first makes weed exit;
// the object store starts again on other ports and serves.
func TestObjectStoreStartsAgainWhenAPortIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	calls := 0
	choosePorts = func(t *testing.T, n int) []string {
		calls++
		ports := freePorts(t, n)
		if calls == 1 {
			ports[2] = strconv.Itoa(taken.Addr().(*net.TCPAddr).Port) // the volume server's
		}
		return ports
	}
	defer func() { choosePorts = freePorts }()
	s := StartObjectStore(t)
	if calls != 2 {
		t.Errorf("the ports were chosen %d times, want 2: once, and again after the taken one", calls)
	}
	if s.Endpoint == "" {
		t.Error("no endpoint")
	}
}
