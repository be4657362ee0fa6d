// Package e2e holds Phalanx's end-to-end tests: a whole cluster in one
// process against the built-in target, and built binaries as separate
// processes against a real NGINX. It has no non-test code.
package e2e
