// Package dashboards builds the Grafana dashboards the chart ships, as Go
// with grafana-foundation-sdk: one pure builder per dashboard, one function
// per panel starting from a shared default, fixed panel ids, and a unit and a
// description on every panel. `make dashboards` renders them into
// charts/uring-redis-operator/dashboards/.
package dashboards

import (
	"encoding/json"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// Generated is one dashboard and the file it is rendered to.
type Generated struct {
	File  string
	Build func() (dashboard.Dashboard, error)
}

// All are the dashboards the chart ships.
func All() []Generated {
	return []Generated{
		{File: "persistence-modes.json", Build: ModeComparison},
		{File: "uring-instance.json", Build: UringInstance},
	}
}

// Render is a dashboard's committed JSON.
func Render(build func() (dashboard.Dashboard, error)) ([]byte, error) {
	d, err := build()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Queries lists every PromQL expression of a dashboard's panels, for tests
// that run them against a real Prometheus.
func Queries(d dashboard.Dashboard) map[string][]string {
	out := map[string][]string{}
	for _, p := range d.Panels {
		if p.Panel == nil {
			continue
		}
		for _, t := range p.Panel.Targets {
			if q, ok := t.(prometheus.Dataquery); ok {
				out[*p.Panel.Title] = append(out[*p.Panel.Title], q.Expr)
			}
		}
	}
	return out
}

// datasource is the dashboard's Prometheus, chosen with the datasource variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

func datasourceVariable() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus")
}

// labelVariable is a multi-value variable over one label of a metric,
// "All" by default.
func labelVariable(name, label, metric string) *dashboard.QueryVariableBuilder {
	query := "label_values(" + metric + ", " + label + ")"
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(datasource).
		Query(dashboard.StringOrMap{String: &query}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Multi(true).
		IncludeAll(true).
		AllValue(".*").
		Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: cog.ToPtr("All")}, Value: dashboard.StringOrArrayOfString{String: cog.ToPtr("$__all")}})
}

// query is a Prometheus target; refID orders targets within a panel.
func query(refID, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().RefId(refID).Expr(expr).LegendFormat(legend).Datasource(datasource)
}
