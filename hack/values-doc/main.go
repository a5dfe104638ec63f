// Command values-doc generates a Helm chart's values reference and its
// values.schema.json from the comments of values.yaml, so the two cannot
// disagree with the values they describe. The convention follows
// cert-manager's helm-tool:
//
//   - The comment block right above a key describes it (Markdown).
//   - `# +docs:section=Title` in that block starts a README section.
//   - `# +docs:property` documents a map as one free-form value instead of
//     one entry per key (resources, nodeSelector, ...). Empty maps are
//     free-form too; every other map is closed: its schema has
//     `additionalProperties: false`, so a misspelt key fails at install.
//   - `# +docs:enum=a,b` restricts a value; `# +docs:pattern=RE` restricts a
//     string to a regular expression; `# +docs:type=T` overrides the JSON
//     type read from the default.
//
// Every documented value must have a description.
//
//	go run ./hack/values-doc VALUES.yaml README.md values.schema.json
//
// The README's values reference replaces what lies between the lines
// `<!-- values:begin -->` and `<!-- values:end -->`.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

const (
	beginMarker = "<!-- values:begin -->"
	endMarker   = "<!-- values:end -->"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: values-doc VALUES.yaml README.md values.schema.json")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "values-doc:", err)
		os.Exit(1)
	}
}

func run(valuesPath, readmePath, schemaPath string) error {
	src, err := os.ReadFile(valuesPath)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("%s: the top level must be a map", valuesPath)
	}
	var props []property
	var errs []error
	schema := walk(doc.Content[0], "", &props, &errs)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	schema["$schema"] = "http://json-schema.org/draft-07/schema#"
	out, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(schemaPath, append(out, '\n'), 0o644); err != nil {
		return err
	}
	return injectReadme(readmePath, renderReference(props))
}

// property is one documented value.
type property struct {
	path, section, description, typ string
	def                             *yaml.Node
}

type directives struct {
	description, section, typ, pattern string
	enum                               []string
	whole                              bool
}

func parseComment(comment string) directives {
	var d directives
	var text []string
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(line), "#"), " ")
		switch {
		case strings.HasPrefix(line, "+docs:section="):
			d.section = strings.TrimPrefix(line, "+docs:section=")
		case line == "+docs:property":
			d.whole = true
		case strings.HasPrefix(line, "+docs:type="):
			d.typ = strings.TrimPrefix(line, "+docs:type=")
		case strings.HasPrefix(line, "+docs:pattern="):
			d.pattern = strings.TrimPrefix(line, "+docs:pattern=")
		case strings.HasPrefix(line, "+docs:enum="):
			d.enum = strings.Split(strings.TrimPrefix(line, "+docs:enum="), ",")
		default:
			text = append(text, line)
		}
	}
	d.description = strings.TrimSpace(strings.Join(text, "\n"))
	return d
}

// walk returns the schema of a closed map and collects its documented values.
func walk(m *yaml.Node, prefix string, props *[]property, errs *[]error) map[string]any {
	properties := map[string]any{}
	for i := 0; i < len(m.Content); i += 2 {
		key, value := m.Content[i], m.Content[i+1]
		path := prefix + key.Value
		d := parseComment(key.HeadComment)
		if d.section != "" {
			*props = append(*props, property{section: d.section})
		}
		if value.Kind == yaml.MappingNode && len(value.Content) > 0 && !d.whole {
			if d.description != "" {
				*props = append(*props, property{path: path, description: d.description, typ: "object"})
			}
			s := walk(value, path+".", props, errs)
			if d.description != "" {
				s["description"] = d.description
			}
			properties[key.Value] = s
			continue
		}
		if d.description == "" {
			*errs = append(*errs, fmt.Errorf("line %d: %s has no description comment", key.Line, path))
		}
		typ := d.typ
		if typ == "" {
			typ = jsonType(value)
		}
		var def any
		if err := value.Decode(&def); err != nil {
			*errs = append(*errs, fmt.Errorf("line %d: %s: %w", key.Line, path, err))
		}
		s := map[string]any{"type": typ, "description": d.description, "default": def}
		if d.enum != nil {
			s["enum"] = d.enum
		}
		if d.pattern != "" {
			s["pattern"] = d.pattern
		}
		properties[key.Value] = s
		*props = append(*props, property{path: path, description: d.description, typ: typ, def: value})
	}
	return map[string]any{"type": "object", "additionalProperties": false, "properties": properties}
}

func jsonType(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "object"
	case n.Kind == yaml.SequenceNode:
		return "array"
	case n.Tag == "!!bool":
		return "boolean"
	case n.Tag == "!!int":
		return "integer"
	case n.Tag == "!!float":
		return "number"
	case n.Tag == "!!null":
		return "null"
	}
	return "string"
}

func renderReference(props []property) string {
	var b strings.Builder
	for _, p := range props {
		if p.path == "" {
			fmt.Fprintf(&b, "### %s\n\n", p.section)
			continue
		}
		if p.def == nil {
			fmt.Fprintf(&b, "#### **%s**\n\n%s\n\n", p.path, p.description)
			continue
		}
		def, _ := yaml.Marshal(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{stripComments(p.def)}})
		fmt.Fprintf(&b, "#### **%s** ~ `%s`\n\n", p.path, p.typ)
		fmt.Fprintf(&b, "> Default value:\n> ```yaml\n> %s\n> ```\n\n",
			strings.ReplaceAll(strings.TrimSpace(string(def)), "\n", "\n> "))
		fmt.Fprintf(&b, "%s\n\n", p.description)
	}
	return b.String()
}

func stripComments(n *yaml.Node) *yaml.Node {
	c := *n
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	c.Content = nil
	for _, child := range n.Content {
		c.Content = append(c.Content, stripComments(child))
	}
	return &c
}

func injectReadme(path, reference string) error {
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
	out.WriteString("\n\n" + reference)
	out.Write(readme[end:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}
