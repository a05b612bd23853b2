package kind

import (
	"strings"
	"testing"
)

func TestOptionsFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	o, err := OptionsFromEnv(env(nil))
	if err != nil || o.Keep || o.NodeImage != "" {
		t.Errorf("unset: %+v, %v", o, err)
	}
	o, err = OptionsFromEnv(env(map[string]string{EnvKeep: "1", EnvNodeImage: "kindest/node:v1.35.8"}))
	if err != nil || !o.Keep || o.NodeImage != "kindest/node:v1.35.8" {
		t.Errorf("set: %+v, %v", o, err)
	}
	if _, err := OptionsFromEnv(env(map[string]string{EnvKeep: "yes please"})); err == nil || !strings.Contains(err.Error(), EnvKeep) {
		t.Errorf("bad %s: %v", EnvKeep, err)
	}
	if _, err := OptionsFromEnv(env(map[string]string{EnvNodeImage: "a b"})); err == nil || !strings.Contains(err.Error(), EnvNodeImage) {
		t.Errorf("bad %s: %v", EnvNodeImage, err)
	}
}
