package specs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// labelKey matches the label and annotation keys the operator names in its
// code: its own domain's and the Kubernetes recommended ones.
var labelKey = regexp.MustCompile(`^([a-z.]*uringredis\.io|app\.kubernetes\.io|batch\.kubernetes\.io)/[a-z][a-z.-]*$`)

// TestEveryLabelIsDocumented: every label and annotation key the operator's
// non-test code names (a string literal) is in the RedisPersistence page's
// "Labels and annotations" table.
func TestEveryLabelIsDocumented(t *testing.T) {
	root := testenv.RepoRoot()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "redispersistence.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "### Labels and annotations")
	if !ok {
		t.Fatal("docs/redispersistence.md has no section Labels and annotations")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	seen := map[string]string{}
	for _, dir := range []string{"internal/specs", "controllers", "cmd/operator", "api/v1alpha1"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				if v, err := strconv.Unquote(lit.Value); err == nil && labelKey.MatchString(v) {
					seen[v] = filepath.Base(file)
				}
				return true
			})
		}
	}
	if len(seen) < 15 {
		t.Fatalf("found only %d keys in the code: %v", len(seen), seen)
	}
	for key, file := range seen {
		// A pair such as kernel-version.major and .minor shares one row.
		if !strings.Contains(table, "`"+key+"`") && !strings.Contains(table, "`"+strings.TrimSuffix(strings.TrimSuffix(key, ".major"), ".minor")+".major`") {
			t.Errorf("%s (named in %s) is not in the Labels and annotations table", key, file)
		}
	}
}
