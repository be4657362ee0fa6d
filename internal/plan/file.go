package plan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// File is the YAML form of a plan (docs/plan.md). Durations are Go
// durations ("10s", "1m30s") or bare seconds; files are read relative to the
// plan file. Unknown fields are errors.
type File struct {
	URL            string        `yaml:"url"`
	Method         string        `yaml:"method"`
	Headers        []string      `yaml:"headers"` // "Name: value"
	BodyFile       string        `yaml:"body_file"`
	Connections    int           `yaml:"connections"`
	Duration       *fileDuration `yaml:"duration"` // nil: not given
	Requests       int64         `yaml:"requests"`
	Rate           int64         `yaml:"rate"`
	PacingWindow   fileDuration  `yaml:"pacing_window"`
	PacingSpin     bool          `yaml:"pacing_spin"`
	MaxConnections int           `yaml:"max_connections"`
	Warmup         fileDuration  `yaml:"warmup"`
	Timeout        fileDuration  `yaml:"timeout"`
	Interval       fileDuration  `yaml:"interval"`
	Agents         int           `yaml:"agents"`
	KeepAlive      *bool         `yaml:"keepalive"`
	HTTP2          bool          `yaml:"http2"`
	HTTP3          bool          `yaml:"http3"`
	MaxStreams     int           `yaml:"max_streams"`
	MaxRedirects   int           `yaml:"max_redirects"`
	ConnectTo      string        `yaml:"connect_to"`
	Resolver       string        `yaml:"resolver"`
	TLS            fileTLS       `yaml:"tls"`
	Stages         []fileStage   `yaml:"stages"`
	Mix            []fileReq     `yaml:"mix"`
	OnAgentLoss    string        `yaml:"on_agent_loss"` // "abort" (default) or "continue"
	// The connection-rate keys (fileConnRate): cps replaces rate.
	CPS                   int64    `yaml:"cps"`
	RequestsPerConnection *int     `yaml:"requests_per_connection"`
	MaxOpen               int      `yaml:"max_open"`
	Close                 string   `yaml:"close"` // "fin" (default) or "rst"
	SourceIPs             []string `yaml:"source_ips"`
}

type fileTLS struct {
	Insecure    bool     `yaml:"insecure"`
	CAFile      string   `yaml:"ca_file"`
	CertFile    string   `yaml:"cert_file"`
	KeyFile     string   `yaml:"key_file"`
	SNI         string   `yaml:"sni"`
	MinVersion  string   `yaml:"min_version"`
	MaxVersion  string   `yaml:"max_version"`
	Ciphers     []string `yaml:"ciphers"`
	Curves      []string `yaml:"curves"`
	ALPN        []string `yaml:"alpn"`
	Resume      bool     `yaml:"resume"`
	ResumeRatio float64  `yaml:"resume_ratio"`
	EarlyData   bool     `yaml:"early_data"`
}

