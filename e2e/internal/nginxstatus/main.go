// Command nginxstatus prints whether the NGINX end-to-end tests run on this
// machine or are skipped (nginxtest.Status): make test prints it at its
// end, so that a green run without nginx is never taken for one that
// tested against it.
package main

import (
	"fmt"

	"github.com/phalanxload/phalanx/e2e/internal/nginxtest"
)

func main() {
	fmt.Println(nginxtest.Status())
}
