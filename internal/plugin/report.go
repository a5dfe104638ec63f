package plugin

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// A report is what a bug report about one instance needs, in one tarball
// a user can attach without reading it first: the instance and every object
// of it, the events about them, its pods' and the operator's logs, its
// servers' and Sentinels' INFO (best effort: a pod that does not answer is
// named in README.txt, and the report completes without it). Nothing
// secret leaves the cluster in it:
//
//   - a Secret's values are replaced by their length; its
//     last-applied-configuration annotation (which holds them) is dropped;
//   - every value of the Secrets the instance owns or its spec names is cut
//     out of every file, wherever it appears (a password in a log line, an
//     environment variable, a ConfigMap), base64 forms included;
//   - in server and Sentinel configuration text, the values of requirepass,
//     masterauth, primaryauth, sentinel auth-pass and the passwords and
//     hashes of ACL user lines are cut out, in case they came from a Secret
//     the plugin could not read;
//   - in INFO, the value of any field whose name says it is secret, unless
//     it is a count (redactInfo).
//
// The report says, in its README.txt, what it holds, what it could not read
// and why (a user without get on Secrets or pods/log), and what it cut.

// reportLogLines is how much of each container's log a report keeps.
const reportLogLines = int64(2000)

// operatorSelector finds the operator's pods, in any namespace.
const operatorSelector = "app.kubernetes.io/name=uring-redis-operator"

// ReportName is the file `report` writes at now when -f is not given.
func ReportName(instance string, now time.Time) string {
	return "report-" + instance + "-" + now.UTC().Format("20060102150405") + ".tar.gz"
}

func (r *root) reportCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "report NAME [-f FILE]",
		Short: "Write a tarball for a bug report: the instance, its objects, events and logs, secrets cut out",
		Long: "report writes a gzipped tarball with the RedisPersistence NAME and every object it owns\n" +
			"(StatefulSets, pods, Services, ConfigMaps, Secrets without their values, claims, Jobs, PDBs,\n" +
			"NetworkPolicies), its RedisBackups, the events about them, the last 2000 lines of each of its\n" +
			"containers' logs and of the operator's, and the INFO of each of its servers and Sentinels (read\n" +
			"with valkey-cli in the pod, as cli runs it). Every value of the Secrets the instance owns or\n" +
			"names is cut out of every file, and so are the passwords of server configuration lines.\n" +
			"README.txt in the tarball lists what it holds and what could not be read.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, config, namespace, err := r.clients()
			if err != nil {
				return err
			}
			clientset, err := kubernetes.NewForConfig(config)
			if err != nil {
				return err
			}
			now := r.env.Clock.Now()
			if file == "" {
				file = ReportName(args[0], now)
			}
			rep, err := collectReport(cmd.Context(), c, clientset, config, namespace, args[0])
			if err != nil {
				return err
			}
			data, err := rep.tarball(now)
			if err != nil {
				return err
			}
			if err := os.WriteFile(file, data, 0o600); err != nil {
				return err
			}
			_, _ = fmt.Fprintf(r.env.Out, "%s: %d files, %d bytes; %d secret value(s) and %d configuration password(s) cut out\n",
				file, len(rep.files), len(data), rep.secretsCut, rep.configCut)
			if len(rep.problems) > 0 {
				_, _ = fmt.Fprintf(r.env.ErrOut, "%d thing(s) could not be read (a log, or objects your kubeconfig may not read): README.txt in the report says which and why\n", len(rep.problems))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "Where to write the tarball (default report-NAME-<yyyymmddhhmmss>.tar.gz).")
	return cmd
}

// report is a report being collected: its files by path, what could not be
// read, and the secret values every file is scrubbed of.
type report struct {
	instance string
	files    map[string][]byte
	problems []string
	secrets  [][]byte
	// secretsCut and configCut count the occurrences cut out.
	secretsCut, configCut int
}

func (rep *report) add(name string, data []byte) { rep.files[name] = data }

