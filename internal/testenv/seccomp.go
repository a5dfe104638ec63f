package testenv

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// denyIOUringEnv makes a test binary that imports this package act as a
// launcher: it installs a seccomp filter that fails io_uring_setup with EPERM
// (as container runtimes' default profiles do) and execs the command in the
// variable's place. StartServer uses it to run the real server without io_uring.
const denyIOUringEnv = "TESTENV_EXEC_DENY_IO_URING"

func init() {
	if os.Getenv(denyIOUringEnv) == "" {
		return
	}
	if err := execDenyingIOUring(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "deny-io_uring launcher:", err)
		os.Exit(127)
	}
}

func execDenyingIOUring(argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("no command")
	}
	// The filter binds the calling thread; exec replaces the process with it.
	runtime.LockOSThread()
	const (
		auditArchX86_64 = 0xc000003e
		offsetNr        = 0 // seccomp_data.nr
		offsetArch      = 4 // seccomp_data.arch
		retErrnoEPERM   = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("the io_uring-denying filter is written for amd64, not %s", runtime.GOARCH)
	}
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offsetArch},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: auditArchX86_64},
		{Code: unix.BPF_RET | unix.BPF_K, K: retErrnoEPERM},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offsetNr},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_IO_URING_SETUP},
		{Code: unix.BPF_RET | unix.BPF_K, K: retErrnoEPERM},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("PR_SET_SECCOMP: %w", err)
	}
	return syscall.Exec(argv[0], argv, os.Environ())
}
