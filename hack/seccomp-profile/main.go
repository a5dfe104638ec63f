// Command seccomp-profile writes the io_uring seccomp profile of uring pods:
// containerd's RuntimeDefault profile, taken from the pinned containerd module
// (go.mod beside this file) for a container with containerd's default
// capabilities, plus io_uring_setup, io_uring_enter and io_uring_register.
// Containerd >= 2.0 dropped those three from its default; a Localhost profile
// built this way differs from RuntimeDefault in nothing else.
//
//	go run . OUTPUT.json
//
// The profile depends on the architecture this runs on (amd64 here) and on the
// running kernel only through ptrace & co., which containerd allows from 4.8 on.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

var ioURing = []string{"io_uring_enter", "io_uring_register", "io_uring_setup"}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: seccomp-profile OUTPUT.json")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "seccomp-profile:", err)
		os.Exit(1)
	}
}

func run(output string) error {
	ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
	spec, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "runtime-default"})
	if err != nil {
		return err
	}
	profile := withIOURing(seccomp.DefaultProfile(spec))
	out, err := json.MarshalIndent(profile, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(output, append(out, '\n'), 0o644)
}

// withIOURing adds the io_uring system calls to the first unconditional allow
// rule, the same rule the runtime's own list lives in.
func withIOURing(p *specs.LinuxSeccomp) *specs.LinuxSeccomp {
	for i, rule := range p.Syscalls {
		if rule.Action == specs.ActAllow && len(rule.Args) == 0 {
			names := append(slices.Clone(rule.Names), ioURing...)
			slices.Sort(names)
			p.Syscalls[i].Names = slices.Compact(names)
			return p
		}
	}
	p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: ioURing, Action: specs.ActAllow})
	return p
}
