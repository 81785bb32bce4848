// Package fleettest tests rdmadoctor's fleet integrations against the real
// programs and API types they meet: node-problem-detector, built from the
// version this module pins, runs the shipped monitor config and the real
// rdmadoctor binary against a loopback fake Kubernetes API server; the
// Kubernetes manifests are decoded strictly into k8s.io/api's types.
//
// It is a module of its own so the main module never depends on Kubernetes.
// Run it with `make fleet-test` from the repository root: that builds
// node-problem-detector once into .cache/ and runs `go test` here.
package fleettest
