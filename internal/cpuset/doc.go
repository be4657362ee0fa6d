// Package cpuset parses Linux CPU lists ("0-3,8,10-11", the format of
// taskset -c and /proc/*/status Cpus_allowed_list) and pins the whole
// process to a set with sched_setaffinity. It owns nothing else.
package cpuset
