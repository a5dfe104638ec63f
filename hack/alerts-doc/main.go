// Command alerts-doc lists a chart's alerts in its README from the Prometheus
// rule file the chart ships, so the list cannot disagree with the rules, and
// fails when an alert has no runbook:
//
//   - every alerting rule has the annotations summary and runbook_url;
//   - runbook_url is `<page>.md#<alert name in lower case>`, a page of the
//     runbooks directory that has the heading `## <alert name>` (the anchor
//     GitHub and mkdocs both make of it).
//
// The chart turns runbook_url into a link with its runbookBaseURL value.
//
//	go run ./hack/alerts-doc RULES.yaml RUNBOOKS_DIR README.md
//
// The README's list replaces what lies between the lines
// `<!-- alerts:begin -->` and `<!-- alerts:end -->`; its links to the
// runbooks are relative to the README.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	beginMarker = "<!-- alerts:begin -->"
	endMarker   = "<!-- alerts:end -->"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: alerts-doc RULES.yaml RUNBOOKS_DIR README.md")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "alerts-doc:", err)
		os.Exit(1)
	}
}

// ruleFile is the part of a Prometheus rule file the list needs.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func run(rulesPath, runbooksDir, readmePath string) error {
	raw, err := os.ReadFile(rulesPath)
	if err != nil {
		return err
	}
	var rules ruleFile
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		return fmt.Errorf("%s: %w", rulesPath, err)
	}
	runbooksFromReadme, err := filepath.Rel(filepath.Dir(readmePath), runbooksDir)
	if err != nil {
		return err
	}
	var list strings.Builder
	var errs []error
	for _, g := range rules.Groups {
		fmt.Fprintf(&list, "**%s**\n\n| Alert | Severity | For | Fires when | Runbook |\n|---|---|---|---|---|\n", g.Name)
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue // a recording rule
			}
			page, err := checkRunbook(runbooksDir, r.Alert, r.Annotations["runbook_url"])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.Alert, err))
			}
			summary := r.Annotations["summary"]
			if summary == "" {
				errs = append(errs, fmt.Errorf("%s: no summary annotation", r.Alert))
			}
			fmt.Fprintf(&list, "| `%s` | %s | %s | %s | [%s](%s) |\n", r.Alert, r.Labels["severity"], orDash(r.For),
				strings.ReplaceAll(summary, "|", `\|`), page, filepath.ToSlash(filepath.Join(runbooksFromReadme, r.Annotations["runbook_url"])))
		}
		list.WriteString("\n")
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return inject(readmePath, list.String())
}

// checkRunbook checks that url, an alert's runbook_url, names a heading for
// alert on a page of dir, and returns the page's name.
func checkRunbook(dir, alert, url string) (string, error) {
	page, anchor, _ := strings.Cut(url, "#")
	if url == "" || !strings.HasSuffix(page, ".md") || strings.Contains(page, "/") {
		return "", fmt.Errorf("runbook_url %q: want <page>.md#%s, a page of %s", url, strings.ToLower(alert), dir)
	}
	if anchor != strings.ToLower(alert) {
		return "", fmt.Errorf("runbook_url %q: the anchor must be %q, the alert's heading", url, strings.ToLower(alert))
	}
	text, err := os.ReadFile(filepath.Join(dir, page))
	if err != nil {
		return "", fmt.Errorf("runbook_url %q: %w", url, err)
	}
	if !bytes.Contains(append([]byte("\n"), text...), []byte("\n## "+alert+"\n")) {
		return "", fmt.Errorf("runbook_url %q: %s has no heading `## %s`", url, filepath.Join(dir, page), alert)
	}
	return strings.TrimSuffix(page, ".md"), nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func inject(path, list string) error {
	readme, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin := bytes.Index(readme, []byte(beginMarker))
	end := bytes.Index(readme, []byte(endMarker))
	if begin < 0 || end < begin {
		return fmt.Errorf("%s: no %s ... %s block", path, beginMarker, endMarker)
	}
	var out bytes.Buffer
	out.Write(readme[:begin+len(beginMarker)])
	out.WriteString("\n\n" + list)
	out.Write(readme[end:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}
