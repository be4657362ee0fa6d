package plan

import (
	"bytes"
	"fmt"
	"go/token"
	"reflect"
	"regexp"
	"strings"

	"github.com/google/go-cmp/cmp"
)

// Difference is one setting two plans do not share: Field is its path in
// Plan's Go names ("Connections", "TLS.ServerName", "Headers[1].Value"),
// A and B its value in the first plan and the second (bytes as their
// length, a missing element as "(none)").
type Difference struct {
	Field string `json:"field"`
	A     string `json:"from"`
	B     string `json:"to"`
}

// Diff returns the settings in which plans a and b differ, secrets
// redacted first (Redacted: no credential appears in a Difference), in
// field order; nil when they are the same plan. It is go-cmp's comparison
// with a reporter that keeps each unequal leaf.
func Diff(a, b Plan) []Difference {
	var r diffReporter
	cmp.Equal(Redacted(a), Redacted(b), cmp.Reporter(&r),
		cmp.Comparer(bytes.Equal),
		cmp.FilterPath(func(p cmp.Path) bool {
			sf, ok := p.Last().(cmp.StructField)
			return ok && !token.IsExported(sf.Name())
		}, cmp.Ignore()))
	return r.diffs
}

// diffReporter collects the unequal leaves of a cmp.Equal (go-cmp's
// Reporter interface).
type diffReporter struct {
	path  cmp.Path
	diffs []Difference
}

func (r *diffReporter) PushStep(ps cmp.PathStep) { r.path = append(r.path, ps) }

func (r *diffReporter) PopStep() { r.path = r.path[:len(r.path)-1] }

func (r *diffReporter) Report(rs cmp.Result) {
	if rs.Equal() {
		return
	}
	vx, vy := r.path.Last().Values()
	// GoString starts at the root type ("{plan.Plan}.Connections"): keep
	// what follows it; an element only one side has is go-cmp's "[1->?]"
	// or "[?->1]", a moved one "[1->2]": keep its index.
	field := r.path.GoString()
	if _, rest, ok := strings.Cut(field, "}."); ok {
		field = rest
	}
	field = sliceStep.ReplaceAllString(field, "[$1$2$3]")
	r.diffs = append(r.diffs, Difference{Field: field, A: diffValue(vx), B: diffValue(vy)})
}

var sliceStep = regexp.MustCompile(`\[(?:(\d+)->\?|\?->(\d+)|(\d+)->\d+)\]`)

func diffValue(v reflect.Value) string {
	switch {
	case !v.IsValid():
		return "(none)"
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
		return fmt.Sprintf("%d bytes", v.Len())
	case v.Kind() == reflect.String:
		return fmt.Sprintf("%q", v.String())
	}
	return fmt.Sprint(v.Interface())
}
