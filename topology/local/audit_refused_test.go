package local

import (
	"strconv"
	"testing"
)

// TestParseAuditLineKeepsRefusals: a successful write is a write, a 403 or
// 422 is a refusal naming what refused it, anything else is dropped.
func TestParseAuditLineKeepsRefusals(t *testing.T) {
	line := func(code int, msg, annotations string) []byte {
		return []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","verb":"delete",` +
			`"user":{"username":"system:serviceaccount:kueue-system:multikueue-manager"},"objectRef":{"resource":"jobs","namespace":"default","name":"h6","apiGroup":"batch"},` +
			`"responseStatus":{"code":` + strconv.Itoa(code) + `,"message":` + strconv.Quote(msg) + `},"annotations":` + annotations + `,` +
			`"requestReceivedTimestamp":"2026-12-02T10:00:00.000000Z","stageTimestamp":"2026-12-02T10:00:00.002000Z"}`)
	}
	for _, c := range []struct {
		code        int
		msg, annots string
		ok          bool
		refusedBy   string
	}{
		{200, "", `{}`, true, ""},
		{403, `jobs.batch "h6" is forbidden: ValidatingAdmissionPolicy 'multikueue-guard.x' with binding 'multikueue-guard.x' denied request: testkit guard: no`, `{}`, true, "ValidatingAdmissionPolicy multikueue-guard.x"},
		{403, `jobs.batch "h6" is forbidden: User "u" cannot delete resource "jobs"`, `{"authorization.k8s.io/decision":"forbid"}`, true, "RBAC"},
		{422, `admission webhook "vjob.kb.io" denied the request: spec: Invalid`, `{}`, true, "admission webhook vjob.kb.io"},
		{403, `forbidden`, `{}`, true, "the API server (403)"},
		{404, `not found`, `{}`, false, ""},
		{409, `conflict`, `{}`, false, ""},
	} {
		w, ok := parseAuditLine(line(c.code, c.msg, c.annots))
		if ok != c.ok || w.RefusedBy != c.refusedBy || (ok && (w.Name != "h6" || w.Code != int32(c.code))) {
			t.Errorf("code %d %q: got ok=%v %+v; want ok=%v RefusedBy %q", c.code, c.msg, ok, w, c.ok, c.refusedBy)
		}
		if c.refusedBy != "" && w.Message != c.msg {
			t.Errorf("code %d: Message %q, want %q", c.code, w.Message, c.msg)
		}
	}
}
