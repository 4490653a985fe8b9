// Package fake is the in-memory backend: a Kubernetes API in the test's
// process, for built-in kinds and custom resources alike, so a controller
// meets the semantics of a real API server and whole runs fit in a
// testing/synctest bubble.
//
// One store holds every object: one resourceVersion counter, one write
// history, one set of watchers. Built-in kinds are stored as typed Go
// objects and custom resources as unstructured ones; stored objects are
// never changed in place, so what leaves the store is copied or encoded
// once. Two doors lead to it:
//
//   - client-go's fake clientset (Env.Observer, Env.ControllerClient,
//     Backend.NewClient): typed objects in and out through reactors,
//     nothing encoded, the fastest path, for controllers that take a
//     kubernetes.Interface (each watch event a copy of its own, but from
//     Backend.NewSharingClient, for the harness's own readers: the stored
//     object itself);
//   - the Kubernetes REST API as an http.Handler, reached by Env.RESTConfig
//     and Env.ControllerConfig, whose Transport calls the handler in the
//     caller's process (no listener: a socket would stall a bubble's
//     clock), for anything built from a *rest.Config: controller-runtime
//     managers, generated clientsets of custom resources, dynamic clients.
//     It speaks JSON (and reads YAML bodies).
//
// In a synctest bubble, apimachinery's process-wide error handler is a
// trap: utilruntime.HandleError (a reflector calls it when a LIST fails,
// on a 403 say) rate-limits by sleeping for 1ms less the time since the
// previous error, and its first "previous error" is the real time of the
// process's start. A bubble's clock starts in 2000, so that sleep lasts
// decades of virtual time: the reflector never returns and the informers
// never stop. Call DropErrorBackoff once, from TestMain, before running
// client-go in a bubble (scenarios.PrepareProcess does it for runs).
//
// What the store provides, through either door:
//   - metadata.resourceVersion on every write, from one monotonic counter;
//     a no-op update keeps it;
//   - 409 Conflict, with the API server's Status body, on a write with a
//     stale resourceVersion; custom resources refuse an update without one;
//   - metadata.generation 1 on create, bumped when anything outside metadata
//     and status changes; uid, creationTimestamp and generateName filled;
//   - the status subresource: status writes change only status, and
//     main-resource writes never change status, for resources that have it
//     (as discovery lists them); the scale subresource of Deployments,
//     ReplicaSets, StatefulSets, ReplicationControllers and custom
//     resources that declare one; pods/binding (spec.nodeName set once) and
//     pods/eviction (a delete: no disruption budgets);
//   - lists sorted by namespace and name, with limit and continue: a
//     continue token, or resourceVersionMatch=Exact, reads the list as it
//     was at that resourceVersion, rebuilt from the history (410 once it is
//     older than the history);
//   - watches from the resourceVersion asked for (history replayed; 410
//     Expired when it is older than the kept history or after Compact, an
//     ERROR event on the REST door as from the watch cache), watch-list
//     (sendInitialEvents: the current objects, then the bookmark annotated
//     k8s.io/initial-events-end), timeoutSeconds; label selectors and the
//     field selectors the API server supports per kind (others are 400),
//     with objects that stop or start matching seen as DELETED or ADDED; an
//     unbounded buffer per watcher, so no event is dropped;
//   - graceful deletion of pods bound to a node (deletionTimestamp set, the
//     kubelet finishes), finalizers on every kind (none may be added to an
//     object being deleted), delete preconditions and propagation policies;
//   - garbage collection as kube-controller-manager plays it, in its own
//     goroutine after the write: dependents of a deleted owner are deleted,
//     foreground deletion waits for blocking dependents, orphaning removes
//     the references; namespace deletion: Terminating, new content refused,
//     the contents deleted, the namespace gone once empty; objects in a
//     namespace that does not exist are refused (404), as NamespaceLifecycle
//     admission does; default, kube-system, kube-public and kube-node-lease
//     exist from the start;
//   - metadata checked on create as the API server checks it, generated
//     names included: metadata.name by its resource's rule, the namespace's
//     name, labels, annotations, finalizers and owner references; a refused
//     create is a 422 Invalid with the causes, and stores nothing;
//   - CustomResourceDefinitions created through the REST door are
//     validated, defaulted and established (the Established condition is
//     written right after the create), and their versions served, in
//     discovery too: custom resources are pruned, defaulted and validated
//     against the structural schema and its x-kubernetes-validations (CEL)
//     rules, with the API server's 422 causes, through the
//     apiextensions-apiserver libraries; deleting a CRD deletes its
//     resources, then stops serving them;
//   - server-side apply (application/apply-patch+yaml) with managedFields
//     and field-manager conflicts (409 with causes), through apimachinery's
//     field manager; JSON, merge and strategic merge patches;
//   - discovery (/api, /apis, /apis/{group}/{version}, aggregated or not),
//     the built-in resources of a v1.37 kube-apiserver plus the served
//     custom resources, so RESTMappers find new kinds;
//   - a 400 for a malformed body or query, 404 for an unknown resource, 405
//     for a wrong method, 406 and 415 for media types it does not speak,
//     413 for a body over 3 MiB; a panic in the handler is a 500, never a
//     crash.
//
// What still differs from a real API server:
//   - no validation or defaulting of built-in kinds beyond metadata (an
//     invalid spec is stored as sent; a pod's status is only reset to
//     Pending on create);
//   - no admission beyond NamespaceLifecycle and no authentication: a
//     request is the administrator's unless it impersonates a user (as
//     ControllerConfig does when Config.Controller declares an identity),
//     and then RBAC authorizes it from the stored Roles, ClusterRoles and
//     bindings, with Kubernetes' own rule comparator; aggregated
//     ClusterRoles are not aggregated, the default ClusterRoles do not
//     exist (discovery is open to all), and the clientsets are
//     administrators;
//   - managedFields are kept only for objects server-side apply has
//     touched: other writes record none (the field manager costs more than
//     the rest of a write), so an apply never conflicts with a manager that
//     only ever updated;
//   - no protobuf or CBOR; no Warning headers (pruned unknown fields are
//     dropped silently); no periodic watch bookmarks (a server may skip
//     them); CRD conversion webhooks are refused, versions convert as
//     None;
//   - generated names end in a count of the names made from their
//     generateName, not random letters;
//   - an Event named as client-go's recorders name one (its object's name
//     and the clock's nanoseconds, in hex) in an instant where an Event of
//     that name exists is stored under the name of the recorder's next
//     free nanosecond: in virtual time every Event of one instant reads
//     the same clock, which two Events recorded in real time never do. A
//     core/v1 recorder goes on with the name the server answered; an
//     events.k8s.io one with the name it sent, so a later series of the
//     renamed Event patches the first one;
//   - uids are version 4 UUIDs drawn from the object's resource,
//     namespace, name and how many objects were created under that name,
//     not at random: the same in every run that creates the same objects;
//     resourceVersions are small decimal integers; a CRD is established in
//     the same instant it is created;
//   - garbage collection, namespace deletion and CRD cleanup run without
//     the real controllers' delays;
//   - the Deployment/ReplicaSet controllers, scheduler and kubelet are
//     played by the world simulator, not by the API;
//   - a fake clientset forgets its action log every 4,096 requests, so a
//     long run does not keep a copy of every request;
//   - a DELETE that removes the object at once answers with it at the
//     deletion's resourceVersion (the one its DELETED event carries); a
//     real API server answers with the object's last version, or with a
//     Status (and the UID in its details) for kinds that do not return it.
package fake
