package plugin

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

const (
	// recentEvents is how far back status looks for Warning events.
	recentEvents = time.Hour
	// maxEvents is how many of them it shows, newest first.
	maxEvents = 10
)

// Status is one instance on one screen: what its status and its Warning
// events hold, and nothing the plugin works out for itself beyond the
// topology's name. It is also the JSON and YAML of `status -o`.
type Status struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Topology is "single", "replicated" (spec.replicas above 1, with
	// Sentinels) or "cluster" (spec.cluster).
	Topology string `json:"topology"`
	// Stale is set when the status describes an older generation of the spec.
	Stale bool `json:"stale,omitempty"`

	Phase          v1alpha1.InstancePhase   `json:"phase,omitempty"`
	Ready          string                   `json:"ready,omitempty"`
	Mode           v1alpha1.PersistenceMode `json:"mode"`
	Durability     string                   `json:"durability,omitempty"`
	Engine         string                   `json:"engine,omitempty"`
	Uring          *UringState              `json:"uring,omitempty"`
	Endpoint       string                   `json:"endpoint,omitempty"`
	Image          string                   `json:"image,omitempty"`
	Node           string                   `json:"node,omitempty"`
	KernelVersion  string                   `json:"kernelVersion,omitempty"`
	Primary        string                   `json:"primary,omitempty"`
	Servers        []v1alpha1.ReplicaStatus `json:"servers,omitempty"`
	Shards         []v1alpha1.ShardStatus   `json:"shards,omitempty"`
	Storage        *v1alpha1.StorageStatus  `json:"storage,omitempty"`
	Recommendation string                   `json:"recommendation,omitempty"`
	// Users are spec.users; UsersApplied is the UsersReady condition's
	// status (True: every running server has them).
	Users        []User                 `json:"users,omitempty"`
	UsersApplied metav1.ConditionStatus `json:"usersApplied,omitempty"`
	TLS          *v1alpha1.TLSStatus    `json:"tls,omitempty"`
	// Backup is false when the instance has no spec.backup: it has no
	// store, so neither backups nor an archive.
	Backup     bool                       `json:"backup"`
	LastBackup *v1alpha1.LastBackupStatus `json:"lastBackup,omitempty"`
	// Switchover is the operator's answer to the last switchover asked for.
	Switchover *v1alpha1.SwitchoverStatus `json:"switchover,omitempty"`
	Archive    *v1alpha1.ArchiveStatus    `json:"archive,omitempty"`
	// Conditions are those that are not healthy: False, or Unknown, for all
	// but Degraded, which is healthy when False.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Events are the instance's Warning events of the last hour, newest first.
	Events []Event `json:"events,omitempty"`
}

// UringState is mode uring's UringActive condition: the io_uring engine
// runs, or why the server fell back to the posix engine.
type UringState struct {
	Active bool `json:"active"`
	// Reason and Message are the condition's while it is not True.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// User is an application user of spec.users.
type User struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
}

// Event is a Warning event of the instance.
type Event struct {
	Time    metav1.Time `json:"time"`
	Reason  string      `json:"reason"`
	Message string      `json:"message"`
	Count   int32       `json:"count,omitempty"`
}

func (r *root) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Show a RedisPersistence on one screen: topology, persistence, storage, backups, what is unhealthy",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, namespace, err := r.client()
			if err != nil {
				return err
			}
			status, err := readStatus(cmd.Context(), c, namespace, args[0], r.env.Clock.Now())
			if err != nil {
				return err
			}
			if printed, err := r.print(r.env.Out, status); printed {
				return err
			}
			return writeStatus(r.env.Out, status, r.env.Clock.Now())
		},
	}
}

// getInstance reads a RedisPersistence, with an error that names it and the
// namespace when it does not exist.
func getInstance(ctx context.Context, c client.Client, namespace, name string) (*v1alpha1.RedisPersistence, error) {
	rp := &v1alpha1.RedisPersistence{}
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, rp)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no RedisPersistence %q in namespace %q (kubectl get rp -n %s lists them)", name, namespace, namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the RedisPersistence %s/%s: %w", namespace, name, err)
	}
	return rp, nil
}

