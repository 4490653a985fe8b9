package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-lab/converge/reports"
)

// Checks that judge what an instance did against what it had received
// from the API server when it did it (History.Received), not against the
// world: a controller acting on a view older than one it holds, or on an
// object it never saw.
const (
	// NoBlindDelete breaks when a delete removes a version of an object
	// that the instance deleting it had never received.
	NoBlindDelete = "no-blind-delete"
	// NoChildOfDeletedOwner breaks when an instance creates an object
	// owned by one it had been told was deleted.
	NoChildOfDeletedOwner = "no-child-of-deleted-owner"
)

func noBlindDelete() Check {
	return Check{
		Name: NoBlindDelete, Kind: reports.KindInvariant, Invariant: true,
		Catches: "a delete that removed a version of an object (its UID) which the instance sending it had never received, while it had received another object of that name: " +
			"it meant the one it knew and removed its replacement (a stale view after a restart or a reconnection, or a cache that had not yet seen the replacement). " +
			"A delete that carries a UID precondition cannot do it: the server answers 409. Deletes of names the instance had never received are not judged.",
		Reads: "each successful delete's answer (History.Requests[].UID) against the objects its instance had received before sending it (Received, up to Requests[].Received)",
		judge: judgeBlindDeletes,
	}
}

func noChildOfDeletedOwner() Check {
	return Check{
		Name: NoChildOfDeletedOwner, Kind: reports.KindInvariant, Invariant: true,
		Catches: "an instance that creates an object owned (by UID) by one whose deletion it had received (100 ms before, long enough for its cache to have applied it), and creates it again after it had received " +
			"that child's deletion too (the garbage collector's, of a child of an owner that is gone): it acts on a copy of the owner that outlives it " +
			"(a map of its own, a queue of objects rather than keys) and fights the garbage collector. A single such create, in the instant the owner's " +
			"deletion arrives, is the race between two informers (one cache had not applied the event yet) that the garbage collector settles, and is not judged.",
		Reads: "each successful create's owner references and answer (History.Requests[].Body, .UID) against the deletions its instance had received before sending it (Received, up to Requests[].Received)",
		judge: judgeChildrenOfDeletedOwners,
	}
}

// appliedWithin bounds how long an informer takes to apply an event it
// received to its cache: microseconds in real time, and any order of the
// informers' goroutines at one instant of virtual time. A create this
// long after the owner's deletion reached the instance was made from
// something other than its cache.
const appliedWithin = 100 * time.Millisecond

// receiver is one instance of one controller.
type receiver struct {
	controller string
	instance   int
}

// receipts indexes History.Received for the checks that read it, once
// per judging: per instance, the UIDs it received of each object and the
// first deletion it was told of of each UID, each with its place in
// Received (a request's Received bounds what it had heard of).
type receipts struct {
	uids    map[receiver]map[objectKey][]heard
	deleted map[receiver]map[string]heard
}

// heard is one receipt: its place in Received, the UID, and when.
type heard struct {
	i   int
	uid string
	at  time.Time
}

func indexReceipts(all []reports.Receipt) receipts {
	x := receipts{uids: map[receiver]map[objectKey][]heard{}, deleted: map[receiver]map[string]heard{}}
	for i, rc := range all {
		who := receiver{rc.Controller, rc.Instance}
		if rc.Deleted {
			if x.deleted[who] == nil {
				x.deleted[who] = map[string]heard{}
			}
			if _, ok := x.deleted[who][rc.UID]; !ok {
				x.deleted[who][rc.UID] = heard{i, rc.UID, rc.At}
			}
			continue
		}
		if x.uids[who] == nil {
			x.uids[who] = map[objectKey][]heard{}
		}
		key := objectKey{rc.Resource, rc.Namespace, rc.Name}
		if !slices.ContainsFunc(x.uids[who][key], func(h heard) bool { return h.uid == rc.UID }) {
			x.uids[who][key] = append(x.uids[who][key], heard{i, rc.UID, rc.At}) // its first version
		}
	}
	return x
}

