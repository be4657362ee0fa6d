package plan

import (
	"bufio"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// ParseMix parses a request-mix file: one request per line,
//
//	METHOD URL [header="Name: value"]... [body=FILE] [weight=N]
//
// Blank lines and lines starting with # are ignored. Values may be
// double-quoted (with \" and \\ escapes) to hold spaces. A URL without a
// scheme (a path such as /a?x=1) is a reference resolved against base, the
// run's URL, as RFC 3986 section 5 resolves one (as a wrk script's paths
// go to wrk's URL); with base "" such a line is an error saying so.
// readFile loads body files (the caller resolves them, e.g. relative to
// the mix file). Errors name the line and what is wrong.
func ParseMix(r io.Reader, base string, readFile func(name string) ([]byte, error)) ([]Request, error) {
	var baseURL *url.URL
	if base != "" {
		u, err := url.Parse(base)
		if err != nil {
			return nil, fmt.Errorf("mix: base URL %q: %w", base, err)
		}
		baseURL = u
	}
	var out []Request
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields, err := splitFields(line)
		if err != nil {
			return nil, fmt.Errorf("mix line %d: %w", n, err)
		}
		if len(fields) < 2 {
			return nil, fmt.Errorf("mix line %d: want METHOD URL [header=\"Name: value\"] [body=FILE] [weight=N]", n)
		}
		req := Request{Method: fields[0], URL: fields[1], Weight: 1}
		if !validToken(req.Method) {
			if strings.HasPrefix(req.Method, "/") || strings.Contains(req.Method, "://") {
				return nil, fmt.Errorf("mix line %d: %q is a URL where the method goes: want METHOD URL [header=\"Name: value\"] [body=FILE] [weight=N], e.g. GET /a weight=3", n, req.Method)
			}
			return nil, fmt.Errorf("mix line %d: method %q is not an HTTP method token", n, req.Method)
		}
		if u, err := url.Parse(req.URL); err == nil && u.Scheme == "" {
			if baseURL == nil {
				return nil, fmt.Errorf("mix line %d: url %q is relative and there is no run URL to resolve it against: give the URL on the command line (coordctl run --mix FILE URL) or write the line's URL in full", n, req.URL)
			}
			req.URL = baseURL.ResolveReference(u).String()
		}
		if _, err := ParseTarget(req.URL); err != nil {
			return nil, fmt.Errorf("mix line %d: url %q: %w", n, req.URL, err)
		}
		for _, f := range fields[2:] {
			key, value, ok := strings.Cut(f, "=")
			if !ok {
				return nil, fmt.Errorf("mix line %d: %q: want header=, body= or weight=", n, f)
			}
			switch key {
			case "header":
				name, v, ok := strings.Cut(value, ":")
				if !ok || !validToken(strings.TrimSpace(name)) {
					return nil, fmt.Errorf("mix line %d: header %q: want \"Name: value\"", n, value)
				}
				req.Headers = append(req.Headers, Header{Name: strings.TrimSpace(name), Value: strings.TrimSpace(v)})
			case "body":
				b, err := readFile(value)
				if err != nil {
					return nil, fmt.Errorf("mix line %d: body: %w", n, err)
				}
				req.Body = b
			case "weight":
				w, err := strconv.Atoi(value)
				if err != nil || w < 1 || w > 1_000_000 {
					return nil, fmt.Errorf("mix line %d: weight %q: want an integer from 1 to 1000000", n, value)
				}
				req.Weight = w
			default:
				return nil, fmt.Errorf("mix line %d: unknown option %q: want header=, body= or weight=", n, key)
			}
		}
		out = append(out, req)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mix: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("mix holds no request")
	}
	return out, nil
}

// splitFields splits on spaces, keeping double-quoted parts together
// (quotes removed, \" and \\ unescaped).
func splitFields(s string) ([]string, error) {
	var out []string
	var b strings.Builder
	inField, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			b.WriteByte(s[i+1])
			i++
		case c == '"':
			quoted = !quoted
			inField = true
		case !quoted && (c == ' ' || c == '\t'):
			if inField {
				out = append(out, b.String())
				b.Reset()
				inField = false
			}
		default:
			b.WriteByte(c)
			inField = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	if inField {
		out = append(out, b.String())
	}
	return out, nil
}
