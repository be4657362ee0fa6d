package plan

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Defaults applied by (*Plan).SetDefaults; they follow wrk where wrk has one.
const (
	DefaultMethod      = "GET"
	DefaultConnections = 10
	DefaultDuration    = 10 * time.Second
	DefaultTimeout     = 2 * time.Second // wrk's --timeout default
	DefaultInterval    = time.Second
	// MaxRunLength bounds duration+timeout so that every latency fits the
	// histogram range (internal/hist.HighestUs is 24 h).
	MaxRunLength = 23 * time.Hour
	// MinInterval is the shortest reporting interval accepted.
	MinInterval = 100 * time.Millisecond
)

// Plan is the whole test as the user asked for it.
type Plan struct {
	// URL is the target: an absolute http:// or https:// URL.
	URL string
	// Method is the request method; default GET.
	Method string
	// Headers are sent with every request, in order. A Host header
	// overrides the URL's host.
	Headers []Header
	// Body is sent with every request.
	Body []byte
	// Connections is the total across the cluster; default 10.
	Connections int
	// Duration is the measurement window; default 10 s.
	Duration time.Duration
	// Timeout bounds each request from its send to its last body byte;
	// default 2 s.
	Timeout time.Duration
	// Interval is the reporting interval; default 1 s.
	Interval time.Duration
	// Agents is the number of agents to use; 0 means every live agent.
	Agents int
	// TLS configures the client side of TLS.
	TLS TLS
}

// Header is one request header field.
type Header struct {
	Name, Value string
}

// TLS configures certificate verification.
type TLS struct {
	// Insecure skips certificate verification. Default false.
	Insecure bool
	// CAPEM holds PEM CA certificates trusted besides the system pool.
	CAPEM []byte
	// ServerName overrides SNI and the verified name.
	ServerName string
}

// SetDefaults fills zero fields with their defaults.
func (p *Plan) SetDefaults() {
	if p.Method == "" {
		p.Method = DefaultMethod
	}
	if p.Connections == 0 {
		p.Connections = DefaultConnections
	}
	if p.Duration == 0 {
		p.Duration = DefaultDuration
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	if p.Interval == 0 {
		p.Interval = DefaultInterval
	}
}

// FieldError is a validation error that names the field, the bad value and
// what is allowed.
type FieldError struct {
	Field, Value, Allowed string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("plan: %s = %s: %s", e.Field, e.Value, e.Allowed)
}

// Validate checks p after SetDefaults. It returns every problem found,
// joined (errors.Join of *FieldError).
func (p *Plan) Validate() error {
	var errs []error
	bad := func(field, value, allowed string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Allowed: allowed})
	}
	if _, err := ParseTarget(p.URL); err != nil {
		bad("url", fmt.Sprintf("%q", p.URL), err.Error())
	}
	if !validToken(p.Method) {
		bad("method", fmt.Sprintf("%q", p.Method), "want an HTTP method token such as GET, POST, HEAD")
	}
	for i, h := range p.Headers {
		if !validToken(h.Name) || strings.ContainsAny(h.Value, "\r\n") {
			bad(fmt.Sprintf("headers[%d]", i), fmt.Sprintf("%q: %q", h.Name, h.Value), "want 'Name: value' with a token name and no line breaks")
		}
	}
	if p.Connections < 1 {
		bad("connections", fmt.Sprint(p.Connections), "want at least 1")
	}
	if p.Duration <= 0 {
		bad("duration", p.Duration.String(), "want more than 0, e.g. 10s or 1m")
	}
	if p.Timeout <= 0 {
		bad("timeout", p.Timeout.String(), "want more than 0, e.g. 2s")
	}
	if p.Duration+p.Timeout > MaxRunLength {
		bad("duration", p.Duration.String(), fmt.Sprintf("duration + timeout must be at most %v", MaxRunLength))
	}
	if p.Interval < MinInterval {
		bad("interval", p.Interval.String(), fmt.Sprintf("want at least %v", MinInterval))
	}
	if p.Agents < 0 {
		bad("agents", fmt.Sprint(p.Agents), "want 0 (all live agents) or more")
	}
	if p.Agents > 0 && p.Connections >= 1 && p.Agents > p.Connections {
		bad("agents", fmt.Sprint(p.Agents), fmt.Sprintf("want at most connections (%d): every agent needs a connection", p.Connections))
	}
	return errors.Join(errs...)
}

// Target is a parsed target URL.
type Target struct {
	// TLS is true for https.
	TLS bool
	// Host is the host name or IP literal, without brackets.
	Host string
	// Port is the port, defaulted from the scheme.
	Port string
	// HostHeader is the Host header value (host, plus port when not the
	// scheme's default).
	HostHeader string
	// RequestURI is the path and query sent in the request line.
	RequestURI string
}

// ParseTarget parses an absolute http(s) URL.
func ParseTarget(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, fmt.Errorf("want an absolute URL such as https://host:port/path: %w", err)
	}
	var t Target
	switch u.Scheme {
	case "https":
		t.TLS, t.Port = true, "443"
	case "http":
		t.Port = "80"
	default:
		return Target{}, fmt.Errorf("scheme %q not supported: want https or http", u.Scheme)
	}
	if u.Hostname() == "" {
		return Target{}, errors.New("want a host, e.g. https://127.0.0.1:8443/")
	}
	if u.User != nil {
		return Target{}, errors.New("user info in the URL is not supported: send an Authorization header")
	}
	t.Host = u.Hostname()
	t.HostHeader = u.Host
	if p := u.Port(); p != "" {
		t.Port = p
		if p == map[bool]string{true: "443", false: "80"}[t.TLS] {
			t.HostHeader = strings.TrimSuffix(u.Host, ":"+p)
		}
	}
	if _, err := net.LookupPort("tcp", t.Port); err != nil {
		return Target{}, fmt.Errorf("bad port %q", t.Port)
	}
	t.RequestURI = u.RequestURI()
	return t, nil
}

// validToken reports whether s is an RFC 9110 token (method, header name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}