func readStatus(ctx context.Context, c client.Client, namespace, name string, now time.Time) (*Status, error) {
	rp, err := getInstance(ctx, c, namespace, name)
	if err != nil {
		return nil, err
	}
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(namespace), client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(fields.Set{
		"involvedObject.kind": "RedisPersistence",
		"involvedObject.name": name,
		"type":                corev1.EventTypeWarning,
	})}); err != nil {
		return nil, fmt.Errorf("listing the events of %s/%s: %w", namespace, name, err)
	}
	return statusOf(rp, events.Items, now), nil
}

// statusOf is the Status of rp with those of its events that are Warnings
// of the hour before now.
func statusOf(rp *v1alpha1.RedisPersistence, events []corev1.Event, now time.Time) *Status {
	s := &Status{
		Name:           rp.Name,
		Namespace:      rp.Namespace,
		Topology:       "single",
		Stale:          rp.Status.ObservedGeneration != 0 && rp.Status.ObservedGeneration < rp.Generation,
		Phase:          rp.Status.Phase,
		Ready:          rp.Status.Ready,
		Mode:           rp.Spec.Mode,
		Durability:     durabilityOf(rp),
		Engine:         rp.Status.Engine,
		Endpoint:       rp.Status.Endpoint,
		Image:          rp.Status.Image,
		Node:           rp.Status.Node,
		KernelVersion:  rp.Status.KernelVersion,
		Primary:        rp.Status.Primary,
		Servers:        rp.Status.Replicas,
		Shards:         rp.Status.Shards,
		Storage:        rp.Status.Storage,
		Recommendation: rp.Status.Recommendation,
		TLS:            rp.Status.TLS,
		Backup:         rp.Spec.Backup != nil,
		LastBackup:     rp.Status.LastBackup,
		Archive:        rp.Status.Archive,
		Switchover:     rp.Status.Switchover,
	}
	switch {
	case rp.Spec.Cluster != nil:
		s.Topology = "cluster"
	case rp.Spec.Replicas > 1:
		s.Topology = "replicated"
	}
	for _, u := range rp.Spec.Users {
		s.Users = append(s.Users, User{Name: u.Name, Enabled: u.Enabled == nil || *u.Enabled})
	}
	for _, c := range rp.Status.Conditions {
		if c.Type == v1alpha1.ConditionUsersReady {
			s.UsersApplied = c.Status
		}
		if c.Type == v1alpha1.ConditionUringActive {
			s.Uring = &UringState{Active: c.Status == metav1.ConditionTrue}
			if !s.Uring.Active {
				s.Uring.Reason, s.Uring.Message = c.Reason, c.Message
			}
		}
		healthy := metav1.ConditionTrue
		if c.Type == v1alpha1.ConditionDegraded {
			healthy = metav1.ConditionFalse
		}
		if c.Status != healthy {
			s.Conditions = append(s.Conditions, c)
		}
	}
	for _, e := range events {
		at := eventTime(e)
		if e.Type != corev1.EventTypeWarning || at.Time.Before(now.Add(-recentEvents)) {
			continue
		}
		s.Events = append(s.Events, Event{Time: at, Reason: e.Reason, Message: e.Message, Count: e.Count})
	}
	slices.SortStableFunc(s.Events, func(a, b Event) int { return b.Time.Compare(a.Time.Time) })
	if len(s.Events) > maxEvents {
		s.Events = s.Events[:maxEvents]
	}
	return s
}

// eventTime is when an event last happened.
func eventTime(e corev1.Event) metav1.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.NewTime(e.EventTime.Time)
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp
	}
	return e.CreationTimestamp
}

// durabilityOf is the spec's persistence options that decide what a crash
// loses, as a user writes them.
func durabilityOf(rp *v1alpha1.RedisPersistence) string {
	switch rp.Spec.Mode {
	case v1alpha1.ModeAOF:
		fsync := v1alpha1.FsyncEverySec
		if rp.Spec.AOF != nil && rp.Spec.AOF.Fsync != "" {
			fsync = rp.Spec.AOF.Fsync
		}
		return "fsync " + string(fsync)
	case v1alpha1.ModeUring:
		ack := v1alpha1.AckDurable
		if rp.Spec.Uring != nil && rp.Spec.Uring.Ack != "" {
			ack = rp.Spec.Uring.Ack
		}
		d := "ack " + string(ack)
		if rp.Spec.Uring != nil && rp.Spec.Uring.AckReplicas > 0 {
			d += fmt.Sprintf(", ackReplicas %d", rp.Spec.Uring.AckReplicas)
		}
		return d
	}
	return ""
}

