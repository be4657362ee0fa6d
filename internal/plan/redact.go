package plan

import (
	"net/url"
	"slices"
	"strings"
)

// RedactedValue replaces the value of a secret header in Redacted's copy.
const RedactedValue = "[redacted]"

// secretHeaderWords mark, anywhere in a header's lower-case name, the
// fields whose values are credentials: by standard Authorization and
// Proxy-Authorization (RFC 9110 sections 11.6.2, 11.7.2) and Cookie (RFC
// 6265), and by convention API keys and tokens (X-Api-Key, Api-Key,
// Ocp-Apim-Subscription-Key, X-Auth-Token, Private-Token, X-Vault-Token,
// X-Amz-Security-Token), sessions and signatures. A benign field that
// matches (X-Cache-Key) only loses its value in results.
var secretHeaderWords = []string{"auth", "token", "secret", "key", "passw", "session", "cookie", "signature", "credential"}

// Redacted returns a copy of p with every secret removed, for what outlives
// the run or leaves the process other than towards the agents: results,
// logs and errors. The client certificate and key (TLS.CertPEM, KeyPEM)
// are dropped, and the values of the credential headers (every name
// holding one of secretHeaderWords, such as Authorization, Cookie or
// X-Api-Key; the plan's and the mix's) become
// RedactedValue, and so do the password of a URL's user info (the
// plan's and the mix's, as url.URL.Redacted writes it) and the values of
// its credential query parameters (secretQuery). A secret field added to
// the plan must be cleared here.
// p is not modified.
func Redacted(p Plan) Plan {
	p.TLS.CertPEM, p.TLS.KeyPEM = nil, nil
	p.URL = redactURL(p.URL)
	p.Headers = redactHeaders(p.Headers)
	if len(p.Mix) > 0 {
		p.Mix = slices.Clone(p.Mix)
		for i := range p.Mix {
			p.Mix[i].URL = redactURL(p.Mix[i].URL)
			p.Mix[i].Headers = redactHeaders(p.Mix[i].Headers)
		}
	}
	return p
}

// redactHeaders returns hs, copied with the secret values replaced when it
// holds any.
func redactHeaders(hs []Header) []Header {
	if !slices.ContainsFunc(hs, isSecret) {
		return hs
	}
	out := slices.Clone(hs)
	for i := range out {
		if isSecret(out[i]) {
			out[i].Value = RedactedValue
		}
	}
	return out
}

func isSecret(h Header) bool {
	name := strings.ToLower(h.Name)
	return slices.ContainsFunc(secretHeaderWords, func(w string) bool { return strings.Contains(name, w) })
}

// redactHeader returns h with its value replaced by RedactedValue when it
// is a credential, for error messages.
func redactHeader(h Header) Header {
	if isSecret(h) {
		h.Value = RedactedValue
	}
	return h
}

// secretQuery are the query parameter names whose values are
// credentials, lower case: OAuth 2.0 bearer tokens in a query (RFC 6750
// section 2.3 access_token), API keys and tokens by their usual names, and
// the signatures and credentials of presigned URLs (AWS Signature
// Version 4's X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token;
// Google Cloud Storage's X-Goog-Signature and X-Goog-Credential; Azure
// shared access signatures' sig).
var secretQuery = map[string]bool{
	"access_token": true, "id_token": true, "refresh_token": true, "token": true, "auth": true,
	"api_key": true, "apikey": true, "api-key": true, "key": true, "secret": true, "client_secret": true,
	"password": true, "passwd": true, "pwd": true, "signature": true, "sig": true,
	"x-amz-signature": true, "x-amz-credential": true, "x-amz-security-token": true,
	"x-goog-signature": true, "x-goog-credential": true,
}

// redactURL returns s with the password of its user info replaced (as
// url.URL.Redacted does) and the value of each credential query parameter
// (secretQuery, names matched case-insensitively) replaced by
// RedactedValue, the other parameters kept as written and in order, for
// results, logs and error messages. A URL that does not parse (one
// without a scheme, a bad escape), or parses as opaque, is redacted by its text: the user info's
// password before the first '@' of its authority, and the query's
// credential values.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" {
		return redactRawURL(s) // "bob:pw@host:8443/" parses as scheme "bob"
	}
	if u.User == nil && u.RawQuery == "" {
		return s
	}
	if u.RawQuery != "" {
		u.RawQuery = redactQuery(u.RawQuery)
	}
	return u.Redacted()
}

// redactRawURL is redactURL for text url.Parse refuses: the password
// ("xxxxx", as url.URL.Redacted writes it) of a user info in the authority
// (after "://", if any, up to the first '/', '?' or '#') and the query's
// credential values (redactQuery; the fragment kept).
func redactRawURL(s string) string {
	prefix, rest := "", s
	if i := strings.Index(s, "://"); i >= 0 {
		prefix, rest = s[:i+3], s[i+3:]
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		if c := strings.IndexByte(authority[:at], ':'); c >= 0 {
			rest = authority[:c+1] + "xxxxx" + rest[at:]
		}
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		query, frag := rest[q+1:], ""
		if h := strings.IndexByte(query, '#'); h >= 0 {
			query, frag = query[:h], query[h:]
		}
		rest = rest[:q+1] + redactQuery(query) + frag
	}
	return prefix + rest
}

// redactQuery returns the raw query q with the values of its credential
// parameters replaced; a name that does not unescape is kept as written.
func redactQuery(q string) string {
	parts := strings.Split(q, "&")
	for i, kv := range parts {
		name, _, hasValue := strings.Cut(kv, "=")
		n, err := url.QueryUnescape(name)
		if err == nil && secretQuery[strings.ToLower(n)] && hasValue {
			parts[i] = name + "=" + RedactedValue
		}
	}
	return strings.Join(parts, "&")
}
