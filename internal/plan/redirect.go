package plan

import "fmt"

// MaxRedirectHops bounds MaxRedirects (curl's default --max-redirs is 50,
// Go's client stops after 10).
const MaxRedirectHops = 50

// validateRedirects checks MaxRedirects.
func (p *Plan) validateRedirects() []error {
	if p.MaxRedirects < 0 || p.MaxRedirects > MaxRedirectHops {
		return []error{&FieldError{Field: "max_redirects", Value: fmt.Sprint(p.MaxRedirects),
			Allowed: fmt.Sprintf("0 (a 3xx is the response) to %d hops", MaxRedirectHops)}}
	}
	return nil
}
