package target

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"
)

// Model is the modelled server of Config.Workers and Config.ServiceTime: a
// queue with Workers servers, each serving one request at a time for
// exactly ServiceTime, taken in arrival order (FIFO) when every server is
// busy: an M/D/c queue in Kendall's notation, whose capacity is
// Workers/ServiceTime requests per second. Its schedule is kept in
// virtual time: a request's end is max(arrival, earliest free server) +
// ServiceTime, computed at admission, and the handler only waits for that
// instant, so a wake-up the machine delays adds to that request's latency
// but never lowers the capacity. Safe for concurrent use.
type Model struct {
	service time.Duration

	mu   sync.Mutex
	free freeTimes // each server's next free instant, a min-heap
}

// NewModel returns a Model with workers servers of the given service time.
// Errors: workers < 1 or a service time <= 0.
func NewModel(workers int, service time.Duration) (*Model, error) {
	if workers < 1 {
		return nil, fmt.Errorf("target: workers %d: want at least 1", workers)
	}
	if service <= 0 {
		return nil, fmt.Errorf("target: service time %s: want more than 0", service)
	}
	m := &Model{service: service, free: make(freeTimes, workers)}
	heap.Init(&m.free)
	return m, nil
}

// Capacity is the model's saturation throughput in requests per second:
// Workers / ServiceTime.
func (m *Model) Capacity() float64 {
	return float64(len(m.free)) / m.service.Seconds()
}

// Admit schedules a request arriving at now and returns the instant its
// service ends: it starts when the earliest-free server is free (now if one
// is idle) and takes the service time.
func (m *Model) Admit(now time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	start := m.free[0]
	if start.Before(now) {
		start = now
	}
	end := start.Add(m.service)
	m.free[0] = end
	heap.Fix(&m.free, 0)
	return end
}

// Serve admits a request arriving now and waits for the end of its
// service. It returns ctx's error, without waiting longer, when ctx ends
// first (the client went away); the server stays booked, as a real one
// finishing work nobody reads.
func (m *Model) Serve(ctx context.Context) error {
	end := m.Admit(time.Now())
	t := time.NewTimer(time.Until(end))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// freeTimes is a min-heap of instants (container/heap).
type freeTimes []time.Time

func (f freeTimes) Len() int           { return len(f) }
func (f freeTimes) Less(i, j int) bool { return f[i].Before(f[j]) }
func (f freeTimes) Swap(i, j int)      { f[i], f[j] = f[j], f[i] }
func (f *freeTimes) Push(x any)        { *f = append(*f, x.(time.Time)) }
func (f *freeTimes) Pop() any {
	old := *f
	x := old[len(old)-1]
	*f = old[:len(old)-1]
	return x
}
