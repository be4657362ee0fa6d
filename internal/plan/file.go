package plan

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// File is the YAML form of a plan (docs/plan.md). Durations are Go
// durations ("10s", "1m30s") or bare seconds; files are read relative to the
// plan file. Unknown fields are errors.
type File struct {
	URL            string       `yaml:"url"`
	Method         string       `yaml:"method"`
	Headers        []string     `yaml:"headers"` // "Name: value"
	BodyFile       string       `yaml:"body_file"`
	Connections    int          `yaml:"connections"`
	Duration       fileDuration `yaml:"duration"`
	Requests       int64        `yaml:"requests"`
	Rate           int64        `yaml:"rate"`
	MaxConnections int          `yaml:"max_connections"`
	Warmup         fileDuration `yaml:"warmup"`
	Timeout        fileDuration `yaml:"timeout"`
	Interval       fileDuration `yaml:"interval"`
	Agents         int          `yaml:"agents"`
	KeepAlive      *bool        `yaml:"keepalive"`
	HTTP2          bool         `yaml:"http2"`
	MaxStreams     int          `yaml:"max_streams"`
	ConnectTo      string       `yaml:"connect_to"`
	Resolver       string       `yaml:"resolver"`
	TLS            fileTLS      `yaml:"tls"`
	Stages         []fileStage  `yaml:"stages"`
	Mix            []fileReq    `yaml:"mix"`
}

type fileTLS struct {
	Insecure   bool     `yaml:"insecure"`
	CAFile     string   `yaml:"ca_file"`
	CertFile   string   `yaml:"cert_file"`
	KeyFile    string   `yaml:"key_file"`
	SNI        string   `yaml:"sni"`
	MinVersion string   `yaml:"min_version"`
	MaxVersion string   `yaml:"max_version"`
	Ciphers    []string `yaml:"ciphers"`
	Curves     []string `yaml:"curves"`
	ALPN       []string `yaml:"alpn"`
	Resume     bool     `yaml:"resume"`
}

type fileStage struct {
	Duration    fileDuration `yaml:"duration"`
	Rate        int64        `yaml:"rate"`
	Connections int          `yaml:"connections"`
}

type fileReq struct {
	Method   string   `yaml:"method"`
	URL      string   `yaml:"url"`
	Headers  []string `yaml:"headers"`
	BodyFile string   `yaml:"body_file"`
	Weight   int      `yaml:"weight"`
}

// fileDuration is a duration written as "10s" or as bare seconds.
type fileDuration time.Duration

func (d *fileDuration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q: %w", n.Line, n.Value, err)
	}
	*d = fileDuration(v)
	return nil
}

// ParseDuration parses a Go duration ("10s", "1m") or bare seconds ("30",
// "0.5"), as wrk's -d does.
func ParseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want a duration such as 10s, 1m or 30")
	}
	return d, nil
}

// ParseFile parses a YAML plan. readFile loads the files it names (body,
// CA, client certificate and key, mix bodies). Defaults are not applied
// and the plan is not validated: callers override fields with flags first,
// then call SetDefaults and Validate.
func ParseFile(data []byte, readFile func(name string) ([]byte, error)) (Plan, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Plan{}, fmt.Errorf("plan file: %w", err)
	}
	p := Plan{
		URL: f.URL, Method: f.Method, Connections: f.Connections, Duration: time.Duration(f.Duration),
		Requests: f.Requests, Rate: f.Rate, MaxConnections: f.MaxConnections, Warmup: time.Duration(f.Warmup),
		Timeout: time.Duration(f.Timeout), Interval: time.Duration(f.Interval), Agents: f.Agents,
		HTTP2: f.HTTP2, MaxStreams: f.MaxStreams, ConnectTo: f.ConnectTo, Resolver: f.Resolver,
		TLS: TLS{
			Insecure: f.TLS.Insecure, ServerName: f.TLS.SNI, MinVersion: f.TLS.MinVersion, MaxVersion: f.TLS.MaxVersion,
			Ciphers: f.TLS.Ciphers, Curves: f.TLS.Curves, ALPN: f.TLS.ALPN, Resume: f.TLS.Resume,
		},
	}
	if f.KeepAlive != nil {
		p.NoKeepAlive = !*f.KeepAlive
	}
	var err error
	if p.Headers, err = parseHeaders("headers", f.Headers); err != nil {
		return Plan{}, err
	}
	load := func(field, name string) ([]byte, error) {
		if name == "" {
			return nil, nil
		}
		b, err := readFile(name)
		if err != nil {
			return nil, fmt.Errorf("plan file: %s: %w", field, err)
		}
		return b, nil
	}
	if p.Body, err = load("body_file", f.BodyFile); err != nil {
		return Plan{}, err
	}
	if p.TLS.CAPEM, err = load("tls.ca_file", f.TLS.CAFile); err != nil {
		return Plan{}, err
	}
	if p.TLS.CertPEM, err = load("tls.cert_file", f.TLS.CertFile); err != nil {
		return Plan{}, err
	}
	if p.TLS.KeyPEM, err = load("tls.key_file", f.TLS.KeyFile); err != nil {
		return Plan{}, err
	}
	for _, s := range f.Stages {
		p.Stages = append(p.Stages, Stage{Duration: time.Duration(s.Duration), Rate: s.Rate, Connections: s.Connections})
	}
	for i, r := range f.Mix {
		req := Request{Method: r.Method, URL: r.URL, Weight: r.Weight}
		if req.Headers, err = parseHeaders(fmt.Sprintf("mix[%d].headers", i), r.Headers); err != nil {
			return Plan{}, err
		}
		if req.Body, err = load(fmt.Sprintf("mix[%d].body_file", i), r.BodyFile); err != nil {
			return Plan{}, err
		}
		p.Mix = append(p.Mix, req)
	}
	return p, nil
}

// ParseHeader parses "Name: value".
func ParseHeader(s string) (Header, bool) {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || !validToken(name) {
		return Header{}, false
	}
	return Header{Name: name, Value: strings.TrimSpace(value)}, true
}

func parseHeaders(field string, in []string) ([]Header, error) {
	var out []Header
	for i, s := range in {
		h, ok := ParseHeader(s)
		if !ok {
			return nil, &FieldError{Field: fmt.Sprintf("%s[%d]", field, i), Value: fmt.Sprintf("%q", s), Allowed: "want 'Name: value'"}
		}
		out = append(out, h)
	}
	return out, nil
}
