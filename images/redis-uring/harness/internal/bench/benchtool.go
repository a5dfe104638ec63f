package bench

import (
	"bufio"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
	"github.com/uring-redis/uring-redis-operator/internal/benchparse"
)

// ToolArgs are valkey-benchmark's arguments for one test.
type ToolArgs struct {
	Addr               string // host:port
	Clients, Requests  int
	Keyspace, DataSize int
	Pipeline           int
	Test               string
	TLS                *server.TLS // nil: plain TCP
}

func (a ToolArgs) argv() []string {
	host, port, _ := strings.Cut(a.Addr, ":")
	argv := []string{"-h", host, "-p", port, "-c", strconv.Itoa(a.Clients), "-n", strconv.Itoa(a.Requests),
		"-r", strconv.Itoa(a.Keyspace), "-d", strconv.Itoa(a.DataSize), "-P", strconv.Itoa(a.Pipeline), "-t", a.Test}
	if a.TLS != nil {
		argv = append(argv, "--tls", "--cacert", a.TLS.CA, "--cert", a.TLS.ClientCert, "--key", a.TLS.ClientKey)
	}
	return argv
}

// RunTool runs valkey-benchmark and parses its report.
func RunTool(path string, a ToolArgs) (benchparse.Report, string, error) {
	argv := a.argv()
	cmdline := path + " " + strings.Join(argv, " ")
	out, err := exec.Command(path, argv...).Output()
	if err != nil {
		return benchparse.Report{}, cmdline, fmt.Errorf("%s: %w: %s", cmdline, err, lastLines(string(out), 5))
	}
	r, err := benchparse.Parse(string(out))
	if err != nil {
		return r, cmdline, fmt.Errorf("%s: %w: %s", cmdline, err, lastLines(string(out), 5))
	}
	return r, cmdline, nil
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(s, "\r", "\n")))
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			lines = append(lines, t)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
