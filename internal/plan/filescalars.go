package plan

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkScalars checks the scalar values of a plan file's YAML (n, decoded
// into a value of type t at field path) before it is decoded, and returns
// one error per bad value naming its line, field and value and what is
// wrong in words, as the command line's flags do ("line 2: connections
// "abc": not a number"): a number field given text, or a whole-number one a fraction (the
// YAML decoder would say "cannot unmarshal !!str into int", or silently
// truncate 1.5 to 1), a duration field given no duration, a boolean field
// given anything but true or false. Fields the type does not have are
// left to the decoder (unknown fields).
func checkScalars(n *yaml.Node, t reflect.Type, path string) []error {
	switch {
	case n == nil:
		return nil
	case n.Kind == yaml.DocumentNode:
		var errs []error
		for _, c := range n.Content {
			errs = append(errs, checkScalars(c, t, path)...)
		}
		return errs
	case n.Kind == yaml.AliasNode:
		return checkScalars(n.Alias, t, path)
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i].Value, n.Content[i+1]
			for j := range t.NumField() {
				if name, _, _ := strings.Cut(t.Field(j).Tag.Get("yaml"), ","); name == key {
					errs = append(errs, checkScalars(val, t.Field(j).Type, joinPath(path, key))...)
				}
			}
		}
		return errs
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		var errs []error
		for i, c := range n.Content {
			errs = append(errs, checkScalars(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	case n.Kind != yaml.ScalarNode || n.Tag == "!!null":
		return nil
	}
	if problem := scalarProblem(n, t); problem != "" {
		return []error{fmt.Errorf("line %d: %s %q: %s", n.Line, path, n.Value, problem)}
	}
	return nil
}

// scalarProblem says what is wrong with scalar n as a value of type t, or
// "" when nothing is.
func scalarProblem(n *yaml.Node, t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[fileDuration]():
		if _, err := ParseDuration(n.Value); err != nil {
			return err.Error()
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		if n.Tag == "!!int" {
			return ""
		}
		f, err := strconv.ParseFloat(n.Value, 64)
		switch {
		case n.Tag != "!!float" || err != nil:
			return "not a number"
		case f != math.Trunc(f):
			return "not a whole number"
		}
	case t.Kind() == reflect.Float64:
		if _, err := strconv.ParseFloat(n.Value, 64); err != nil || n.Tag != "!!float" && n.Tag != "!!int" {
			return "not a number"
		}
	case t.Kind() == reflect.Bool:
		// The decoder also takes YAML 1.1's spellings for a boolean field.
		switch strings.ToLower(n.Value) {
		case "y", "yes", "on", "n", "no", "off":
			return ""
		}
		if n.Tag != "!!bool" {
			return "want true or false"
		}
	}
	return ""
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// parseScalars decodes data into a YAML node tree and checks its scalars
// (checkScalars) against the plan file's structure; a syntax error is
// left to the decoder (nil).
func parseScalars(data []byte) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil
	}
	return errors.Join(checkScalars(&root, reflect.TypeFor[File](), "")...)
}
