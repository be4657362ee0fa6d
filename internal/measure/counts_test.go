package measure

import (
	"reflect"
	"testing"
)

func TestAddAndTotals(t *testing.T) {
	var a, b Counts
	a.Requests, a.Issued = 3, 5
	a.Status[200] = 3
	a.Errors[ErrReset] = 2
	a.TLS = map[string]int64{"version:TLS 1.3": 1}
	b.Requests = 1
	b.Status[503] = 1
	b.Errors[ErrTimeout] = 1
	b.Missed = 4
	b.TLS = map[string]int64{"version:TLS 1.3": 2, "alpn:h2": 1}
	var sum Counts
	sum.Add(&a)
	sum.Add(&b)
	if sum.Requests != 4 || sum.Issued != 5 || sum.ErrorTotal() != 3 || sum.Ended() != 7 || sum.Missed != 4 {
		t.Errorf("sum %+v", sum)
	}
	if got, want := sum.StatusMap(), map[int]int64{200: 3, 503: 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("status %v, want %v", got, want)
	}
	if got, want := sum.ErrorMap(), map[string]int64{"reset": 2, "timeout": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("errors %v, want %v", got, want)
	}
	if got, want := sum.TLS, map[string]int64{"version:TLS 1.3": 3, "alpn:h2": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("tls %v, want %v", got, want)
	}
}

func TestErrorKindNamesRoundTrip(t *testing.T) {
	for k := ErrorKind(0); k < NumErrorKinds; k++ {
		got, err := ParseErrorKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseErrorKind(%q) = %v, %v", k.String(), got, err)
		}
	}
	if _, err := ParseErrorKind("unknown"); err == nil {
		t.Error("ParseErrorKind(unknown) succeeded")
	}
	var c Counts
	if c.AddStatus(600, 1) == nil || c.AddStatus(-1, 1) == nil || c.AddError("nope", 1) == nil {
		t.Error("out-of-range status or unknown kind accepted")
	}
}
