package model

import (
	"fmt"
	"regexp"
)

var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks that an API read from outside (api.json) is well formed:
// every name a C identifier, every type complete, layouts non-negative. It
// does not check that the C is meaningful; the emitter and the C compiler
// do that.
func (a *API) Validate() error {
	for i, e := range a.Enums {
		if e == nil || (e.Tag == "" && e.Typedef == "") {
			return fmt.Errorf("enum %d has no name", i)
		}
		if err := names("enum", e.Tag, e.Typedef); err != nil {
			return err
		}
		for _, v := range e.Values {
			if !ident.MatchString(v.Name) {
				return fmt.Errorf("enum %s: value name %q", e.Name(), v.Name)
			}
		}
	}
	for i, s := range a.Structs {
		if s == nil || (s.Tag == "" && s.Typedef == "") {
			return fmt.Errorf("struct %d has no name", i)
		}
		if err := names("struct", s.Tag, s.Typedef); err != nil {
			return err
		}
		if s.Size < 0 || s.Align < 1 || s.Align&(s.Align-1) != 0 {
			return fmt.Errorf("struct %s: size %d, align %d", s.Name(), s.Size, s.Align)
		}
		for _, f := range s.Fields {
			if !ident.MatchString(f.Name) || f.Offset < 0 || f.Offset > s.Size {
				return fmt.Errorf("struct %s: member %q at %d", s.Name(), f.Name, f.Offset)
			}
			if err := f.Type.validate(false); err != nil {
				return fmt.Errorf("struct %s.%s: %w", s.Name(), f.Name, err)
			}
		}
	}
	for i, t := range a.Typedefs {
		if t == nil || !ident.MatchString(t.Name) {
			return fmt.Errorf("typedef %d has a bad name", i)
		}
		if err := t.Type.validate(false); err != nil {
			return fmt.Errorf("typedef %s: %w", t.Name, err)
		}
	}
	byName := map[string]*Typedef{}
	for _, t := range a.Typedefs {
		byName[t.Name] = t
	}
	for _, t := range a.Typedefs {
		x := t.Type
		for steps := 0; x.Kind == KTypedef; steps++ {
			next, ok := byName[x.Name]
			if !ok {
				break
			}
			if steps > len(a.Typedefs) {
				return fmt.Errorf("typedef %s: a cycle of typedefs", t.Name)
			}
			x = next.Type
		}
	}
	for i, f := range a.Functions {
		if f == nil || !ident.MatchString(f.Name) {
			return fmt.Errorf("function %d has a bad name", i)
		}
		if err := f.Result.validate(true); err != nil {
			return fmt.Errorf("function %s: result: %w", f.Name, err)
		}
		for _, p := range f.Params {
			if p == nil || !ident.MatchString(p.Name) {
				return fmt.Errorf("function %s: a parameter has a bad name", f.Name)
			}
			if err := p.Type.validate(false); err != nil {
				return fmt.Errorf("function %s: parameter %s: %w", f.Name, p.Name, err)
			}
		}
	}
	return nil
}

func names(what string, ns ...string) error {
	for _, n := range ns {
		if n != "" && !ident.MatchString(n) {
			return fmt.Errorf("%s name %q", what, n)
		}
	}
	return nil
}

// validate checks a type tree; void is allowed only where voidOK (results
// and what pointers point to).
func (t *Type) validate(voidOK bool) error {
	if t == nil {
		return fmt.Errorf("missing type")
	}
	switch t.Kind {
	case KVoid:
		if !voidOK {
			return fmt.Errorf("void used as a value type")
		}
	case KBuiltin, KTypedef, KStruct, KEnum:
		if t.Kind == KBuiltin && !builtinName.MatchString(t.Name) || t.Kind != KBuiltin && !ident.MatchString(t.Name) {
			return fmt.Errorf("%s type name %q", t.Kind, t.Name)
		}
	case KPointer:
		return t.Elem.validate(true)
	case KFunc:
		if err := t.Result.validate(true); err != nil {
			return err
		}
		for _, p := range t.Params {
			if p == nil || !ident.MatchString(p.Name) {
				return fmt.Errorf("function type: a parameter has a bad name")
			}
			if err := p.Type.validate(false); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown type kind %q", t.Kind)
	}
	return nil
}

var builtinName = regexp.MustCompile(`^[a-z_][a-z0-9_]*( [a-z_][a-z0-9_]*)*$`)
