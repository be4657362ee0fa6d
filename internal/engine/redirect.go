package engine

import (
	"net/url"
	"strings"

	"github.com/phalanxload/phalanx/internal/http1"
	"github.com/phalanxload/phalanx/internal/measure"
	"github.com/phalanxload/phalanx/internal/plan"
)

// Redirects (plan.MaxRedirects > 0). A response of status 301, 302, 303,
// 307 or 308 with a Location is followed on the same slot, up to
// MaxRedirects hops, as curl -L --max-redirs N does; the exchange is one
// request in the counts and one latency sample (first start to final last
// byte), its hops counted in measure.Counts.Redirects. Only the same
// origin is followed (scheme, host and port of the hop's URL, RFC 6454):
// the engine has one dial address, which passed the agent's target
// allowlist (internal/allow) when the run was prepared, so a hop never
// reaches an address the allowlist has not seen; a Location on another
// origin, or one that is no http(s) URL, ends the exchange in
// measure.ErrRedirect unsent, as does a 3xx after MaxRedirects hops (a
// loop is caught by the hop limit, as curl's and Go's clients catch it).

// isRedirect reports whether status is one a client follows to Location.
func isRedirect(status int) bool {
	switch status {
	case 301, 302, 303, 307, 308:
		return true
	}
	return false
}

// hop returns the request that follows en's response of status with
// Location loc, after hops hops; false when it is not followed (the hop
// limit, another origin, a Location that is no URL). 303, and 301 or 302
// to a POST, become a GET without a body (RFC 9110 section 15.4, as
// browsers and curl do); 307 and 308 keep the method and body.
func (en *entry) hop(e *Engine, status int, loc []byte, hops int64) (*entry, bool) {
	if hops >= int64(e.plan.MaxRedirects) {
		return nil, false
	}
	t := en.target
	scheme := "http"
	if t.TLS {
		scheme = "https"
	}
	base, err := url.Parse(scheme + "://" + t.HostHeader + t.RequestURI)
	if err != nil {
		return nil, false
	}
	ref, err := url.Parse(string(loc))
	if err != nil {
		return nil, false
	}
	u := base.ResolveReference(ref)
	if u.Scheme != scheme || !strings.EqualFold(u.Hostname(), t.Host) || portOf(u) != t.Port {
		return nil, false
	}
	t.RequestURI = u.RequestURI()
	method, body := en.method, en.body
	if (status == 303 && method != "HEAD") || ((status == 301 || status == 302) && method == "POST") {
		method, body = "GET", nil
	}
	r := plan.Request{Method: method, Headers: en.headers, Body: body}
	next := &entry{method: method, uri: t.RequestURI, headers: en.headers, body: body, idx: en.idx, head: method == "HEAD", target: t, isHop: true}
	next.h1 = buildRequest(e.plan, t, r)
	switch e.plan.Protocol {
	case plan.H2:
		next.h2 = buildH2Fields(t, r)
	case plan.H3:
		next.h3 = buildH3Request(t, r)
	}
	return next, true
}

// portOf returns u's port, defaulted from its scheme.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// addConn notes a connection the exchange opened: its first in conn, a
// redirect hop's after it in hopConns.
func (o *outcome) addConn(ci *connInfo) {
	if o.conn == nil {
		o.conn = ci
		return
	}
	o.hopConns = append(o.hopConns, ci)
}

// add adds a response's bytes to the exchange's (a redirect hop's).
func (s *sizes) add(r *http1.Response) {
	s.wire += r.WireBytes
	s.header += r.HeaderBytes
	s.body += r.BodyBytes
	s.fields += r.HeaderBytes
}

// addSizes adds an HTTP/2 response's bytes to the exchange's, its
// Content-Encoding the latest's.
func (s *sizes) addSizes(o sizes) {
	s.wire += o.wire
	s.header += o.header
	s.body += o.body
	s.fields += o.fields
	s.enc = o.enc
}

// recordTraffic records what an outcome sent besides itself: the
// connections it opened and its redirect hops. Called with mu held.
func (r *recorder) recordTraffic(k int, o *outcome) {
	if o.conn != nil {
		r.recordConn(k, o.conn)
	}
	for _, ci := range o.hopConns {
		r.recordConn(k, ci)
	}
	if o.hops > 0 {
		r.counts(k).Redirects += o.hops
	}
}

// failKeep ends an exchange whose last response was read whole in kind
// (a redirect not followed): the connection stays, unless the response
// closed it.
func (c *conn) failKeep(o outcome, kind measure.ErrorKind) outcome {
	o.failed, o.kind = true, kind
	c.idleSince = o.end
	if c.resp.Close || c.e.plan.NoKeepAlive {
		c.drop()
		c.dropped = c.resp.Close && !c.e.plan.NoKeepAlive
	}
	return o
}