func (rep *report) addObject(dir string, obj client.Object) error {
	return rep.addObjectAs(path.Join(dir, obj.GetName()+".yaml"), obj)
}

func (rep *report) addObjectAs(name string, obj client.Object) error {
	obj.SetManagedFields(nil)
	data, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	rep.add(name, data)
	return nil
}

func (rep *report) failed(what string, err error) {
	rep.problems = append(rep.problems, fmt.Sprintf("%s: %v", what, err))
}

// collectReport reads everything the report holds. Only a missing instance
// is an error: whatever else cannot be read is noted in the report.
func collectReport(ctx context.Context, c client.Client, cs kubernetes.Interface, config *rest.Config, namespace, name string) (*report, error) {
	rp, err := getInstance(ctx, c, namespace, name)
	if err != nil {
		return nil, err
	}
	rep := &report{instance: name, files: map[string][]byte{}}
	if err := rep.addObjectAs("redispersistence.yaml", rp.DeepCopy()); err != nil {
		return nil, err
	}
	owned := func(obj client.Object) bool {
		if obj.GetLabels()["app.kubernetes.io/instance"] == name {
			return true
		}
		for _, ref := range obj.GetOwnerReferences() {
			if ref.UID == rp.UID {
				return true
			}
		}
		return false
	}
	names := map[string]bool{} // the instance's objects, for its events
	lists := []struct {
		dir  string
		list client.ObjectList
	}{
		{"statefulsets", &appsv1.StatefulSetList{}},
		{"pods", &corev1.PodList{}},
		{"services", &corev1.ServiceList{}},
		{"configmaps", &corev1.ConfigMapList{}},
		{"persistentvolumeclaims", &corev1.PersistentVolumeClaimList{}},
		{"jobs", &batchv1.JobList{}},
		{"poddisruptionbudgets", &policyv1.PodDisruptionBudgetList{}},
		{"networkpolicies", &networkingv1.NetworkPolicyList{}},
	}
	var pods []corev1.Pod
	for _, l := range lists {
		if err := c.List(ctx, l.list, client.InNamespace(namespace)); err != nil {
			rep.failed("listing "+l.dir, err)
			continue
		}
		items, _ := meta.ExtractList(l.list)
		for _, item := range items {
			obj := item.(client.Object)
			// A claim of a volumeClaimTemplate is named <template>-<instance>-<ordinal>.
			claim := l.dir == "persistentvolumeclaims" && strings.Contains(obj.GetName(), "-"+name+"-")
			if !owned(obj) && !claim {
				continue
			}
			names[obj.GetName()] = true
			switch o := obj.(type) {
			case *corev1.Pod:
				pods = append(pods, *o.DeepCopy())
				rep.cutEnv(&o.Spec)
			case *appsv1.StatefulSet:
				rep.cutEnv(&o.Spec.Template.Spec)
			case *batchv1.Job:
				rep.cutEnv(&o.Spec.Template.Spec)
			}
			if err := rep.addObject(l.dir, obj); err != nil {
				return nil, err
			}
		}
	}
	rep.collectSecrets(ctx, c, rp, owned, names)
	backups := &v1alpha1.RedisBackupList{}
	if err := c.List(ctx, backups, client.InNamespace(namespace)); err != nil {
		rep.failed("listing redisbackups", err)
	}
	for i := range backups.Items {
		if b := &backups.Items[i]; b.Spec.RedisPersistence.Name == name {
			names[b.Name] = true
			if err := rep.addObject("redisbackups", b); err != nil {
				return nil, err
			}
		}
	}
	rep.collectEvents(ctx, c, namespace, name, names)
	for _, pod := range pods {
		if pod.Spec.NodeName == "" {
			rep.problems = append(rep.problems, fmt.Sprintf("the logs of %s/%s: the pod is not scheduled, so it has none", pod.Namespace, pod.Name))
			continue
		}
		for _, container := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			rep.collectLog(ctx, cs, pod.Namespace, pod.Name, container.Name)
		}
	}
	for _, pod := range pods {
		rep.collectInfo(ctx, config, rp, pod)
	}
	operators, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: operatorSelector})
	if err != nil {
		rep.failed("listing the operator's pods ("+operatorSelector+", all namespaces)", err)
	} else {
		for _, pod := range operators.Items {
			for _, container := range pod.Spec.Containers {
				rep.collectLog(ctx, cs, pod.Namespace, pod.Name, container.Name)
			}
		}
	}
	return rep, nil
}