// uidsBefore are the UIDs of key that who had received among the first n
// receipts.
func (x receipts) uidsBefore(n int, who receiver, key objectKey) []string {
	var out []string
	for _, r := range x.uids[who][key] {
		if r.i < n && !slices.Contains(out, r.uid) {
			out = append(out, r.uid)
		}
	}
	return out
}

// deletedBefore is when who was told uid was deleted, among the first n
// receipts; zero when it was not.
func (x receipts) deletedBefore(n int, who receiver, uid string) time.Time {
	if r, ok := x.deleted[who][uid]; ok && r.i < n {
		return r.at
	}
	return time.Time{}
}

func judgeBlindDeletes(j *judging) {
	if len(j.h.Received) == 0 {
		return
	}
	x := indexReceipts(j.h.Received)
	for _, q := range j.h.Requests {
		if q.Verb != "delete" || q.Code < 200 || q.Code >= 300 || q.UID == "" || q.Name == "" {
			continue
		}
		resource, _, _ := strings.Cut(q.Resource, "/")
		key := objectKey{resource, q.Namespace, q.Name}
		uids := x.uidsBefore(q.Received, receiver{q.Controller, q.Instance}, key)
		if len(uids) == 0 || slices.Contains(uids, q.UID) {
			continue
		}
		subj := reports.Subject{Resource: resource, Namespace: q.Namespace, Name: q.Name}
		j.find(Finding(NoBlindDelete, q.At, subj, &q, fmt.Sprintf(
			"instance %d%s deleted %s/%s with UID %s, which it had never received: it had received only %s. "+
				"It removed a replacement of the object it knew; a UID precondition would have made the server refuse",
			q.Instance, of(q.Controller), resource, q.Name, q.UID, uidList(uids))))
	}
}

func judgeChildrenOfDeletedOwners(j *judging) {
	if !slices.ContainsFunc(j.h.Received, func(rc reports.Receipt) bool { return rc.Deleted }) {
		return
	}
	x := indexReceipts(j.h.Received)
	type childKey struct {
		who   receiver
		child objectKey
		owner string
	}
	// made is the UID of the last child each instance created for an
	// owner whose deletion it had received.
	made := map[childKey]string{}
	for _, q := range j.h.Requests {
		if q.Verb != "create" || q.Code < 200 || q.Code >= 300 || q.Body == nil || q.Body.Object == nil {
			continue
		}
		resource, _, _ := strings.Cut(q.Resource, "/")
		who := receiver{q.Controller, q.Instance}
		refs, _, _ := unstructured.NestedSlice(q.Body.Object, "metadata", "ownerReferences")
		for _, ref := range refs {
			m, _ := ref.(map[string]any)
			uid, _ := m["uid"].(string)
			if uid == "" {
				continue
			}
			// Received is when the event reached the informer, not when its
			// cache applied it: at one instant of virtual time, another
			// informer's events may be handled first.
			if deleted := x.deletedBefore(q.Received, who, uid); deleted.IsZero() || q.At.Sub(deleted) < appliedWithin {
				continue
			}
			key := childKey{who, objectKey{resource, q.Namespace, q.Name}, uid}
			before, again := made[key]
			made[key] = q.UID
			if !again || before == "" {
				continue
			}
			if x.deletedBefore(q.Received, who, before).IsZero() {
				continue
			}
			kind, _ := m["kind"].(string)
			owner, _ := m["name"].(string)
			subj := reports.Subject{Resource: resource, Namespace: q.Namespace, Name: q.Name}
			j.find(Finding(NoChildOfDeletedOwner, q.At, subj, &q, fmt.Sprintf(
				"instance %d%s created %s/%s again, owned by %s %s (UID %s), whose deletion it had received, after it had received the deletion of the one it made before (UID %s): "+
					"it acts on a copy of the owner that outlives it, against the garbage collector",
				q.Instance, of(q.Controller), resource, q.Name, kind, owner, uid, before)))
			break
		}
	}
}

// of names a controller after an instance's number: "" for the one under
// test.
func of(controller string) string {
	if controller == "" {
		return ""
	}
	return " of " + controller
}

func uidList(uids []string) string {
	if len(uids) > 3 {
		return strings.Join(uids[:3], ", ") + fmt.Sprintf(" and %d more", len(uids)-3)
	}
	return strings.Join(uids, ", ")
}
