// Package mdcheck finds Markdown that GitHub would render other than its
// author meant: the file is parsed as GitHub parses it (CommonMark with the
// GFM extensions, by goldmark), and the checks look at the parsed document,
// not at the text.
//
//   - A fenced code block that is never closed runs to the end of its
//     document (or its list item or quote): everything after the fence
//     renders as code.
//   - A line shaped like a heading ("## Scheduling") inside a fenced block is
//     usually prose a fence closed too early or too late swallowed. Shell
//     sessions (sh, bash, console, shell) are exempt: their comments look
//     like that.
//   - A relative link or image whose file does not exist in the repository.
package mdcheck

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Problem is one finding, at a line of a file.
type Problem struct {
	File    string
	Line    int
	Message string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message) }

// headingLike is an ATX heading whose text starts like prose.
var headingLike = regexp.MustCompile(`^#{1,6} [A-Z]`)

// shells are the info strings of blocks whose "# Comment" lines are expected.
var shells = map[string]bool{"sh": true, "bash": true, "console": true, "shell": true}

// CheckFile checks the Markdown file at rel, a path relative to root, the
// repository's top directory (where links starting with "/" lead).
func CheckFile(root, rel string) ([]Problem, error) {
	src, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	doc := newDocument(rel, src)
	fences := &fenceTracker{BlockParser: parser.NewFencedCodeBlockParser(), doc: doc, closed: map[ast.Node]bool{}, opened: map[ast.Node]int{}}
	tree := newMarkdown(fences).Parser().Parse(text.NewReader(src))

	var problems []Problem
	err = ast.Walk(tree, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.FencedCodeBlock:
			problems = append(problems, fences.check(n)...)
		case *ast.Link:
			problems = append(problems, doc.checkLink(root, n, string(n.Destination))...)
		case *ast.Image:
			problems = append(problems, doc.checkLink(root, n, string(n.Destination))...)
		}
		return ast.WalkContinue, nil
	})
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Line < problems[j].Line })
	return problems, err
}

// newMarkdown is goldmark with GitHub's extensions, whose fenced code block
// parser is fences.
func newMarkdown(fences *fenceTracker) goldmark.Markdown {
	fenced := reflect.TypeOf(parser.NewFencedCodeBlockParser())
	var blocks []util.PrioritizedValue
	for _, b := range parser.DefaultBlockParsers() {
		if reflect.TypeOf(b.Value) == fenced {
			b.Value = fences
		}
		blocks = append(blocks, b)
	}
	p := parser.NewParser(
		parser.WithBlockParsers(blocks...),
		parser.WithInlineParsers(parser.DefaultInlineParsers()...),
		parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
	)
	return goldmark.New(goldmark.WithParser(p), goldmark.WithExtensions(extension.GFM))
}

// fenceTracker is goldmark's fenced code block parser, recording where each
// block opened and whether a closing fence ended it: goldmark's tree does not
// tell a closed block from one that ran to the end of its container.
type fenceTracker struct {
	parser.BlockParser
	doc    *document
	opened map[ast.Node]int  // line of the opening fence
	closed map[ast.Node]bool // ended by its closing fence
}

func (f *fenceTracker) Open(parent ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	_, segment := reader.PeekLine()
	node, state := f.BlockParser.Open(parent, reader, pc)
	if node != nil {
		f.opened[node] = f.doc.line(segment.Start)
	}
	return node, state
}

func (f *fenceTracker) Continue(node ast.Node, reader text.Reader, pc parser.Context) parser.State {
	state := f.BlockParser.Continue(node, reader, pc)
	if state&parser.Close != 0 {
		f.closed[node] = true
	}
	return state
}

func (f *fenceTracker) check(block *ast.FencedCodeBlock) []Problem {
	var problems []Problem
	opened := f.opened[block]
	language := string(block.Language(f.doc.src))
	if !f.closed[block] {
		problems = append(problems, f.doc.problem(opened, "this code fence is never closed: everything after it renders as code"))
	}
	if shells[language] {
		return problems
	}
	lines := block.Lines()
	for i := 0; i < lines.Len(); i++ {
		segment := lines.At(i)
		if line := segment.Value(f.doc.src); headingLike.Match(line) {
			problems = append(problems, f.doc.problem(f.doc.line(segment.Start),
				fmt.Sprintf("a heading inside the code block opened at line %d (info %q): is a fence closed early or missing?", opened, language)))
		}
	}
	return problems
}

// document is a file's source and where its lines start.
type document struct {
	file       string
	src        []byte
	lineStarts []int
}

func newDocument(file string, src []byte) *document {
	d := &document{file: file, src: src, lineStarts: []int{0}}
	for i, c := range src {
		if c == '\n' {
			d.lineStarts = append(d.lineStarts, i+1)
		}
	}
	return d
}

// line is the 1-based line of byte offset.
func (d *document) line(offset int) int {
	return sort.Search(len(d.lineStarts), func(i int) bool { return d.lineStarts[i] > offset })
}

func (d *document) problem(line int, message string) Problem {
	return Problem{File: d.file, Line: line, Message: message}
}

// checkLink reports a relative link to a file the repository does not have.
func (d *document) checkLink(root string, n ast.Node, destination string) []Problem {
	u, err := url.Parse(destination)
	if err != nil {
		return []Problem{d.problem(d.nodeLine(n), fmt.Sprintf("link %q: %v", destination, err))}
	}
	if u.Scheme != "" || u.Host != "" || u.Path == "" {
		return nil // another site, mail, or an anchor in this file
	}
	target := filepath.Join(root, filepath.Dir(d.file), filepath.FromSlash(u.Path))
	if filepath.IsAbs(u.Path) {
		target = filepath.Join(root, filepath.FromSlash(u.Path))
	}
	if _, err := os.Stat(target); err != nil {
		return []Problem{d.problem(d.nodeLine(n), fmt.Sprintf("link to %s: no such file in the repository", u.Path))}
	}
	return nil
}

// nodeLine is the line an inline node starts on: its first text's, else its
// block's.
func (d *document) nodeLine(n ast.Node) int {
	var line int
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := c.(*ast.Text); ok && entering {
			line = d.line(t.Segment.Start)
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	if line != 0 {
		return line
	}
	for b := n.Parent(); b != nil; b = b.Parent() {
		if b.Type() == ast.TypeBlock && b.Lines().Len() > 0 {
			return d.line(b.Lines().At(0).Start)
		}
	}
	return 0
}
