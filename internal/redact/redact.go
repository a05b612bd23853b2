// Package redact removes credentials from text before it reaches a log, a
// failure message or an artifact: bearer tokens (JWTs), PEM blocks, and the
// values of kubeconfig credential fields.
package redact

import "regexp"

// Placeholder replaces every secret.
const Placeholder = "[redacted]"

func patterns() []*regexp.Regexp {
	return []*regexp.Regexp{
		// PEM blocks (certificates, keys).
		regexp.MustCompile(`-----BEGIN [A-Z ]+-----[\s\S]*?-----END [A-Z ]+-----`),
		// JSON Web Tokens (ServiceAccount tokens).
		regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+`),
		// Bearer headers.
		regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+`),
	}
}

// fieldPattern matches kubeconfig fields whose values are credentials:
// `token: x`, `client-key-data: x`, `"token":"x"` and the like.
const fieldPattern = `(?i)("?(?:token|client-key-data|client-certificate-data|certificate-authority-data|password|kubeconfig)"?\s*[:=]\s*"?)([^\s",}]+)`

// String returns s with every credential replaced by Placeholder.
func String(s string) string {
	for _, re := range patterns() {
		if re.NumSubexp() == 1 {
			s = re.ReplaceAllString(s, "${1}"+Placeholder)
			continue
		}
		s = re.ReplaceAllString(s, Placeholder)
	}
	return regexp.MustCompile(fieldPattern).ReplaceAllString(s, "${1}"+Placeholder)
}

// Bytes is String for byte slices.
func Bytes(b []byte) []byte { return []byte(String(string(b))) }
