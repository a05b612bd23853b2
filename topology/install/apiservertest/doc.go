// Package apiservertest holds the tests of topology/install that need a real
// API server: they start the local topology, which topology/install itself
// must not import (it builds with newer Kubernetes libraries than
// topology/local does). It has no code of its own.
package apiservertest
