package dashboards

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// TestPanels checks what every panel needs to be read without a guide: a
// fixed unique id, a title, a description, a unit and at least one query.
// The queries themselves run against a real Prometheus in
// controllers.TestDashboardQueriesReturnData.
func TestPanels(t *testing.T) {
	for _, g := range All() {
		d, err := g.Build()
		if err != nil {
			t.Fatalf("%s: %v", g.File, err)
		}
		queries := Queries(d)
		ids := map[uint32]bool{}
		for _, p := range d.Panels {
			panel := p.Panel
			if panel == nil {
				continue
			}
			title := ""
			if panel.Title != nil {
				title = *panel.Title
			}
			switch {
			case panel.Id == nil || ids[*panel.Id]:
				t.Errorf("%s: panel %q has no id or a duplicate one", g.File, title)
			case title == "" || panel.Description == nil || *panel.Description == "":
				t.Errorf("%s: panel %v lacks a title or a description", g.File, *panel.Id)
			case panel.FieldConfig == nil || panel.FieldConfig.Defaults.Unit == nil || *panel.FieldConfig.Defaults.Unit == "":
				t.Errorf("%s: panel %q has no unit", g.File, title)
			case len(queries[title]) == 0 || len(queries[title]) != len(panel.Targets):
				t.Errorf("%s: panel %q has %d Prometheus queries among %d targets", g.File, title, len(queries[title]), len(panel.Targets))
			}
			if panel.Id != nil {
				ids[*panel.Id] = true
			}
		}
		if len(ids) < 5 {
			t.Errorf("%s has only %d panels", g.File, len(ids))
		}
	}
}

// TestCommittedJSON renders every dashboard twice (the builders are
// deterministic) and compares it with the chart's copy; `make dashboards`
// rewrites them.
func TestCommittedJSON(t *testing.T) {
	for _, g := range All() {
		first, err := Render(g.Build)
		if err != nil {
			t.Fatal(err)
		}
		second, _ := Render(g.Build)
		if !bytes.Equal(first, second) {
			t.Errorf("%s renders differently twice", g.File)
		}
		committed, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "charts", "uring-redis-operator", "dashboards", g.File))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, committed) {
			t.Errorf("%s differs from the builder's output: run `make dashboards`", g.File)
		}
	}
}

// TestConditionalQueriesExist keeps NeedsReplicas, NeedsBackups and NeedsCluster in step
// with the panels: every key they name is a query of a dashboard.
func TestConditionalQueriesExist(t *testing.T) {
	queries, err := AllQueries("5m")
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []map[string]bool{replicatedOnly, backupsOnly, clusterOnly} {
		for desc := range set {
			if _, ok := queries[desc]; !ok {
				t.Errorf("%q is no query of a dashboard", desc)
			}
		}
	}
}
