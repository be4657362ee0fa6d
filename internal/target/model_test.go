package target

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestModelAdmit checks the schedule in virtual time: with 2 servers of
// 10 ms, 5 arrivals at t0 end at 10, 10, 20, 20 and 30 ms; an arrival
// after the servers went idle starts at once.
func TestModelAdmit(t *testing.T) {
	m, err := NewModel(2, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Capacity(); got != 200 {
		t.Errorf("Capacity() = %v, want 200", got)
	}
	t0 := time.Unix(1000, 0)
	for i, want := range []time.Duration{10, 10, 20, 20, 30} {
		if got := m.Admit(t0).Sub(t0); got != want*time.Millisecond {
			t.Errorf("arrival %d at t0: ends at +%v, want +%v", i, got, want*time.Millisecond)
		}
	}
	late := t0.Add(time.Second)
	if got := m.Admit(late).Sub(late); got != 10*time.Millisecond {
		t.Errorf("arrival at an idle model: ends at +%v, want +10ms", got)
	}
}

func TestNewModelRefuses(t *testing.T) {
	for _, c := range []struct {
		n int
		d time.Duration
	}{{0, time.Millisecond}, {-1, time.Millisecond}, {1, 0}, {1, -time.Second}} {
		if _, err := NewModel(c.n, c.d); err == nil {
			t.Errorf("NewModel(%d, %v) = nil error, want one", c.n, c.d)
		}
	}
	if _, err := New(Config{Workers: 4}); err == nil {
		t.Error("New with Workers and no ServiceTime: nil error")
	}
}

// TestModelSaturates drives the modelled server over HTTPS with eight times
// as many concurrent clients as it has workers, so that it always has a
// queue: the throughput is its capacity N/D (at most N/D plus the requests
// in service at the start, at least 75 % of it: the clients on a loaded
// machine may let the queue run dry), and no request takes less than D.
func TestModelSaturates(t *testing.T) {
	const (
		workers = 2
		service = 20 * time.Millisecond
		clients = 8 * workers
		run     = 1500 * time.Millisecond
	)
	s, b, _ := startServer(t, Config{Workers: workers, ServiceTime: service})
	c := client(b, false)
	c.Transport.(*http.Transport).MaxIdleConnsPerHost = clients
	defer c.CloseIdleConnections()

	// One request per client first, so every connection's handshake is
	// done before the clock starts.
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			get(t, c, http.MethodGet, s.URL(), false)
		}()
	}
	wg.Wait()

	start := time.Now()
	deadline := start.Add(run)
	var mu sync.Mutex
	var done int
	fastest := time.Hour
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				resp, err := c.Get(s.URL())
				if err != nil {
					t.Errorf("GET: %v", err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body) // read to the end, so the connection is reused
				resp.Body.Close()
				d := time.Since(t0)
				mu.Lock()
				if time.Now().Before(deadline) {
					done++ // ended in the window
				}
				fastest = min(fastest, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := deadline.Sub(start)
	rps := float64(done) / elapsed.Seconds()
	capacity := float64(workers) / service.Seconds()
	upper := capacity + float64(workers)/elapsed.Seconds()
	t.Logf("%d requests in %v: %.1f/s, capacity %.0f/s, fastest %v (server: %d requests, %d connections)", done, elapsed, rps, capacity, fastest, s.Requests(), s.Connections())
	if rps > upper || rps < 0.75*capacity {
		t.Errorf("throughput %.1f/s, want the capacity %.0f/s (%.0f..%.1f)", rps, capacity, 0.75*capacity, upper)
	}
	if fastest < service {
		t.Errorf("fastest request took %v, less than the service time %v", fastest, service)
	}
}
