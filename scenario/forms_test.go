package scenario_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/scenario"
)

// TestEveryScenarioHasItsTBForm: each scenario function of the package
// (func Name(ctx, env *Env, …) … error, read from its source) has its
// Runner method of the same name taking the same options, so that the TB
// forms cannot fall behind the scenarios.
func TestEveryScenarioHasItsTBForm(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	runner := reflect.TypeOf(&scenario.Runner{})
	fset := token.NewFileSet()
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || !takesEnv(fn) || !returnsError(fn) {
				continue
			}
			n++
			m, ok := runner.MethodByName(fn.Name.Name)
			if !ok {
				t.Errorf("scenario.%s (%s) has no Runner.%s", fn.Name.Name, f, fn.Name.Name)
				continue
			}
			// The function takes (ctx, env, opts...); the method (receiver, ctx, opts...).
			if want := fn.Type.Params.NumFields(); m.Type.NumIn() != want { // env out, the receiver in
				t.Errorf("Runner.%s%v takes %d parameters with its receiver, want %d as scenario.%s's without env", fn.Name.Name, m.Type, m.Type.NumIn(), want, fn.Name.Name)
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d scenario functions; the listing is broken", n)
	}
}

// takesEnv tells func(ctx context.Context, env *Env, …).
func takesEnv(fn *ast.FuncDecl) bool {
	ps := fn.Type.Params.List
	var types []ast.Expr
	for _, p := range ps {
		for range max(len(p.Names), 1) {
			types = append(types, p.Type)
		}
	}
	if len(types) < 2 {
		return false
	}
	sel, ok := types[0].(*ast.SelectorExpr)
	star, ok2 := types[1].(*ast.StarExpr)
	if !ok || !ok2 || sel.Sel.Name != "Context" {
		return false
	}
	id, ok := star.X.(*ast.Ident)
	return ok && id.Name == "Env"
}

// returnsError tells a function whose last result is error.
func returnsError(fn *ast.FuncDecl) bool {
	rs := fn.Type.Results
	if rs == nil || len(rs.List) == 0 {
		return false
	}
	id, ok := rs.List[len(rs.List)-1].Type.(*ast.Ident)
	return ok && id.Name == "error"
}
