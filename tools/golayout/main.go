// Command golayout prints the JSON encoding layout of the Go types reachable from the v1beta1
// DynamoComponentDeploymentSpec (the worker hash) and the v1alpha1 DynamoGraphDeploymentSpec
// (the conversion's preserved-spec annotation): for each struct, its fields in encoding order.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	v1alpha1 "github.com/ai-dynamo/dynamo/deploy/operator/api/v1alpha1"
	v1beta1 "github.com/ai-dynamo/dynamo/deploy/operator/api/v1beta1"
)

type field struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	OmitEmpty bool   `json:"omitempty,omitempty"`
	OmitZero  bool   `json:"omitzero,omitempty"`
}

var marshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
var structs = map[string][]field{}

// typeName is the package's last two path elements and the type name, e.g.
// "core/v1.Container" (core/v1 and meta/v1 both end in "v1").
func typeName(t reflect.Type) string {
	parts := strings.Split(t.PkgPath(), "/")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, "/") + "." + t.Name()
}

func ref(t reflect.Type) string {
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		if t.Kind() != reflect.Pointer {
			return "marshaler:" + typeName(t)
		}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "ptr:" + ref(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
		return "slice:" + ref(t.Elem())
	case reflect.Map:
		return "map:" + ref(t.Elem())
	case reflect.Struct:
		name := typeName(t)
		if _, ok := structs[name]; !ok {
			structs[name] = nil
			structs[name] = fields(t)
		}
		return "struct:" + name
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int"
	case reflect.Float32, reflect.Float64:
		return "float"
	case reflect.Interface:
		return "any"
	}
	panic("unsupported kind " + t.String())
}

func fields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		parts := strings.Split(tag, ",")
		name := parts[0]
		opts := map[string]bool{}
		for _, o := range parts[1:] {
			opts[o] = true
		}
		if name == "" && f.Anonymous {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, fields(ft)...) // promoted, in place
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, field{name, ref(f.Type), opts["omitempty"], opts["omitzero"]})
	}
	return out
}

func main() {
	root := ref(reflect.TypeOf(v1beta1.DynamoComponentDeploymentSpec{}))
	alphaSpec := ref(reflect.TypeOf(v1alpha1.DynamoGraphDeploymentSpec{}))
	names := make([]string, 0, len(structs))
	for n := range structs {
		names = append(names, n)
	}
	sort.Strings(names)
	ordered := map[string]any{"root": root, "alphaGraphSpec": alphaSpec, "structs": structs}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(ordered); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
