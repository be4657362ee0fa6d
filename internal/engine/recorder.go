package engine

import (
	"sync"

	"github.com/phalanxload/phalanx/internal/hist"
)

// maxStatus bounds the status codes counted individually; a final status
// outside [100, maxStatus) is a protocol error.
const maxStatus = 600

// Counts are the outcomes of one interval (or one run) of one engine.
type Counts struct {
	// Requests counts completed responses.
	Requests int64
	// BytesRead counts response wire bytes (see response.wireBytes).
	BytesRead int64
	// Status counts completed responses by status code.
	Status [maxStatus]int64
	// Errors counts failed requests by kind.
	Errors [numErrorKinds]int64
}

// Add adds o to c.
func (c *Counts) Add(o *Counts) {
	c.Requests += o.Requests
	c.BytesRead += o.BytesRead
	for i := range c.Status {
		c.Status[i] += o.Status[i]
	}
	for i := range c.Errors {
		c.Errors[i] += o.Errors[i]
	}
}

// ErrorTotal returns the number of failed requests.
func (c *Counts) ErrorTotal() int64 {
	var n int64
	for _, v := range c.Errors {
		n += v
	}
	return n
}

// StatusMap returns the non-zero status counts.
func (c *Counts) StatusMap() map[int]int64 {
	m := map[int]int64{}
	for code, v := range c.Status {
		if v != 0 {
			m[code] = v
		}
	}
	return m
}

// ErrorMap returns the non-zero error counts by kind name.
func (c *Counts) ErrorMap() map[string]int64 {
	m := map[string]int64{}
	for k, v := range c.Errors {
		if v != 0 {
			m[ErrorKind(k).String()] = v
		}
	}
	return m
}

// slot is one interval's data.
type slot struct {
	hist   *hist.Histogram
	counts Counts
}

func newSlot() *slot { return &slot{hist: hist.New()} }

func (s *slot) reset() {
	s.hist.Reset()
	s.counts = Counts{}
}

// recorder is one worker's measurement state. Its connections record into
// it under mu, which only they and the interval collector take (never shared
// across workers). It holds the current interval's slot and the next one, so
// that a sample that ends just after a boundary, before the collector swaps,
// still lands in the interval its end time belongs to.
type recorder struct {
	mu   sync.Mutex
	idx  int // interval index of cur
	cur  *slot
	next *slot
}

func newRecorder() *recorder {
	return &recorder{cur: newSlot(), next: newSlot()}
}

// slotFor returns the slot for interval k. Called with mu held.
func (r *recorder) slotFor(k int) *slot {
	if k > r.idx {
		return r.next
	}
	return r.cur // k <= idx: a late sample lands in the current interval
}

// swap hands out the slot of interval r.idx and advances to the next one,
// replacing the handed-out slot with spare (which must be reset).
func (r *recorder) swap(spare *slot) *slot {
	r.mu.Lock()
	out := r.cur
	r.cur, r.next = r.next, spare
	r.idx++
	r.mu.Unlock()
	return out
}
