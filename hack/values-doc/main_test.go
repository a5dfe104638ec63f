package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSchemaAndReadme(t *testing.T) {
	dir := t.TempDir()
	values, readme, schema := filepath.Join(dir, "values.yaml"), filepath.Join(dir, "README.md"), filepath.Join(dir, "schema.json")
	write(t, values, `# +docs:section=Operator
# The image.
image:
  # Tag of the image.
  # +docs:pattern=^[a-z]*$
  tag: ""
  # Pull policy.
  # +docs:enum=Always,IfNotPresent
  pullPolicy: IfNotPresent
# Free-form resources.
# +docs:property
resources:
  limits:
    memory: 1Gi
# Replicas.
replicaCount: 1
`)
	write(t, readme, "intro\n<!-- values:begin -->\nstale\n<!-- values:end -->\noutro\n")
	if err := run(values, readme, schema); err != nil {
		t.Fatal(err)
	}

	var s struct {
		AdditionalProperties bool `json:"additionalProperties"`
		Properties           map[string]struct {
			Type                 string                     `json:"type"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
			Properties           map[string]json.RawMessage `json:"properties"`
		} `json:"properties"`
	}
	raw, _ := os.ReadFile(schema)
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.AdditionalProperties || s.Properties["image"].AdditionalProperties == nil || *s.Properties["image"].AdditionalProperties {
		t.Errorf("maps are not closed: %s", raw)
	}
	if r := s.Properties["resources"]; r.Type != "object" || r.AdditionalProperties != nil || r.Properties != nil {
		t.Errorf("+docs:property map is not free-form: %+v", r)
	}
	if s.Properties["replicaCount"].Type != "integer" || !strings.Contains(string(raw), `"IfNotPresent"`) ||
		!strings.Contains(string(raw), `"pattern": "^[a-z]*$"`) {
		t.Errorf("types, enum or pattern missing: %s", raw)
	}

	doc, _ := os.ReadFile(readme)
	for _, want := range []string{"intro\n<!-- values:begin -->\n", "### Operator", "#### **image.pullPolicy** ~ `string`",
		">     memory: 1Gi", "<!-- values:end -->\noutro\n"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("README lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(string(doc), "stale") {
		t.Error("the old reference was not replaced")
	}
}

func TestUndocumentedValueFails(t *testing.T) {
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")
	write(t, values, "image:\n  tag: \"\"\n")
	err := run(values, filepath.Join(dir, "README.md"), filepath.Join(dir, "schema.json"))
	if err == nil || !strings.Contains(err.Error(), "image.tag has no description") {
		t.Errorf("err = %v, want a missing description for image.tag", err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
