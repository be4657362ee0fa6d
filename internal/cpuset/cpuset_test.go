package cpuset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"0", []int{0}},
		{"2-5", []int{2, 3, 4, 5}},
		{"0,2,4-6,2", []int{0, 2, 4, 5, 6}},
	} {
		got, err := Parse(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%q) = %v, %v, want %v", tc.in, got, err, tc.want)
		}
		if f := Format(got); f != strings.ReplaceAll(Format(tc.want), " ", "") {
			t.Errorf("Format(%v) = %q", got, f)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "-1", "1-"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded, want error", bad)
		}
	}
	if got := Format([]int{0, 1, 2, 5, 7, 8}); got != "0-2,5,7-8" {
		t.Errorf("Format = %q", got)
	}
}

// TestPinProcess pins to CPU 0 and checks every thread's Cpus_allowed_list.
func TestPinProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	orig, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	origList := field(string(orig), "Cpus_allowed_list")
	all, err := Parse(origList)
	if err != nil {
		t.Fatal(err)
	}
	// PinProcess only narrows (it refuses CPUs outside the current
	// affinity), so the cleanup widens every thread back itself.
	t.Cleanup(func() {
		var set unix.CPUSet
		for _, c := range all {
			set.Set(c)
		}
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, task := range tasks {
			if tid, err := strconv.Atoi(task.Name()); err == nil {
				if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
					t.Errorf("restore affinity of thread %d: %v", tid, err)
				}
			}
		}
	})
	if err := PinProcess([]int{all[0]}); err != nil {
		t.Fatal(err)
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // thread exited
		}
		if got := field(string(b), "Cpus_allowed_list"); got != Format([]int{all[0]}) {
			t.Errorf("%s: Cpus_allowed_list = %q, want %q", p, got, Format([]int{all[0]}))
		}
	}
}

func field(status, name string) string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func TestCheck(t *testing.T) {
	allowed := []int{0, 1}
	for _, tc := range []struct {
		cpus []int
		want string // "" for no error
	}{
		{[]int{0, 1}, ""},
		{[]int{1}, ""},
		{[]int{5, 6, 7, 8, 9}, "CPUs 5-9 are not available; this process may use 0-1"},
		{[]int{1, 2}, "CPU 2 is not available; this process may use 0-1"},
		{[]int{0, 3, 5, 6}, "CPUs 3,5-6 are not available; this process may use 0-1"},
		{nil, "no CPUs given; this process may use 0-1"},
	} {
		err := Check(tc.cpus, allowed)
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("Check(%v, %v) = %v, want %q", tc.cpus, allowed, err, tc.want)
		}
	}
}

// TestPinProcessRejectsUnavailable asks for CPUs past the allowed set: the
// error names them and the allowed set (not sched_setaffinity's EINVAL),
// and nothing is pinned.
func TestPinProcessRejectsUnavailable(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	allowed, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if got := Format(allowed); got != field(string(status), "Cpus_allowed_list") {
		t.Fatalf("Allowed() = %s, /proc/self/status Cpus_allowed_list = %s", got, field(string(status), "Cpus_allowed_list"))
	}
	last := allowed[len(allowed)-1]
	bad := []int{last + 1, last + 2, last + 3, 5000}
	err = PinProcess(append([]int{allowed[0]}, bad...))
	want := fmt.Sprintf("CPUs %s are not available; this process may use %s", Format(bad), Format(allowed))
	if err == nil || err.Error() != want {
		t.Fatalf("PinProcess = %v, want %q", err, want)
	}
	if after, _ := Allowed(); !reflect.DeepEqual(after, allowed) {
		t.Errorf("affinity changed to %s by a rejected PinProcess", Format(after))
	}
}

// TestInherited: a process whose affinity lacks an online CPU was started
// in a narrowed set; one allowed every online CPU was not. The online list
// is a file the test writes (the host's may equal this process's set).
func TestInherited(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	allowed, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	orig := onlineFile
	t.Cleanup(func() { onlineFile = orig })
	for _, tc := range []struct {
		online   string
		narrowed bool
		err      string
	}{
		{online: Format(allowed) + "\n", narrowed: false},
		{online: Format(append(append([]int{}, allowed...), allowed[len(allowed)-1]+1)) + "\n", narrowed: true},
		{online: "zero\n", err: "online cpus: "},
	} {
		onlineFile = filepath.Join(t.TempDir(), "online")
		if err := os.WriteFile(onlineFile, []byte(tc.online), 0o644); err != nil {
			t.Fatal(err)
		}
		got, narrowed, err := Inherited()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), onlineFile) {
				t.Errorf("Inherited() with online %q = %v, %v, %v; want an error naming %s", tc.online, got, narrowed, err, onlineFile)
			}
			continue
		}
		if err != nil || narrowed != tc.narrowed || !reflect.DeepEqual(got, allowed) {
			t.Errorf("Inherited() with online %q = %v, %v, %v; want %v, %v", tc.online, got, narrowed, err, allowed, tc.narrowed)
		}
	}
}
