package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// cpuWait returns the agent process's run-queue delay so far: the time its
// threads spent runnable but waiting for a CPU, summed over its live
// threads, from the second field of each /proc/self/task/TID/schedstat
// (nanoseconds; Documentation/scheduler/sched-stats.rst). A thread that
// exited takes its part with it, so an interval's delay is the difference
// of two readings floored at zero. 0 where the file is absent (not Linux,
// a kernel without CONFIG_SCHED_INFO).
func cpuWait() time.Duration {
	paths, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var sum int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		f := bytes.Fields(b)
		if len(f) < 2 {
			continue
		}
		if ns, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil && ns > 0 {
			sum += ns
		}
	}
	return time.Duration(sum)
}
