// Package cluster wires Filigrane's nodes together: a protoactor-go actor
// system, its gRPC remote, the protoactor cluster with disthash identity
// lookup, and a hashicorp/memberlist cluster provider that carries each
// node's roles and free worker capacity in its gossip metadata. It also
// defines the msgpack envelope that every actor message uses on the wire.
//
// The package knows nothing about watermarks, jobs or credits; it moves
// registered Go values between actors and tells callers who is in the cluster.
//
// # Envelopes
//
// protoactor's remote layer only serialises protobuf messages (the writer
// never sets a serializer id, so serializer 0, protobuf, is always used).
// Filigrane's messages are plain Go structs, so they travel as
// *anypb.Any{TypeUrl: "msgpack/<name>", Value: <msgpack bytes>}. A [Registry]
// maps names to Go types; it is an ordinary value (no package-level state),
// created once per process with [NewRegistry] and shared by every node and
// actor of that process. Register each message type before the node starts:
//
//	reg := cluster.NewRegistry()
//	reg.MustRegister(actors.Reserve{}, actors.Reserved{})
//
// Incoming envelopes are unwrapped by [Registry.ReceiverMiddleware] (added to
// every kind's props by [Start], and to any props passed through
// [Registry.WithEnvelope]), so an actor's Receive sees *actors.Reserve, a
// pointer to the registered type, never an *anypb.Any. Messages that are not
// envelopes (protoactor's own system messages, *cluster.ClusterInit, local
// plain values) pass through untouched.
//
// # Responding
//
// Responses are wrapped explicitly with [Respond] (or [RespondFailure]):
//
//	case *actors.Reserve:
//		if err := cluster.Respond(ctx, reg, actors.Reserved{...}); err != nil { ... }
//
// A sender middleware that wraps every outgoing message transparently was
// rejected: a middleware cannot return an error, so a value of an
// unregistered type would have to be dropped or logged, and the requester
// would only see a timeout seconds later. [Respond] returns that error at the
// call site instead, and it also makes visible in the actor code which values
// cross the wire (and are therefore copied, never shared).
//
// [Failure] is registered in every Registry. An actor replies with it (via
// [RespondFailure]) to report an error to its caller; [Node.Request] and
// [Registry.RequestPID] turn a Failure reply into a returned error, so
// callers can use errors.As(err, &*cluster.Failure).
//
// # Membership
//
// [MemberlistProvider] implements protoactor's cluster.ClusterProvider on top
// of memberlist. Each memberlist member carries [NodeMeta] (msgpack, at most
// 512 bytes): the ActorSystem id, the node name, its roles, the gRPC address,
// the kinds it hosts and its free worker capacity. The memberlist member name
// is "<node name>/<ActorSystem id>", unique per process start, because
// protoactor blocks a member id forever once it has left the topology: a
// restarted node must come back as a new member, never as the old one.
//
// Failure detection defaults ([DefaultFailureDetection]) notice a killed node
// in about 1.5-2 s on a LAN. If peers have blocked this node (it was declared
// dead and came back, or protoactor's gossip expired its heartbeat), the node
// cannot serve again under its id; [Node.Blocked] is closed and the process
// should stop the node and start a fresh one.
//
// # Correctness
//
// The protoactor cluster routes; it does not guarantee. [Node.Request] can
// deliver a message twice (retries after a timeout or a lost owner) and two
// activations of one identity can briefly co-exist while members disagree on
// the topology. Actors must load their state on activation and fence writes
// with compare-and-set, and every command must be idempotent.
package cluster
