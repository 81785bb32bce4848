// Package deploy holds no code: it is the home of what installs and runs
// rdmadoctor in a fleet (systemd units, packaging, Prometheus rules) and of
// the tests that hold those files to the tools that read them.
package deploy
