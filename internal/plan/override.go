package plan

import (
	"fmt"
	"math"
	"net/url"
	"time"
)

// Retarget points p at another origin, as a URL given after a plan file
// does (coordctl run plan.yaml https://my.server:8443/): rawURL replaces
// p.URL, and every mix request keeps its path and query on rawURL's
// scheme, host and port, so that a plan written for target.example runs
// against one's own server unchanged. rawURL must be an absolute http(s)
// URL (ParseTarget); the error says why not. p's TLS options are left as
// they are: Check and coordctl's checks refuse those an http:// origin
// makes useless.
func (p *Plan) Retarget(rawURL string) error {
	if _, err := ParseTarget(rawURL); err != nil {
		return err
	}
	to, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	mix := make([]Request, len(p.Mix))
	for i, r := range p.Mix {
		u, err := url.Parse(r.URL)
		if err != nil {
			return fmt.Errorf("mix[%d].url %q: %w", i, r.URL, err)
		}
		u.Scheme, u.Host = to.Scheme, to.Host
		r.URL = u.String()
		mix[i] = r
	}
	p.URL = rawURL
	if len(p.Mix) > 0 {
		p.Mix = mix
	}
	return nil
}

// CutStages shortens a staged plan to its first d of load, as a -d shorter
// than the stages' total asks: the stages that end by d are kept as they
// are, the one running at d ends at d with the target the ramp had reached
// there (TargetAt(d), rounded to the nearest whole request/s or
// connection), so every ramp keeps its slope, and the later ones are
// dropped. The window (Duration) becomes d. This is a cut, not a scaling:
// the plan's first d run exactly as they would have, which is what
// shortening a wrk or k6 run does. d must be above 0 and at most the
// stages' total (a longer window has no stage to hold its load) and a
// multiple of Interval when that is set; plans
// without stages are left alone. It returns the number of stages kept.
func (p *Plan) CutStages(d time.Duration) (int, error) {
	if len(p.Stages) == 0 {
		return 0, nil
	}
	var total time.Duration
	for _, s := range p.Stages {
		total += s.Duration
	}
	if d <= 0 || d > total {
		return 0, &FieldError{Field: "duration", Value: d.String(),
			Allowed: fmt.Sprintf("want at most the stages' total (%v): a shorter window cuts the stages there; to run longer, lengthen or add a stage", total)}
	}
	if p.Interval > 0 && d%p.Interval != 0 {
		return 0, &FieldError{Field: "duration", Value: d.String(),
			Allowed: fmt.Sprintf("want a multiple of the interval (%v) to cut the stages at", p.Interval)}
	}
	var at time.Duration
	for i, s := range p.Stages {
		if at+s.Duration < d {
			at += s.Duration
			continue
		}
		if at+s.Duration > d {
			target := math.Round(p.TargetAt(d))
			s.Duration = d - at
			if p.Load == OpenLoop {
				s.Rate = int64(target)
			} else {
				s.Connections = int(target)
			}
		}
		p.Stages = append(p.Stages[:i:i], s)
		break
	}
	p.Duration = d
	return len(p.Stages), nil
}
