package redact

import (
	"strings"
	"testing"
)

func TestRedactsCredentials(t *testing.T) {
	jwt := "eyJhbGciOiJFUzI1NiIsImtpZCI6IngifQ.eyJpc3MiOiJodHRwczovLzEyNy4wLjAuMSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
	in := strings.Join([]string{
		"users:\n- name: w\n  user:\n    token: " + jwt,
		"    client-key-data: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0t",
		"    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
		"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----",
		"Authorization: Bearer abc.def.ghi",
		`{"token":"` + jwt + `"}`,
		"plain words stay",
	}, "\n")
	out := String(in)
	for _, secret := range []string{jwt, "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0t", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t", "MHcCAQEEIB", "abc.def.ghi"} {
		if strings.Contains(out, secret) {
			t.Errorf("secret %q survived:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "plain words stay") || !strings.Contains(out, Placeholder) {
		t.Errorf("unexpected output:\n%s", out)
	}
}
