// Package cluster wires Filigrane's nodes together: a protoactor-go actor
// system, its gRPC remote, the protoactor cluster with disthash identity
// lookup, and a hashicorp/memberlist cluster provider that carries each
// node's roles and free worker capacity in its gossip metadata. It also
// defines the msgpack envelope that every actor message uses on the wire.
//
// The package knows nothing about watermarks, jobs or credits; it moves
// registered Go values between actors and tells callers who is in the cluster.
//
// # Using it
//
//	reg := cluster.NewRegistry()
//	reg.MustRegister(actors.OrgMessages()...) // every message type, request and reply
//	node, err := cluster.Start(ctx, cluster.Config{
//		NodeName: "worker-1", Host: "10.0.0.5", RemotePort: 8091, GossipPort: 7946,
//		Join:  []string{"10.0.0.4:7946"},
//		Roles: []cluster.Role{cluster.RoleWorker}, Capacity: 4,
//		Logger: zl, Registry: reg,
//		Kinds: []cluster.Kind{cluster.NewKind(actors.KindOrg, actor.PropsFromProducer(newOrg))},
//	})
//	reply, err := node.Request(ctx, orgID, actors.KindOrg, actors.OrgReserve{OrgID: orgID, Op: rid, Credits: 3})
//	res := reply.(*actors.OrgReply)
//	...
//	go func() { <-node.Blocked(); /* stop and start a new node */ }()
//	node.Stop(ctx, true)
//
// A virtual actor knows its identity from *actor.Started on ([Identity]), so
// it can load its state there; protoactor's *cluster.ClusterInit follows,
// then pointers to the registered message types.
//
// # Envelopes
//
// protoactor's remote layer only serialises protobuf messages (the writer
// never sets a serializer id, so serializer 0, protobuf, is always used).
// Filigrane's messages are plain Go structs, so they travel as
// *anypb.Any{TypeUrl: "msgpack/<name>", Value: <msgpack bytes>}. A [Registry]
// maps names to Go types; it is an ordinary value (no package-level state),
// created once per process and shared by its nodes and actors. The default
// wire name is "<last element of the package path>.<TypeName>"
// ("actors.OrgReserve"); [Registry.RegisterName] sets another. Fields are
// encoded by name (or msgpack tag): adding a field is compatible with older
// nodes (unknown fields are ignored, missing ones stay zero), renaming one
// is not. Use concrete field types; an interface field decodes as a map.
//
// Incoming envelopes are unwrapped by [Registry.ReceiverMiddleware] (added to
// every kind's props by [Start], and to any props passed through
// [Registry.WithEnvelope]), so an actor sees *actors.OrgReserve, a pointer to
// the registered type, never an *anypb.Any. Messages that are not envelopes
// (protoactor's system messages, *cluster.ClusterInit, local plain values)
// pass through untouched. An envelope of an unknown type or with bad bytes
// never reaches the actor: the middleware logs it and answers the sender with
// a [Failure], so the caller fails at once instead of timing out.
//
// # Responding
//
// Replies are wrapped explicitly with [Respond] (or [RespondFailure]):
//
//	case *actors.OrgReserve:
//		if err := cluster.Respond(ctx, reg, actors.OrgReply{...}); err != nil { ... }
//
// A sender middleware that wraps every outgoing message transparently was
// rejected: a middleware cannot return an error, so a value of an
// unregistered type would have to be dropped or logged, and the requester
// would only see a timeout seconds later. [Respond] returns that error at the
// call site, and it keeps visible in actor code which values cross the wire
// (and are therefore copied, never shared).
//
// [Failure] is registered in every Registry. An actor replies with it (via
// [RespondFailure]) to report an error; [Node.Request] and
// [Registry.RequestPID] return a Failure reply as the error, so callers can
// use errors.As(err, &f) with f a *cluster.Failure.
//
// # Requests
//
// [Node.Request] calls a virtual actor by kind and identity. It is bounded by
// ctx's deadline (Config.RequestTimeout when ctx has none), re-resolves the
// identity and re-sends after a dead letter or when the owner leaves the
// topology mid-request, and so fails over a request in flight to a crashed
// node in about the failure-detection time. It also re-sends when the
// topology gives the identity to a member at another address (a node that
// joins, or rejoins after a restart, takes its activations back: disthash
// stops the old activation, and a message that reaches its mailbox behind
// the stop is dropped without a dead letter), and when a member at this
// node's own address leaves (this process restarted before the cluster
// dropped its previous incarnation: the peers then close their connections
// to the address, and a reply queued there is lost). Those connections close
// as each node drops the member, not all at once: a request sent within 5 s
// (replyPathSettle) after this node dropped a member at the owner's address or
// at its own, and still unanswered then, is sent again. An activation that
// stops drops the messages queued behind its stop; its mailbox answers each
// request among them with a dead letter (stopped.go), as protoactor does for
// a PID that is gone, so that it is re-sent at once. Delivery is therefore
// at-least-once. [Node.RequestPID] calls a plain actor by PID (for example a
// named per-node actor found through member metadata).
//
// A reply travels to the caller's future by address and process-local id
// only. protoactor numbers those ids from zero in every process, so a peer's
// late reply to a request of an earlier incarnation at this address (an actor
// answering its waiters when its work ends) answered the new incarnation's
// request with the same number; [Start] makes each actor system count from a
// random start, and such a reply now finds no future and is dropped.
//
// # Membership
//
// [MemberlistProvider] implements protoactor's cluster.ClusterProvider on top
// of memberlist. Each memberlist member carries [NodeMeta] (msgpack, at most
// 512 bytes): the ActorSystem id, the node name, its roles, the gRPC address,
// the kinds it hosts and its free worker capacity ([Node.SetCapacity]
// updates it; updates are coalesced and gossiped within about 100 ms). The
// memberlist member name is "<node name>/<ActorSystem id>", unique per
// process start, because protoactor blocks a member id forever once it has
// left the topology: a restarted node must come back as a new member.
// [Node.Members] lists the topology protoactor routes with.
//
// Failure detection ([DefaultFailureDetection]) notices a killed node in
// about 2 s (measured 1.6-2.5 s on 127.0.0.1, SIGKILL of a node process).
// If the cluster has blocked this node (it was declared dead and came back),
// it cannot serve again under its id; a peer that still hears its gossip
// tells it, [Node.Blocked] is closed, and the process should stop the node
// and start a new one. The peers also tell every member they dropped, every
// 2 s for 2 minutes, so that a node that was only frozen (SIGSTOP, a paused
// VM) finds the notice waiting in its socket and stops before it serves from
// its stale actors.
//
// protoactor's own gossip is off by default (see
// Config.ActorGossipInterval): memberlist does membership, and that gossip
// has data races.
//
// # Correctness
//
// The protoactor cluster routes; it does not guarantee. A message can be
// delivered twice, and two activations of one identity can briefly co-exist
// while members disagree on the topology. Actors must load their state on
// activation and fence writes with compare-and-set, and every command must be
// idempotent.
//
// # Tests
//
// Several nodes in one test process: use clustertest.StartNodes (or
// StartClusters), once per test binary, before the nodes do any work;
// protoactor's remote start writes a gRPC global that running nodes read, a
// data race for the race detector otherwise (see Start). Nodes that live one
// after the other are fine: a stopped node's gRPC goroutines were joined
// (internal/node's tests keep one node alive at a time). Several processes:
// clustertest.StartProcesses. Test clusters do not use the production
// failure detection: on a loaded test machine it declares live nodes dead.
// They use clustertest.StableDetection where every node must stay alive and
// clustertest.QuickDetection where a crash must be noticed, and bound their
// waits by clustertest.DetectionBudget and LoadSlack.
package cluster
