package report

// writeOK writes the success line when any completed response was outside
// 200-399: the 2xx/3xx responses' count, RPS and latency apart from the
// rest (Report.OKRequests, OKRPS, OKLatency), which the wrk block above
// mixes with the failures.
func (r *Report) writeOK(p *printer) {
	if r.Non2xx3xx == 0 {
		return
	}
	p.f("2xx/3xx only: %d requests, %.2f req/s", r.OKRequests, r.OKRPS)
	if s := r.OKLatency; s != nil {
		p.f("; latency avg %s, p50 %s, p99 %s, max %s", fmtUs(s.Mean), fmtUs(float64(s.P50)), fmtUs(float64(s.P99)), fmtUs(float64(s.Max)))
	}
	p.f("\n")
}
