package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// MaxFuncLines is the most lines a function of the module may have
// (outside tests and generated code), not counting its data literals.
const MaxFuncLines = 80

// dataLiteralLines is the length from which a composite literal (a map,
// slice or struct written out) counts as data, not code: its lines do not
// count against MaxFuncLines.
const dataLiteralLines = 10

// Every function of the module's packages (not tests, not generated code)
// is at most MaxFuncLines long, its data literals aside: a longer one is
// to be split into named steps.
func TestFunctionsAreShort(t *testing.T) {
	pkgs := list(t)
	fset := token.NewFileSet()
	checked := 0
	for _, p := range pkgs {
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("parse %s: %v", path, err)
			}
			if ast.IsGenerated(f) {
				continue
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				checked++
				if n := codeLines(fset, fn.Body); n > MaxFuncLines {
					t.Errorf("%s: %s is %d lines (data literals aside); at most %d: split it into named steps",
						fset.Position(fn.Pos()), funcName(fn), n, MaxFuncLines)
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("checked only %d functions: is go list finding the module?", checked)
	}
}

// codeLines is the number of lines of body, from brace to brace, less
// those of its data literals (the outermost composite literals of at
// least dataLiteralLines lines).
func codeLines(fset *token.FileSet, body *ast.BlockStmt) int {
	lines := func(n ast.Node) int { return fset.Position(n.End()).Line - fset.Position(n.Pos()).Line + 1 }
	n := lines(body)
	ast.Inspect(body, func(node ast.Node) bool {
		lit, ok := node.(*ast.CompositeLit)
		if !ok {
			return true
		}
		if l := lines(lit); l >= dataLiteralLines {
			n -= l
			return false
		}
		return true
	})
	return n
}

// funcName is fn's name, with its receiver's type for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