type fileStage struct {
	Duration    fileDuration `yaml:"duration"`
	Rate        int64        `yaml:"rate"`
	Connections int          `yaml:"connections"`
	CPS         int64        `yaml:"cps"`
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
// then call SetDefaults and Validate. Errors name the line or the field
// ("line 2: unknown field \"conections\"; did you mean \"connections\"?"),
// not the file: callers prefix its name. Several problems are joined
// (errors.Join), one per line.
func ParseFile(data []byte, readFile func(name string) ([]byte, error)) (Plan, error) {
	if err := parseScalars(data); err != nil {
		// The decoder's unknown fields too, first, then the scalars'
		// errors: one pass names every mistake it can.
		var f File
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		var te *yaml.TypeError
		if derr := dec.Decode(&f); errors.As(derr, &te) {
			var unknown []string
			for _, msg := range te.Errors {
				if unknownFieldRE.MatchString(msg) {
					unknown = append(unknown, msg)
				}
			}
			if len(unknown) > 0 {
				return Plan{}, errors.Join(decodeError(&yaml.TypeError{Errors: unknown}, lineCount(data)), err)
			}
		}
		return Plan{}, err
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Plan{}, decodeError(err, lineCount(data))
	}
	p := Plan{
		URL: f.URL, Method: f.Method, Connections: f.Connections,
		Requests: f.Requests, Rate: f.Rate, PacingWindow: time.Duration(f.PacingWindow), PacingSpin: f.PacingSpin, MaxConnections: f.MaxConnections, Warmup: time.Duration(f.Warmup),
		Timeout: time.Duration(f.Timeout), Interval: time.Duration(f.Interval), Agents: f.Agents,
		MaxStreams: f.MaxStreams, MaxRedirects: f.MaxRedirects, ConnectTo: f.ConnectTo, Resolver: f.Resolver,
		TLS: TLS{
			Insecure: f.TLS.Insecure, ServerName: f.TLS.SNI, MinVersion: f.TLS.MinVersion, MaxVersion: f.TLS.MaxVersion,
			Ciphers: f.TLS.Ciphers, Curves: f.TLS.Curves, ALPN: f.TLS.ALPN, Resume: f.TLS.Resume, EarlyData: f.TLS.EarlyData,
		},
	}
	if f.Duration != nil {
		// duration: 0 without a request count would be taken for "not
		// given" and run the 10 s default: a zero-length run is never
		// what was meant. With requests, 0 is count mode's "no time bound".
		if *f.Duration == 0 && f.Requests <= 0 {
			return Plan{}, &FieldError{Field: "duration", Value: "0s", Allowed: "want more than 0, e.g. 10s or 1m (0 means no time bound only with requests)"}
		}
		p.Duration = time.Duration(*f.Duration)
	}
	switch {
	case f.HTTP2 && f.HTTP3:
		return Plan{}, &FieldError{Field: "http3", Value: "true", Allowed: "choose one of http2 and http3"}
	case f.HTTP2:
		p.Protocol = H2
	case f.HTTP3:
		p.Protocol = H3
	}
	if f.OnAgentLoss != "" {
		l, err := ParseLossPolicy(f.OnAgentLoss)
		if err != nil {
			return Plan{}, &FieldError{Field: "on_agent_loss", Value: fmt.Sprintf("%q", f.OnAgentLoss), Allowed: "want abort or continue"}
		}
		p.OnAgentLoss = l
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
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return b, nil
	}
	if p.Body, err = load("body_file", f.BodyFile); err != nil {
		return Plan{}, err
	}
	if p.TLS.CAPEM, err = load("tls.ca_file", f.TLS.CAFile); err != nil {
		return Plan{}, err
	}
	if f.TLS.CAFile != "" {
		if err := CheckCABundle(p.TLS.CAPEM); err != nil {
			return Plan{}, fmt.Errorf("tls.ca_file %s: %w", f.TLS.CAFile, err)
		}
	}
	p.TLS.CAFile = f.TLS.CAFile
	if p.TLS.CertPEM, err = load("tls.cert_file", f.TLS.CertFile); err != nil {
		return Plan{}, err
	}
	if p.TLS.KeyPEM, err = load("tls.key_file", f.TLS.KeyFile); err != nil {
		return Plan{}, err
	}
	for _, s := range f.Stages {
		p.Stages = append(p.Stages, Stage{Duration: time.Duration(s.Duration), Rate: s.Rate, Connections: s.Connections})
	}
	if err := f.connRate(&p); err != nil {
		return Plan{}, err
	}
	p.Load = LoadFor(p.Rate, p.Stages)
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

// BadHeader quotes s, a header ParseHeader refused, for an error message:
// its leading header-name characters, with "…" after them when more
// follows, since the rest may be a credential written without its colon
// ("Authorization Bearer t0ken" is shown as "Authorization"…).
func BadHeader(s string) string {
	n := 0
	for n < len(s) && validToken(s[n:n+1]) {
		n++
	}
	if n == len(s) {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…", s[:n])
}

func parseHeaders(field string, in []string) ([]Header, error) {
	var out []Header
	for i, s := range in {
		h, ok := ParseHeader(s)
		if !ok {
			return nil, &FieldError{Field: fmt.Sprintf("%s[%d]", field, i), Value: BadHeader(s), Allowed: "want 'Name: value'"}
		}
		out = append(out, h)
	}
	return out, nil
}

// fileTypes are the plan file's YAML structs, which YAML errors name by
// their Go type.
var fileTypes = []reflect.Type{reflect.TypeFor[File](), reflect.TypeFor[fileTLS](), reflect.TypeFor[fileStage](), reflect.TypeFor[fileReq]()}

// parserProblems are the problems of the YAML parser proper (parserc.go
// of go.yaml.in/yaml/v3), as against its scanner's. For these the library
// prints the 0-based line of the mark (parser.fail in decode.go adds one
// for scanner errors only), and none at all on the first line: an
// unclosed "[" on line 2 is reported as "line 1".
var parserProblems = []string{
	"did not find expected node content",
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected ',' or '}'",
	"did not find expected ',' or ']'",
	"did not find expected <document start>",
	"found undefined tag handle",
	"found incompatible YAML document",
	"found duplicate %YAML directive",
	"found duplicate %TAG directive",
}

var syntaxLineRE = regexp.MustCompile(`^line (\d+): (.*)$`)

// syntaxLine returns the YAML library's syntax error msg ("line 1: did not
// find expected ',' or ']'") with a parser problem's line counted from 1,
// as the scanner's and every other message of the plan file are, and at
// most lines, the file's last line (the stream's end, where an unclosed
// construct is found, is one line past a last line without a newline).
func syntaxLine(msg string, lines int) string {
	n, problem := 0, msg
	if m := syntaxLineRE.FindStringSubmatch(msg); m != nil {
		n, _ = strconv.Atoi(m[1])
		problem = m[2]
	}
	if !slices.Contains(parserProblems, problem) {
		return msg
	}
	return fmt.Sprintf("line %d: %s", max(1, min(n+1, lines)), problem)
}

// lineCount is the number of lines of data, a last one without a newline
// included.
func lineCount(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

var unknownFieldRE = regexp.MustCompile(`^line (\d+): field (.+) not found in type (\S+)$`)

// decodeError restates a YAML decoding error without Go type names: an
// unknown field becomes `line N: unknown field "x"`, with the closest
// known field of its mapping as a suggestion.
func decodeError(err error, lines int) error {
	if errors.Is(err, io.EOF) {
		return errors.New("empty plan: want a YAML mapping with at least url (docs/plan.md)")
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(syntaxLine(strings.TrimPrefix(err.Error(), "yaml: "), lines))
	}
	errs := make([]error, len(te.Errors))
	for i, msg := range te.Errors {
		if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("line %s: unknown field %q", m[1], m[2])
			if s := suggestField(m[2], m[3]); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
		}
		for _, t := range fileTypes {
			msg = strings.ReplaceAll(msg, "[]"+t.String(), "a list")
			msg = strings.ReplaceAll(msg, t.String(), "a mapping")
		}
		errs[i] = errors.New(msg)
	}
	return errors.Join(errs...)
}

// suggestField returns the field of the YAML struct named typeName closest
// to name (edit distance at most 2), or the TLS field ("tls.sni") that a
// top-level name is; "" when none is.
func suggestField(name, typeName string) string {
	if typeName == reflect.TypeFor[File]().String() && slices.Contains(yamlFields(reflect.TypeFor[fileTLS]()), name) {
		return "tls." + name
	}
	for _, t := range fileTypes {
		if t.String() == typeName {
			return Closest(name, yamlFields(t))
		}
	}
	return ""
}

// Closest returns the candidate nearest to name by edit distance
// (Levenshtein), provided it is at most 2, cobra's default
// SuggestionsMinimumDistance for "did you mean" on commands; "" when none
// is that close. Of equally near candidates the first wins. The plan
// file's unknown fields and the binaries' unknown flags are suggested
// with it.
func Closest(name string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// yamlFields returns the YAML names of struct type t's fields.
func yamlFields(t reflect.Type) []string {
	out := make([]string, t.NumField())
	for i := range out {
		out[i], _, _ = strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
	}
	return out
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