// writeStatus writes s as the screen people read.
func writeStatus(w io.Writer, s *Status, now time.Time) error {
	// A buffer, and one write of it: the tab writers' writes cannot fail.
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	line := func(label, value string) {
		if value != "" {
			_, _ = fmt.Fprintf(tw, "%s\t%s\n", label, value)
		}
	}
	line("Name:", s.Namespace+"/"+s.Name)
	phase := cmp.Or(string(s.Phase), "(no status yet)")
	if s.Ready != "" {
		phase += ", " + s.Ready + " ready"
	}
	if s.Stale {
		phase += " (the status is of an earlier generation of the spec)"
	}
	line("Phase:", phase)
	line("Topology:", topologyLine(s))
	line("Mode:", strings.TrimSuffix(string(s.Mode)+", "+s.Durability, ", "))
	line("Engine:", engineLine(s))
	line("Endpoint:", s.Endpoint)
	line("Image:", s.Image)
	if s.Node != "" {
		line("Node:", s.Node+wrap(" (kernel ", s.KernelVersion, ")"))
	}
	line("Storage:", storageLine(s.Storage, now))
	line("Recommendation:", s.Recommendation)
	line("Users:", usersLine(s))
	line("TLS:", tlsLine(s.TLS, now))
	line("Last backup:", lastBackupLine(s, now))
	line("Archive:", archiveLine(s, now))
	line("Switchover:", switchoverLine(s.Switchover, now))
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(s.Servers) > 0 {
		buf.WriteString("\n")
		tw = tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "POD\tROLE\tOFFSET\tLAG\tLINK")
		for _, srv := range s.Servers {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", srv.Pod, cmp.Or(string(srv.Role), "?"), srv.Offset, srv.Lag, link(srv.LinkUp))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(s.Shards) > 0 {
		buf.WriteString("\n")
		tw = tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "SHARD\tSLOTS\tPOD\tROLE\tOFFSET\tLAG\tLINK")
		for _, shard := range s.Shards {
			slots := cmp.Or(shard.Slots, "none")
			if shard.SlotCount > 0 {
				slots += fmt.Sprintf(" (%d)", shard.SlotCount)
			}
			if len(shard.Servers) == 0 {
				_, _ = fmt.Fprintf(tw, "%d\t%s\t%s\tprimary\n", shard.Index, slots, shard.Primary)
			}
			for i, srv := range shard.Servers {
				index := ""
				if i == 0 {
					index = fmt.Sprint(shard.Index)
				} else {
					slots = ""
				}
				_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", index, slots, srv.Pod, cmp.Or(string(srv.Role), "?"), srv.Offset, srv.Lag, link(srv.LinkUp))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(s.Conditions) > 0 {
		buf.WriteString("\nConditions that are not healthy:\n")
		tw = tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
		for _, c := range s.Conditions {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, age(c.LastTransitionTime, now), c.Message)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(s.Events) > 0 {
		buf.WriteString("\nWarning events of the last hour:\n")
		tw = tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "AGE\tREASON\tCOUNT\tMESSAGE")
		for _, e := range s.Events {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", age(e.Time, now), e.Reason, max(e.Count, 1), e.Message)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func topologyLine(s *Status) string {
	switch s.Topology {
	case "cluster":
		return fmt.Sprintf("cluster of %d shards", len(s.Shards))
	case "replicated":
		t := fmt.Sprintf("replicated, %d servers, failover by Sentinel", len(s.Servers))
		if s.Primary != "" {
			t += ", primary " + s.Primary
		}
		return t
	}
	return "single server"
}

func engineLine(s *Status) string {
	engine := s.Engine
	if s.Uring == nil {
		return engine
	}
	if s.Uring.Active {
		return cmp.Or(engine, "uring") + ", io_uring active"
	}
	return cmp.Or(engine, "?") + ", io_uring not active (" + s.Uring.Reason + "): " + s.Uring.Message
}

func storageLine(st *v1alpha1.StorageStatus, now time.Time) string {
	if st == nil {
		return ""
	}
	var parts []string
	if st.Filesystem != "" {
		parts = append(parts, st.Filesystem)
	}
	if st.FsyncP50 != nil && st.FsyncP99 != nil {
		parts = append(parts, fmt.Sprintf("fsync p50 %s p99 %s", st.FsyncP50.Duration, st.FsyncP99.Duration))
	}
	if st.WriteCache != "" {
		parts = append(parts, fmt.Sprintf("write cache %q", st.WriteCache))
	}
	if st.ProbeError != "" {
		parts = append(parts, "not measured: "+st.ProbeError)
	}
	if st.MeasuredAt != nil {
		parts = append(parts, "measured "+age(*st.MeasuredAt, now)+" ago")
	}
	return strings.Join(parts, ", ")
}

func usersLine(s *Status) string {
	if len(s.Users) == 0 {
		return ""
	}
	names := make([]string, 0, len(s.Users))
	for _, u := range s.Users {
		name := u.Name
		if !u.Enabled {
			name += " (disabled)"
		}
		names = append(names, name)
	}
	line := strings.Join(names, ", ")
	switch s.UsersApplied {
	case metav1.ConditionTrue:
		return line + "; applied on every running server"
	case "":
		return line + "; not confirmed yet"
	}
	return line + "; not all applied (UsersReady " + string(s.UsersApplied) + ")"
}

func tlsLine(t *v1alpha1.TLSStatus, now time.Time) string {
	if t == nil {
		return ""
	}
	line := "certificate of the Secret " + t.SecretName
	if t.NotAfter != nil {
		line += ", expires " + rfc3339(*t.NotAfter)
		if t.NotAfter.After(now) {
			line += " (in " + duration.HumanDuration(t.NotAfter.Sub(now)) + ")"
		} else {
			line += " (expired)"
		}
	}
	return line
}

// switchoverLine is the last switchover asked for and the operator's answer.
func switchoverLine(sw *v1alpha1.SwitchoverStatus, now time.Time) string {
	if sw == nil {
		return ""
	}
	return fmt.Sprintf("to %s%s: %s (%s) %s ago: %s", sw.To, wrap(" asked at ", sw.RequestedAt, ""), sw.Result, sw.Reason,
		age(sw.FinishedAt, now), sw.Message)
}

func lastBackupLine(s *Status, now time.Time) string {
	if !s.Backup {
		return "none: no spec.backup"
	}
	b := s.LastBackup
	if b == nil {
		return "none completed yet"
	}
	line := fmt.Sprintf("%s, point %s (%s ago)", b.Name, rfc3339(b.Point), age(b.Point, now))
	if b.Size > 0 {
		line += ", " + byteSize(b.Size)
	}
	if b.Duration != nil {
		line += ", took " + b.Duration.Duration.String()
	}
	return line
}

func archiveLine(s *Status, now time.Time) string {
	a := s.Archive
	if a == nil {
		if s.Backup {
			return "none"
		}
		return ""
	}
	var line string
	if a.FirstRecoverableTime != nil && a.LastArchivedTime != nil {
		line = fmt.Sprintf("recoverable from %s to %s (%s ago)", rfc3339(*a.FirstRecoverableTime), rfc3339(*a.LastArchivedTime), age(*a.LastArchivedTime, now))
		if a.Timelines > 0 {
			line += fmt.Sprintf(", %d timelines", a.Timelines)
		}
	}
	if a.Message != "" {
		line = strings.TrimPrefix(line+"; "+a.Message, "; ")
	}
	return line
}

func link(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

func wrap(before, s, after string) string {
	if s == "" {
		return ""
	}
	return before + s + after
}

func rfc3339(t metav1.Time) string { return t.UTC().Format(time.RFC3339) }

// age is how long before now t was, as kubectl get writes it.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// byteSize is n in the binary unit that keeps it readable.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