// secretEnv names environment variables that hold a secret.
var secretEnv = regexp.MustCompile(`(?i)pass|secret|token|key|credential|auth`)

// cutEnv cuts the literal values of spec's environment variables whose
// names say they are secret: a value from a Secret is a reference, but one
// written into the spec is the secret itself, whether or not the plugin may
// read any Secret.
func (rep *report) cutEnv(spec *corev1.PodSpec) {
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			for j := range containers[i].Env {
				if env := &containers[i].Env[j]; env.Value != "" && secretEnv.MatchString(env.Name) {
					env.Value = "<cut out>"
					rep.configCut++
				}
			}
		}
	}
}

// collectSecrets adds the instance's Secrets without their values and
// keeps the values of those it owns or its spec names, to scrub them out of
// every file.
func (rep *report) collectSecrets(ctx context.Context, c client.Client, rp *v1alpha1.RedisPersistence, owned func(client.Object) bool, names map[string]bool) {
	named := secretNamesIn(rp.Spec)
	secrets := &corev1.SecretList{}
	if err := c.List(ctx, secrets, client.InNamespace(rp.Namespace)); err != nil {
		rep.failed("listing secrets (so no Secret is in the report, and only configuration passwords are cut out)", err)
		return
	}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		if !owned(s) && !named[s.Name] {
			continue
		}
		names[s.Name] = true
		redacted := s.DeepCopy()
		// In stringData, so that the lengths read as text, not base64.
		redacted.Data, redacted.StringData = nil, map[string]string{}
		for k, v := range s.Data {
			rep.secrets = append(rep.secrets, v)
			redacted.StringData[k] = fmt.Sprintf("<cut out: %d bytes>", len(v))
		}
		annotations := redacted.GetAnnotations()
		delete(annotations, corev1.LastAppliedConfigAnnotation)
		redacted.SetAnnotations(annotations)
		if err := rep.addObject("secrets", redacted); err != nil {
			rep.failed("secret "+s.Name, err)
		}
	}
}

// secretNamesIn returns every Secret name spec holds: the values of fields
// named secretName, and the name of any object under a key that ends in
// SecretRef or Secret.
func secretNamesIn(spec v1alpha1.RedisPersistenceSpec) map[string]bool {
	names := map[string]bool{}
	data, err := json.Marshal(spec)
	if err != nil {
		return names
	}
	var tree any
	if json.Unmarshal(data, &tree) != nil {
		return names
	}
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case map[string]any:
			lower := strings.ToLower(key)
			if n, ok := v["name"].(string); ok && (strings.HasSuffix(lower, "secretref") || strings.HasSuffix(lower, "secret")) {
				names[n] = true
			}
			for k, child := range v {
				if s, ok := child.(string); ok && k == "secretName" {
					names[s] = true
				}
				walk(k, child)
			}
		case []any:
			for _, child := range v {
				walk(key, child)
			}
		}
	}
	walk("", tree)
	return names
}

func (rep *report) collectEvents(ctx context.Context, c client.Client, namespace, instance string, names map[string]bool) {
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(namespace)); err != nil {
		rep.failed("listing events", err)
		return
	}
	var lines []string
	for _, e := range events.Items {
		n := e.InvolvedObject.Name
		if n != instance && !names[n] && !strings.HasPrefix(n, instance+"-") {
			continue
		}
		when := e.LastTimestamp.Time
		if when.IsZero() {
			when = e.EventTime.Time
		}
		lines = append(lines, fmt.Sprintf("%s\t%s\t%s/%s\t%s\tx%d\t%s", when.UTC().Format(time.RFC3339), e.Type,
			e.InvolvedObject.Kind, n, e.Reason, max(e.Count, 1), e.Message))
	}
	sort.Strings(lines)
	rep.add("events.txt", []byte(strings.Join(lines, "\n")+"\n"))
}

