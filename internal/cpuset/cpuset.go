package cpuset

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Parse parses a CPU list such as "2-15" or "0,2,4-7" (taskset -c syntax)
// into sorted, unique CPU numbers.
func Parse(list string) ([]int, error) {
	seen := map[int]bool{}
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpu list %q: bad cpu %q: want e.g. 0-3,8", list, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q: want low-high", list, part)
			}
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nil
}

// Format formats CPUs as a CPU list with ranges ("0-3,8").
func Format(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", cpus[i], cpus[j])
		} else {
			fmt.Fprintf(&b, "%d", cpus[i])
		}
		i = j + 1
	}
	return b.String()
}

// Allowed returns the CPUs this process may run on (sched_getaffinity of
// the calling thread), sorted.
func Allowed() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("get cpu affinity: %w", err)
	}
	var out []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Check returns an error naming the CPUs of cpus (sorted, as Parse returns
// them) that are not in allowed (as Allowed returns it), and listing
// allowed; nil when all are.
func Check(cpus, allowed []int) error {
	ok := make(map[int]bool, len(allowed))
	for _, c := range allowed {
		ok[c] = true
	}
	var missing []int
	for _, c := range cpus {
		if !ok[c] {
			missing = append(missing, c)
		}
	}
	switch {
	case len(cpus) == 0:
		return fmt.Errorf("no CPUs given; this process may use %s", Format(allowed))
	case len(missing) == 0:
		return nil
	case len(missing) == 1:
		return fmt.Errorf("CPU %s is not available; this process may use %s", Format(missing), Format(allowed))
	default:
		return fmt.Errorf("CPUs %s are not available; this process may use %s", Format(missing), Format(allowed))
	}
}

// PinProcess sets the affinity of every thread of this process to cpus
// (threads created later inherit it from their creator). It fails, before
// pinning anything, when a CPU is not in the process's allowed set.
func PinProcess(cpus []int) error {
	allowed, err := Allowed()
	if err != nil {
		return err
	}
	if err := Check(cpus, allowed); err != nil {
		return err
	}
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("pin cpus: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin thread %d to cpus %s: %w", tid, Format(cpus), err)
		}
	}
	return nil
}

// onlineFile lists the CPUs the kernel has online (Linux sysfs, CPU list
// syntax); a variable so that tests can point it elsewhere.
var onlineFile = "/sys/devices/system/cpu/online"

// Online returns the CPUs the kernel has online, sorted (Linux's
// /sys/devices/system/cpu/online). Inside a container it lists the host's
// CPUs, which Allowed may narrow.
func Online() ([]int, error) {
	b, err := os.ReadFile(onlineFile)
	if err != nil {
		return nil, fmt.Errorf("online cpus: %w", err)
	}
	cpus, err := Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("online cpus: %s: %w", onlineFile, err)
	}
	return cpus, nil
}

// Inherited returns the CPUs this process may run on (Allowed) and whether
// that set was narrowed by whoever started it: a CPU online (Online) that
// it may not use, as taskset, a cgroup cpuset (docker --cpuset-cpus), or
// the kubelet's static CPU manager leave it. A process so started is
// pinned to the set already: every thread inherits it.
func Inherited() (cpus []int, narrowed bool, err error) {
	allowed, err := Allowed()
	if err != nil {
		return nil, false, err
	}
	online, err := Online()
	if err != nil {
		return nil, false, err
	}
	return allowed, Check(online, allowed) != nil, nil
}
