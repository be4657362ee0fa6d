package engine

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// serveTLS starts a TLS listener on 127.0.0.1 (ALPN protos) that runs
// serve on one goroutine per accepted connection, and returns its base
// URL ("https://127.0.0.1:port") and CA certificate (PEM). Cleanup closes
// the listener and every open connection and joins the goroutines.
func serveTLS(t testing.TB, protos []string, serve func(c net.Conn)) (url string, ca []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.NotFoundHandler()) // only for its certificate
	ts.StartTLS()
	cert := ts.TLS.Certificates[0]
	ca = pemCert(ts.Certificate().Raw)
	ts.Close()
	tln := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: protos})
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	t.Cleanup(func() {
		tln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				serve(c)
			}()
		}
	}()
	return "https://" + ln.Addr().String(), ca
}
