package assert

import (
	"testing"
	"time"

	"github.com/multikueue-testkit/testkit/observe"
)

// TestDispatchWhySaysWhichOrderJudged pins the wording scenario tests match
// (TestWorkerOutage's known findings): audited times relative to each other,
// the Observer's order only with the reason the audit logs could not settle it.
func TestDispatchWhySaysWhichOrderJudged(t *testing.T) {
	base := time.Date(2026, 12, 1, 21, 35, 42, 0, time.UTC)
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	for _, tc := range []struct {
		name string
		d    dispatch
		want string
	}{
		{"between release and reservation", dispatch{audited: true, released: ms(0), received: ms(229), reserved: ms(255)},
			" (by the audit logs: the worker's API server received the create 229ms after the manager's API server completed the write that released the reservation, 26ms before the write that made it again)"},
		{"never reserved", dispatch{audited: true, received: ms(109)},
			" (by the audit logs: the worker's API server received the create and no reservation was made after it)"},
		{"released, never reserved again", dispatch{audited: true, released: ms(0), received: ms(5)},
			" (by the audit logs: the worker's API server received the create 5ms after the manager's API server completed the write that released the reservation, and no reservation was made after it)"},
		{"unread", dispatch{unread: "no audit log to order them by"}, " (by the Observer's receive times: no audit log to order them by)"},
	} {
		if got := tc.d.why(); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestQuotaObjectNamesTheQueuesAtFault: the heading names the ClusterQueue
// that went over and the worker that got a dispatch without quota, not
// "every ClusterQueue on every cluster".
func TestQuotaObjectNamesTheQueuesAtFault(t *testing.T) {
	over := []observe.Event{
		{Cluster: "worker-3", Name: "cluster-queue", Type: observe.QuotaSet},
		{Cluster: "worker-3", Name: "cluster-queue", Type: observe.QuotaSet},
		{Cluster: "worker-1", Name: "other", Type: observe.QuotaSet},
	}
	for _, tc := range []struct {
		name       string
		over       []observe.Event
		dispatched []string
		want       string
	}{
		{"one queue", over[:1], nil, `ClusterQueue cluster-queue on "worker-3"`},
		{"two queues, one named once", over, nil, `ClusterQueue cluster-queue on "worker-3" and ClusterQueue other on "worker-1"`},
		{"dispatches", nil, []string{"worker-2", "worker-1", "worker-2"}, `the dispatches to "worker-1", "worker-2" without quota on the manager`},
		{"both", over[:1], []string{"worker-2"}, `ClusterQueue cluster-queue on "worker-3" and the dispatches to "worker-2" without quota on the manager`},
	} {
		if got := quotaObject(tc.over, tc.dispatched); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
