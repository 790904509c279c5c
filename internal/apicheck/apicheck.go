// Package apicheck keeps the exported API of the published packages in
// files under api/ at the repository root, one line per exported name and
// signature, sorted, so that the API changes only on purpose: its test
// fails when a package's API differs from its file. After a change made on
// purpose, regenerate the files and commit them with the change and a
// CHANGELOG line:
//
//	go test ./internal/apicheck -update
//
// It reads the packages' export data (go list -export) with go/importer
// and go/types, from the standard library only.
package apicheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// Packages are the published packages whose API is recorded, each in
// api/NAME.txt, NAME being the package's name. A new published package is
// one line here, then `go test ./internal/apicheck -update`.
var Packages = []string{
	"github.com/timingwheel/timingwheel",
	"github.com/timingwheel/timingwheel/netidle",
	"github.com/timingwheel/timingwheel/wheelctx",
	"github.com/timingwheel/timingwheel/wheeltest",
	"github.com/timingwheel/timingwheel/gnet", // package gnetwheel, in the gnet module (through go.work)
}

// listed is what go list -export tells of one package.
type listed struct {
	ImportPath string
	Name       string
	Export     string
	Error      *struct{ Err string }
}

// load type-checks nothing: it asks the go command, run in dir, to build
// the export data of paths and their dependencies, and returns the
// packages of paths read from it, with an error per path that could not
// be loaded.
func load(dir string, paths []string) (map[string]*types.Package, map[string]error, error) {
	args := append([]string{"list", "-e", "-export", "-deps", "-json=ImportPath,Name,Export,Error"}, paths...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("go list: %v\n%s", err, stderr.Bytes())
	}
	exports := map[string]string{}
	failed := map[string]error{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("go list output: %v", err)
		}
		if p.Error != nil {
			failed[p.ImportPath] = errors.New(p.Error.Err)
			continue
		}
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(file)
	})
	pkgs := map[string]*types.Package{}
	for _, path := range paths {
		if _, ok := failed[path]; ok {
			continue
		}
		pkg, err := imp.Import(path)
		if err != nil {
			failed[path] = err
			continue
		}
		pkgs[path] = pkg
	}
	return pkgs, failed, nil
}

// API returns the lines of pkg's exported API, sorted:
//
//	pkg NAME, const C TYPE = VALUE
//	pkg NAME, var V TYPE
//	pkg NAME, func F[TYPEPARAMS](PARAMS) RESULTS
//	pkg NAME, type T[TYPEPARAMS] struct (interface, or the underlying type)
//	pkg NAME, type T struct, FIELD TYPE (an exported field; embedded TYPE for an embedded one)
//	pkg NAME, type T interface, METHOD(PARAMS) RESULTS (each method of its method set)
//	pkg NAME, method (RECV) M(PARAMS) RESULTS
//
// Parameter names are left out: renaming one does not change the API.
func API(pkg *types.Package) []string {
	q := func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return p.Name()
	}
	prefix := "pkg " + pkg.Name() + ", "
	var lines []string
	add := func(format string, args ...any) {
		lines = append(lines, prefix+fmt.Sprintf(format, args...))
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const:
			add("const %s %s = %s", name, typeString(obj.Type(), q), obj.Val().ExactString())
		case *types.Var:
			add("var %s %s", name, typeString(obj.Type(), q))
		case *types.Func:
			sig := obj.Type().(*types.Signature)
			add("func %s%s%s", name, typeParams(sig.TypeParams(), q), signature(sig, q))
		case *types.TypeName:
			typeLines(obj, q, add)
		}
	}
	sort.Strings(lines)
	return lines
}

// typeLines adds the lines of an exported type: its kind, its exported
// fields or its methods.
func typeLines(obj *types.TypeName, q types.Qualifier, add func(string, ...any)) {
	name := obj.Name()
	if obj.IsAlias() {
		add("type %s = %s", name, typeString(types.Unalias(obj.Type()), q))
		return
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		add("type %s %s", name, typeString(obj.Type(), q))
		return
	}
	head := name + typeParams(named.TypeParams(), q)
	switch u := named.Underlying().(type) {
	case *types.Struct:
		add("type %s struct", head)
		for f := range u.Fields() {
			switch {
			case !f.Exported():
			case f.Embedded():
				add("type %s struct, embedded %s", head, typeString(f.Type(), q))
			default:
				add("type %s struct, %s %s", head, f.Name(), typeString(f.Type(), q))
			}
		}
	case *types.Interface:
		add("type %s interface", head)
		sealed := false
		for m := range u.Methods() {
			if m.Exported() {
				add("type %s interface, %s%s", head, m.Name(), signature(m.Type().(*types.Signature), q))
			} else {
				sealed = true
			}
		}
		if sealed {
			add("type %s interface, unexported methods", head)
		}
	default:
		add("type %s %s", head, typeString(u, q))
	}
	for m := range named.Methods() {
		if !m.Exported() {
			continue
		}
		sig := m.Type().(*types.Signature)
		add("method (%s) %s%s", typeString(sig.Recv().Type(), q), m.Name(), signature(sig, q))
	}
}

// typeParams writes [P1 C1, P2 C2], or nothing.
func typeParams(list *types.TypeParamList, q types.Qualifier) string {
	if list.Len() == 0 {
		return ""
	}
	var parts []string
	for tp := range list.TypeParams() {
		parts = append(parts, tp.Obj().Name()+" "+typeString(tp.Constraint(), q))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// signature writes (PARAMS) RESULTS without the names.
func signature(sig *types.Signature, q types.Qualifier) string {
	var params []string
	for i := range sig.Params().Len() {
		t := sig.Params().At(i).Type()
		if sig.Variadic() && i == sig.Params().Len()-1 {
			params = append(params, "..."+typeString(t.(*types.Slice).Elem(), q))
			continue
		}
		params = append(params, typeString(t, q))
	}
	s := "(" + strings.Join(params, ", ") + ")"
	switch n := sig.Results().Len(); n {
	case 0:
	case 1:
		s += " " + typeString(sig.Results().At(0).Type(), q)
	default:
		var results []string
		for v := range sig.Results().Variables() {
			results = append(results, typeString(v.Type(), q))
		}
		s += " (" + strings.Join(results, ", ") + ")"
	}
	return s
}

// typeString is types.TypeString without the parameter names of the
// function types within t.
func typeString(t types.Type, q types.Qualifier) string {
	switch t := t.(type) {
	case *types.Signature:
		return "func" + signature(t, q)
	case *types.Pointer:
		return "*" + typeString(t.Elem(), q)
	case *types.Slice:
		return "[]" + typeString(t.Elem(), q)
	case *types.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), typeString(t.Elem(), q))
	case *types.Map:
		return "map[" + typeString(t.Key(), q) + "]" + typeString(t.Elem(), q)
	case *types.Chan:
		switch t.Dir() {
		case types.SendOnly:
			return "chan<- " + typeString(t.Elem(), q)
		case types.RecvOnly:
			return "<-chan " + typeString(t.Elem(), q)
		}
		return "chan " + typeString(t.Elem(), q)
	case *types.Named:
		s := t.Obj().Name()
		if p := t.Obj().Pkg(); p != nil {
			if qual := q(p); qual != "" {
				s = qual + "." + s
			}
		}
		if args := t.TypeArgs(); args.Len() > 0 {
			var parts []string
			for a := range args.Types() {
				parts = append(parts, typeString(a, q))
			}
			s += "[" + strings.Join(parts, ", ") + "]"
		}
		return s
	}
	return types.TypeString(t, q)
}
