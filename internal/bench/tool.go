package bench

import "strconv"

// ToolArgs are valkey-benchmark's arguments for one test.
type ToolArgs struct {
	Host string
	Port int
	// DB is the database the test SELECTs (--dbnum).
	DB                  int
	Clients, Requests   int
	Keyspace, ValueSize int
	Pipeline            int
	// User (--user, empty for the default user) and Password (-a:
	// valkey-benchmark reads no environment variable for it; only the
	// runner's own container sees its command line).
	User, Password string
	// TLS are the flags that reach a TLS server, nil for plain TCP.
	TLS []string
	// Test is a valkey-benchmark test name (-t), or empty with Command set.
	Test string
	// Command is a custom command line, e.g. GET untouched:__rand_int__.
	Command []string
	// Cluster sends each key to its shard (--cluster): Host:Port is a seed.
	Cluster bool
}

// Argv is valkey-benchmark's command line without the program name.
func (a ToolArgs) Argv() []string {
	argv := []string{"-h", a.Host, "-p", strconv.Itoa(a.Port), "-c", strconv.Itoa(a.Clients), "-n", strconv.Itoa(a.Requests),
		"-r", strconv.Itoa(a.Keyspace), "-d", strconv.Itoa(a.ValueSize), "-P", strconv.Itoa(a.Pipeline), "--dbnum", strconv.Itoa(a.DB)}
	if a.Password != "" {
		argv = append(argv, "-a", a.Password)
		if a.User != "" {
			argv = append(argv, "--user", a.User)
		}
	}
	argv = append(argv, a.TLS...)
	if a.Cluster {
		argv = append(argv, "--cluster")
	}
	if a.Test != "" {
		return append(argv, "-t", a.Test)
	}
	return append(argv, a.Command...)
}
