package cluster

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// A virtual actor stops when disthash moves its identity to another member, or when it stops itself (the
// durable actors do after a failed save). protoactor then drops, without a word, the messages that reached its
// mailbox behind the stop: it invokes nothing for them and, unlike for a PID that is no longer registered,
// answers no dead letter, so a request among them waits for its whole deadline (15 s for a worker's call to
// its job, a minute for an actor's call to a peer). answerAfterStop is a mailbox middleware that answers each
// such request with the dead letter protoactor gives a gone PID; Node.Request then resolves the identity again
// and re-sends at once.
type answerAfterStop struct {
	system  *atomic.Pointer[actor.ActorSystem]
	stopped atomic.Bool
}

// stopAwareMailbox makes each activation's mailbox answer the requests it drops after its actor stopped.
// system is set once the node's actor system exists (kinds are configured before it).
func stopAwareMailbox(system *atomic.Pointer[actor.ActorSystem]) actor.MailboxProducer {
	return func() actor.Mailbox { return actor.Unbounded(&answerAfterStop{system: system})() }
}

func (a *answerAfterStop) MailboxStarted()   {}
func (a *answerAfterStop) MessagePosted(any) {}
func (a *answerAfterStop) MailboxEmpty()     {}

// MessageReceived runs after the actor was given m (protoactor's mailbox calls it once per message, user and
// system): after a stop (a Stop system message, or a PoisonPill user message, which the actor handles by
// stopping), every later user message was dropped.
func (a *answerAfterStop) MessageReceived(m any) {
	switch m := m.(type) {
	case *actor.Stop, *actor.PoisonPill:
		a.stopped.Store(true)
	case *actor.MessageEnvelope:
		if _, ok := m.Message.(*actor.PoisonPill); ok {
			a.stopped.Store(true)
			return
		}
		if a.stopped.Load() && m.Sender != nil {
			if sys := a.system.Load(); sys != nil {
				sys.Root.Send(m.Sender, &actor.DeadLetterResponse{})
			}
		}
	}
}
