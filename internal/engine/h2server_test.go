package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Action is what the framing-level server does with one stream, decided
// when its HEADERS arrive.
type h2Action int

const (
	// h2Answer reads the whole request, opening the stream's window for
	// its body, then answers 200 with a 2-byte body.
	h2Answer h2Action = iota
	// h2Early answers 405 with END_STREAM at once, then resets the stream
	// with RST_STREAM(NO_ERROR) (RFC 9113 section 8.1), as NGINX does to
	// an upload it will not read; the body is never read (no stream
	// WINDOW_UPDATE).
	h2Early
	// h2EarlyNoReset answers 405 with END_STREAM at once and leaves the
	// stream half closed; the body is never read.
	h2EarlyNoReset
	// h2Refuse resets the stream with RST_STREAM(REFUSED_STREAM) at once.
	h2Refuse
	// h2Stall never answers and never opens the stream's window.
	h2Stall
	numH2Actions
)

// h2FrameServer is a framing-level HTTP/2 server over TLS on 127.0.0.1,
// on golang.org/x/net/http2's Framer, whose behaviour per stream is the
// test's (decide). Its initial stream window is the default 65,535 bytes;
// it returns the connection window for every DATA frame at once (RFC 9113
// section 6.9: DATA on closed streams counts too) and a stream's only when
// it answers it after reading it whole.
type h2FrameServer struct {
	url string
	ca  []byte
	// decide returns the action for the n-th stream the server received
	// (from 0, over all connections) with that :method and :path.
	decide func(n int64, method, path string) h2Action

	streams  atomic.Int64 // HEADERS received
	accepted atomic.Int64 // connections
	serving  atomic.Int64 // connections being served
	mu       sync.Mutex
	actions  [numH2Actions]int64   // streams by the action taken
	resets   map[http2.ErrCode]int // RST_STREAM received, by code
	bodyMax  map[string]int64      // most request body bytes received on one stream, by path
	problems []string
	// keepFields keeps every stream's decoded header fields in fields
	// (set before the run).
	keepFields bool
	fields     [][]hpack.HeaderField
	// headerTable, if set, is sent as SETTINGS_HEADER_TABLE_SIZE and
	// enforced by the decoder once the client has acknowledged it.
	headerTable *uint32
	// extra are more response header fields (name, value, ...) of
	// h2Answer's 200 (set before the run).
	extra []string
	// continued answers h2Answer streams with a header block split over
	// HEADERS and CONTINUATION (set before the run).
	continued bool
	// headerBytes counts HEADERS frame payload bytes received.
	headerBytes atomic.Int64
}

func newH2FrameServer(t testing.TB, decide func(n int64, method, path string) h2Action) *h2FrameServer {
	t.Helper()
	s := &h2FrameServer{decide: decide, resets: map[http2.ErrCode]int{}, bodyMax: map[string]int64{}}
	s.url, s.ca = serveTLS(t, []string{"h2"}, func(c net.Conn) {
		s.accepted.Add(1)
		s.serving.Add(1)
		defer s.serving.Add(-1)
		s.serve(c)
	})
	return s
}

func (s *h2FrameServer) problem(format string, args ...any) {
	s.mu.Lock()
	if len(s.problems) < 10 {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
	s.mu.Unlock()
}

// check fails t on the protocol problems the server saw.
func (s *h2FrameServer) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) > 0 {
		t.Errorf("server saw protocol problems: %q", s.problems)
	}
}