func (rep *report) collectLog(ctx context.Context, cs kubernetes.Interface, namespace, pod, container string) {
	what := fmt.Sprintf("the log of %s/%s container %s", namespace, pod, container)
	stream, err := cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: ptr.To(reportLogLines)}).Stream(ctx)
	if err != nil {
		rep.failed(what, err)
		return
	}
	defer func() { _ = stream.Close() }()
	data, err := io.ReadAll(stream)
	if err != nil {
		rep.failed(what, err)
	}
	rep.add(path.Join("logs", namespace, pod, container+".log"), data)
}

// reportInfoTimeout bounds each pod's INFO: a server that does not answer
// costs the report that, and is named in its README.txt.
const reportInfoTimeout = 10 * time.Second

// collectInfo adds the INFO of pod's server or Sentinel (every section:
// INFO everything), read with valkey-cli in the pod as `cli` runs it,
// signed in as the exporter's user where the pod has it.
func (rep *report) collectInfo(ctx context.Context, config *rest.Config, rp *v1alpha1.RedisPersistence, pod corev1.Pod) {
	what := fmt.Sprintf("the INFO of %s/%s", pod.Namespace, pod.Name)
	var target cliTarget
	switch pod.Labels[specs.LabelName] {
	case specs.SelectorLabels(rp)[specs.LabelName]:
		target = cliTarget{pod: pod.Name, container: specs.ContainerRedis, port: specs.RedisPort}
	case specs.SentinelSelectorLabels(rp)[specs.LabelName]:
		target = cliTarget{pod: pod.Name, container: specs.ContainerSentinel, port: specs.SentinelPort}
	default:
		return // a Job's pod: no server in it
	}
	switch {
	case pod.Spec.NodeName == "":
		rep.problems = append(rep.problems, what+": the pod is not scheduled")
		return
	case pod.Status.Phase != corev1.PodRunning:
		rep.problems = append(rep.problems, fmt.Sprintf("%s: the pod is %s, not Running", what, cmp.Or(string(pod.Status.Phase), "not started")))
		return
	}
	execCtx, cancel := context.WithTimeout(ctx, reportInfoTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := execInPod(execCtx, config, pod.Namespace, target, cliCommand(rp, target, asMonitor, []string{"INFO", "everything"}),
		remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	if err == nil && !bytes.Contains(stdout.Bytes(), []byte("# Server")) {
		err = fmt.Errorf("valkey-cli answered %q", strings.TrimSpace(stdout.String()))
	}
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		rep.failed(what, err)
		return
	}
	info, cut := redactInfo(stdout.Bytes())
	rep.configCut += cut
	rep.add(path.Join("info", pod.Name+".txt"), info)
}

// infoSecretField names INFO fields that would hold a secret, and
// infoCounter the values that are counts, not secrets: a number, or the
// name=number list of a commandstats or latencystats line (cmdstat_auth).
var (
	infoSecretField = regexp.MustCompile(`(?i)pass|secret|token|credential|auth`)
	infoCounter     = regexp.MustCompile(`^(?:[-+]?[0-9.]+|(?:[a-z_0-9.]+=[-+0-9.]+,?)+)$`)
)

// redactInfo cuts the value of every INFO field whose name says it is
// secret, unless the value is a count. Valkey's INFO holds no password
// (requirepass, masterauth and the ACL are not in it); this keeps one a
// later version or a module might add out of the report, and the report's
// scrub cuts the instance's secret values wherever they are.
func redactInfo(info []byte) ([]byte, int) {
	cut := 0
	lines := bytes.Split(info, []byte("\n"))
	for i, line := range lines {
		field, value, ok := bytes.Cut(bytes.TrimRight(line, "\r"), []byte(":"))
		if !ok || bytes.HasPrefix(field, []byte("#")) || !infoSecretField.Match(field) || infoCounter.Match(value) {
			continue
		}
		lines[i] = append(slices.Clone(field), ":<cut out>"...)
		cut++
	}
	return bytes.Join(lines, []byte("\n")), cut
}

// configSecrets are the configuration lines whose last word is a password:
// redis.conf and sentinel.conf directives, and the >password and #sha256 of
// ACL user lines.
var (
	configSecrets = regexp.MustCompile(`(?m)^(\s*(?:requirepass|masterauth|primaryauth|sentinel\s+auth-pass\s+\S+|sentinel\s+sentinel-pass)\s+)(\S+)`)
	aclLine       = regexp.MustCompile(`(?m)^\s*user\s.*$`)
	aclToken      = regexp.MustCompile(`\s[>#<!]\S+`)
)

// scrub cuts the passwords of configuration lines out of data, then every
// secret value, in plain and base64 form.
func (rep *report) scrub(data []byte) []byte {
	data = configSecrets.ReplaceAllFunc(data, func(m []byte) []byte {
		rep.configCut++
		sub := configSecrets.FindSubmatch(m)
		return append(append([]byte{}, sub[1]...), "<cut out>"...)
	})
	data = aclLine.ReplaceAllFunc(data, func(line []byte) []byte {
		return aclToken.ReplaceAllFunc(line, func(tok []byte) []byte {
			rep.configCut++
			return append(tok[:2:2], "<cut out>"...)
		})
	})
	for _, s := range rep.secrets {
		if len(bytes.TrimSpace(s)) < 4 {
			continue // too short to cut without mangling the text around it
		}
		for _, form := range [][]byte{s, []byte(base64.StdEncoding.EncodeToString(s))} {
			if n := bytes.Count(data, form); n > 0 {
				rep.secretsCut += n
				data = bytes.ReplaceAll(data, form, []byte("<cut out>"))
			}
		}
	}
	return data
}

// tarball is the report as a gzipped tar, every file scrubbed, with
// README.txt first.
func (rep *report) tarball(now time.Time) ([]byte, error) {
	names := make([]string, 0, len(rep.files))
	for name := range rep.files {
		names = append(names, name)
	}
	sort.Strings(names)
	scrubbed := make(map[string][]byte, len(names))
	for _, name := range names {
		scrubbed[name] = rep.scrub(rep.files[name])
	}
	problems := make([][]byte, 0, len(rep.problems))
	for _, p := range rep.problems {
		problems = append(problems, rep.scrub([]byte(p)))
	}
	var readme strings.Builder
	fmt.Fprintf(&readme, "kubectl uring report of the RedisPersistence %s, %s\n\n", rep.instance, now.UTC().Format(time.RFC3339))
	fmt.Fprintf(&readme, "Secrets appear without their values; %d occurrence(s) of the values of the instance's Secrets and %d\n"+
		"configuration password(s) were cut out of the files (\"<cut out>\").\n\nFiles:\n", rep.secretsCut, rep.configCut)
	for _, name := range names {
		fmt.Fprintf(&readme, "  %s (%d bytes)\n", name, len(scrubbed[name]))
	}
	if len(problems) > 0 {
		readme.WriteString("\nNot in the report (what could not be read, and why):\n")
		for _, p := range problems {
			fmt.Fprintf(&readme, "  %s\n", p)
		}
	}
	var out bytes.Buffer
	gz := gzip.NewWriter(&out)
	tw := tar.NewWriter(gz)
	dir := strings.TrimSuffix(ReportName(rep.instance, now), ".tar.gz")
	write := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: path.Join(dir, name), Mode: 0o600, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := write("README.txt", []byte(readme.String())); err != nil {
		return nil, err
	}
	for _, name := range names {
		if err := write(name, scrubbed[name]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
