package nginxtest

import (
	"fmt"
	"os"
)

// Status returns the line `make test` prints at its end, saying whether the
// NGINX end-to-end tests ran (Start finds nginx, as Binary does) or were
// skipped, and how to change that. It decides as Start does.
func Status() string {
	bin, err := Binary()
	version := ""
	if err == nil {
		if version, err = binaryVersion(bin); err != nil {
			return fmt.Sprintf("NGINX end-to-end tests: failed: %v", err)
		}
	}
	return statusLine(bin, version, err, os.Getenv(RequireEnv) == "1")
}

// statusLine words Status for nginx at bin, of version, or binErr when it
// was not found, with PHALANX_REQUIRE_NGINX set (require) or not.
func statusLine(bin, version string, binErr error, require bool) string {
	switch {
	case binErr == nil:
		return fmt.Sprintf("NGINX end-to-end tests: ran, against nginx %s (%s)", version, bin)
	case require:
		return fmt.Sprintf("NGINX end-to-end tests: FAILED, %v (%s=1 requires it: apt-get install nginx)", binErr, RequireEnv)
	}
	return fmt.Sprintf("NGINX end-to-end tests: SKIPPED, %v (apt-get install nginx to run them; %s=1 makes this a failure)", binErr, RequireEnv)
}
