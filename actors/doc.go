// Package actors holds Filigrane's virtual actors and what runs beside them on every node.
//
// It owns: the org actor (credit ledger, holds, concurrency slots), the job actor (one job record run
// through actors/jobstate, committed with compare-and-set before any answer) and the batch actor; their
// messages and clients; the node's worker pools, one per work class (Pools, Pool), and the Dispatcher that
// places claimable jobs on the node with free capacity of their class (the rule is actors/placement) and
// receives other nodes' WorkOffers; the generic processor (Media) that runs a job through its media kind's
// adapter; the synchronous detection's credit flow; API keys, assets, uploads, the plan catalog and the
// sweeper's passes. Pure state lives in sub-packages (jobstate, batchstate, durable, outbox, mediakind,
// placement, workqueue), each tested without a network.
//
// It must not: import fasthttp or know about HTTP requests (package http parses and answers), decide a
// job's state anywhere but in the job actor, or trust a message to arrive once: every cross-actor command
// is idempotent by its operation id, and every worker report is fenced by its lease token.
package actors
