package plan

import "fmt"

// MaxRedirectHops bounds MaxRedirects (curl's default --max-redirs is 50,
// Go's client stops after 10).
const MaxRedirectHops = 50

// validateRedirects checks MaxRedirects.
func (p *Plan) validateRedirects() []error {
	if p.MaxRedirects > 0 && p.Protocol == H2 {
		return []error{&FieldError{Field: "max_redirects", Value: fmt.Sprint(p.MaxRedirects),
			Allowed: "0 with http2: redirects are followed over HTTP/1.1 only"}}
	}
	if p.MaxRedirects < 0 || p.MaxRedirects > MaxRedirectHops {
		return []error{&FieldError{Field: "max_redirects", Value: fmt.Sprint(p.MaxRedirects),
			Allowed: fmt.Sprintf("0 (a 3xx is the response) to %d hops", MaxRedirectHops)}}
	}
	return nil
}
