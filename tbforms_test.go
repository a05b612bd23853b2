package testkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/multikueue-testkit/testkit/assert"
	"github.com/multikueue-testkit/testkit/scenario"
)

// TestEveryErrorFormHasItsTBForm: every Checker method that returns an
// error has an Asserter method of the same name, and every scenario
// function of an Env that returns an error has a Runner method of the same
// name, so a test written with testing.T, Ginkgo or testify can use each.
func TestEveryErrorFormHasItsTBForm(t *testing.T) {
	errType := reflect.TypeFor[error]()
	checker, asserter := reflect.TypeFor[*assert.Checker](), reflect.TypeFor[*assert.Asserter]()
	n := 0
	for i := range checker.NumMethod() {
		m := checker.Method(i)
		if m.Type.NumOut() == 0 || m.Type.Out(m.Type.NumOut()-1) != errType {
			continue
		}
		n++
		twin, ok := asserter.MethodByName(m.Name)
		if !ok {
			t.Errorf("assert.Checker.%s returns an error but assert.Asserter has no %s", m.Name, m.Name)
			continue
		}
		if twin.Type.NumOut() != 1 || twin.Type.Out(0).Kind() != reflect.Bool {
			t.Errorf("assert.Asserter.%s is %v; want it to return bool", m.Name, twin.Type)
		}
		if twin.Type.NumIn() != m.Type.NumIn() || twin.Type.IsVariadic() != m.Type.IsVariadic() {
			t.Errorf("assert.Asserter.%s%v takes other parameters than assert.Checker.%s%v", m.Name, twin.Type, m.Name, m.Type)
			continue
		}
		for j := 1; j < m.Type.NumIn(); j++ { // 0 is the receiver
			if twin.Type.In(j) != m.Type.In(j) {
				t.Errorf("assert.Asserter.%s parameter %d is %v, assert.Checker.%s's %v", m.Name, j, twin.Type.In(j), m.Name, m.Type.In(j))
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d Checker methods returning an error; the reflection above is broken", n)
	}

	runner := reflect.TypeFor[*scenario.Runner]()
	files, err := filepath.Glob("scenario/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n = 0
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
				t.Errorf("scenario.%s (%s) returns an error but scenario.Runner has no %s", fn.Name.Name, fset.Position(fn.Pos()), fn.Name.Name)
				continue
			}
			// (ctx, env, opts…) against (receiver, ctx, opts…).
			if want := fn.Type.Params.NumFields(); m.Type.NumIn() != want {
				t.Errorf("scenario.Runner.%s%v takes %d parameters with its receiver; scenario.%s takes %d with env", fn.Name.Name, m.Type, m.Type.NumIn(), fn.Name.Name, want)
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d scenario functions of an Env; the parsing above is broken", n)
	}
}

// takesEnv: the function's second parameter is *Env.
func takesEnv(fn *ast.FuncDecl) bool {
	var types []ast.Expr
	for _, p := range fn.Type.Params.List {
		for range max(len(p.Names), 1) {
			types = append(types, p.Type)
		}
	}
	if len(types) < 2 {
		return false
	}
	star, ok := types[1].(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := star.X.(*ast.Ident)
	return ok && id.Name == "Env"
}

// returnsError: the function's last result is error.
func returnsError(fn *ast.FuncDecl) bool {
	r := fn.Type.Results
	if r == nil || len(r.List) == 0 {
		return false
	}
	id, ok := r.List[len(r.List)-1].Type.(*ast.Ident)
	return ok && id.Name == "error"
}