// counts waits (up to 5 s) until every connection has ended, the client
// having closed them, and returns the streams by action and the
// RST_STREAMs received by code.
func (s *h2FrameServer) counts(t *testing.T) ([numH2Actions]int64, map[http2.ErrCode]int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.serving.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := s.serving.Load(); n != 0 {
		t.Errorf("server: %d connections still open 5 s after the run", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := map[http2.ErrCode]int{}
	for k, v := range s.resets {
		r[k] = v
	}
	return s.actions, r
}

// h2ServerStream is a stream the server has received and not closed.
type h2ServerStream struct {
	action h2Action
}

// serve runs one connection: every frame is handled, and answered, by
// this goroutine as it is read.
func (s *h2FrameServer) serve(c net.Conn) {
	br := bufio.NewReader(c)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, preface); err != nil || string(preface) != http2.ClientPreface {
		s.problem("bad client preface")
		return
	}
	bw := bufio.NewWriter(c)
	fr := http2.NewFramer(bw, br)
	dec := hpack.NewDecoder(4096, nil)
	fr.ReadMetaHeaders = dec
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	block := func(status int, fields ...string) []byte {
		hbuf.Reset()
		_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
		for i := 0; i+1 < len(fields); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return append([]byte(nil), hbuf.Bytes()...)
	}
	settings := []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 100}}
	if s.headerTable != nil {
		settings = append(settings, http2.Setting{ID: http2.SettingHeaderTableSize, Val: *s.headerTable})
	}
	if fr.WriteSettings(settings...) != nil || bw.Flush() != nil {
		return
	}
	open := map[uint32]*h2ServerStream{}
	paths := map[uint32]string{} // every stream's path, for the body bytes of closed ones too
	bodies := map[uint32]int64{}
	answer := func(id uint32) error {
		if s.continued {
			// The block in a HEADERS and a CONTINUATION frame, with a
			// 3,000-byte field the encoder indexes (and the body said to be
			// brotli).
			b := block(200, "content-length", "2", "content-encoding", "br", "x-pad", strings.Repeat("p", 3000), "x-seq", strconv.Itoa(int(id)))
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:len(b)/2]}); err != nil {
				return err
			}
			if err := fr.WriteContinuation(id, true, b[len(b)/2:]); err != nil {
				return err
			}
		} else if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block(200, append([]string{"content-length", "2"}, s.extra...)...), EndHeaders: true}); err != nil {
			return err
		}
		delete(open, id)
		return fr.WriteData(id, true, []byte("ok"))
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if _, ok := err.(http2.StreamError); ok {
				s.problem("%v", err)
				continue
			}
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = fr.WriteSettingsAck()
			} else if s.headerTable != nil {
				// Acknowledged: the client's blocks from now on must keep
				// within our table (RFC 9113 section 6.5.3).
				dec.SetAllowedMaxDynamicTableSize(*s.headerTable)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			method, path := f.PseudoValue("method"), f.PseudoValue("path")
			n := s.streams.Add(1) - 1
			s.headerBytes.Add(int64(f.Length))
			if s.keepFields {
				s.mu.Lock()
				s.fields = append(s.fields, append([]hpack.HeaderField(nil), f.Fields...))
				s.mu.Unlock()
			}
			a := s.decide(n, method, path)
			s.mu.Lock()
			s.actions[a]++
			s.mu.Unlock()
			st := &h2ServerStream{action: a}
			open[f.StreamID] = st
			paths[f.StreamID] = path
			switch a {
			case h2Answer:
				if f.StreamEnded() {
					err = answer(f.StreamID)
				}
			case h2Early, h2EarlyNoReset:
				err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: block(405, "content-length", "0"), EndStream: true, EndHeaders: true})
				if err == nil && a == h2Early {
					delete(open, f.StreamID)
					err = fr.WriteRSTStream(f.StreamID, http2.ErrCodeNo)
				}
			case h2Refuse:
				delete(open, f.StreamID)
				err = fr.WriteRSTStream(f.StreamID, http2.ErrCodeRefusedStream)
			}
		case *http2.DataFrame:
			if f.Length > 0 {
				err = fr.WriteWindowUpdate(0, f.Length)
			}
			bodies[f.StreamID] += int64(len(f.Data()))
			s.mu.Lock()
			path := paths[f.StreamID]
			s.bodyMax[path] = max(s.bodyMax[path], bodies[f.StreamID])
			s.mu.Unlock()
			st := open[f.StreamID]
			if st == nil || err != nil {
				break // a stream we closed: the connection window only
			}
			if st.action != h2Answer {
				break
			}
			if f.StreamEnded() {
				err = answer(f.StreamID)
			} else if f.Length > 0 {
				err = fr.WriteWindowUpdate(f.StreamID, f.Length)
			}
		case *http2.RSTStreamFrame:
			s.mu.Lock()
			s.resets[f.ErrCode]++
			s.mu.Unlock()
			delete(open, f.StreamID)
		}
		if err == nil {
			_ = bw.Flush()
		}
		// A failed write (the client closed while a WINDOW_UPDATE was
		// due) sticks in bw; the frames the client sent before its close
		// are still read and counted, until the read ends.
	}
}
