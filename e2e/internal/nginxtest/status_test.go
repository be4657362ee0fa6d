package nginxtest

import (
	"errors"
	"testing"
)

func TestStatusLine(t *testing.T) {
	missing := errors.New("nginx is not installed")
	for _, tc := range []struct {
		bin, version string
		err          error
		require      bool
		want         string
	}{
		{"/usr/sbin/nginx", "1.22.1", nil, false, "NGINX end-to-end tests: ran, against nginx 1.22.1 (/usr/sbin/nginx)"},
		{"", "", missing, false, "NGINX end-to-end tests: SKIPPED, nginx is not installed (apt-get install nginx to run them; PHALANX_REQUIRE_NGINX=1 makes this a failure)"},
		{"", "", missing, true, "NGINX end-to-end tests: FAILED, nginx is not installed (PHALANX_REQUIRE_NGINX=1 requires it: apt-get install nginx)"},
	} {
		if got := statusLine(tc.bin, tc.version, tc.err, tc.require); got != tc.want {
			t.Errorf("statusLine(%q, %q, %v, %v) = %q, want %q", tc.bin, tc.version, tc.err, tc.require, got, tc.want)
		}
	}
}
