// Package search owns the capacity search (coordctl search): the order of
// its steps (exponential growth from the range's start until a step
// fails, then bisection to a precision, then repeats of the two steps
// next to the boundary), each step's verdict (pass, fail, inconclusive)
// and the knee with its confidence interval (golang.org/x/perf/benchmath,
// as benchstat). Running a step (a plan on the cluster, stored in the run
// store) is the caller's Runner; the result is report.Search, rendered by
// internal/report.
package search
