package cluster

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/hashicorp/memberlist"
	"github.com/vmihailenco/msgpack/v5"
)

// Role is what a node does in the cluster. A node can have several.
type Role string

// Roles.
const (
	// RoleEdge nodes accept HTTP traffic and route it to actors.
	RoleEdge Role = "edge"
	// RoleWorker nodes host actors and run codec work on the CPU.
	RoleWorker Role = "worker"
	// RoleGPU nodes have an accelerator and host the GPU actors; with a device and the GPU codec they run
	// work of the gpu class.
	RoleGPU Role = "gpu"
	// RoleAPI nodes serve HTTP and host actors, but run no codec work unless another role gives them a
	// work class.
	RoleAPI Role = "api"
	// RoleCPU and RoleCPULong nodes host actors and run work of the cpu and cpu-long classes
	// (actors/mediakind); RoleWorker is both.
	RoleCPU     Role = "cpu"
	RoleCPULong Role = "cpu-long"
)

func (r Role) valid() bool {
	switch r {
	case RoleEdge, RoleWorker, RoleGPU, RoleAPI, RoleCPU, RoleCPULong:
		return true
	}
	return false
}

// MetaVersion is the version of the NodeMeta encoding. A node that receives
// another version ignores that member (and logs it) rather than guessing.
const MetaVersion = 1

// MaxMetaSize is memberlist's limit on node metadata; memberlist panics
// beyond it, so EncodeMeta refuses larger values.
const MaxMetaSize = memberlist.MetaMaxSize

// MaxClasses bounds NodeMeta.Free, so that the metadata stays small.
const MaxClasses = 8

// ErrMetaTooLarge is returned when encoded metadata exceeds MaxMetaSize.
var ErrMetaTooLarge = errors.New("node metadata too large")

// NodeMeta is what every node gossips about itself. Field tags are short
// because the whole encoding must fit in 512 bytes.
type NodeMeta struct {
	Version int `msgpack:"v"`
	// ID is the protoactor ActorSystem id, random per process start.
	ID string `msgpack:"id"`
	// Name is the operator-chosen node name (stable across restarts).
	Name  string `msgpack:"n"`
	Roles []Role `msgpack:"r"`
	// Host and Port are the protoactor remote (gRPC) address.
	Host string `msgpack:"h"`
	Port int    `msgpack:"p"`
	// Kinds are the cluster kinds this node hosts.
	Kinds []string `msgpack:"k"`
	// Capacity is the number of free worker slots, updated at runtime: the
	// sum of Free.
	Capacity int `msgpack:"c"`
	// Free is the free worker slots per work class ("cpu", "cpu-long",
	// "gpu"), updated at runtime (SetFree). A class is present exactly when
	// the node runs it, with 0 when all its slots are taken; a node that
	// runs no work (edge only, or draining) has none.
	Free map[string]int `msgpack:"f,omitempty"`
	// GPUs is the number of CUDA devices the node found (gpu.Discover) and
	// GPUMemory their total memory in bytes; both zero without a GPU. They
	// describe hardware, not readiness: whether GPU work is accepted is the
	// accelerator status (gpu.State).
	GPUs      int    `msgpack:"g,omitempty"`
	GPUMemory uint64 `msgpack:"gm,omitempty"`
	// LowDisk is set while the node's data directory is below its free-space reserve (--min-free-disk:
	// persistence/diskspace refuses new files there), updated at runtime (SetLowDisk). Placement prefers
	// nodes without it (actors/placement). Absent in the metadata of nodes that predate it: not low.
	LowDisk bool `msgpack:"ld,omitempty"`
	// Client marks nodes that joined with StartClient: they see the cluster
	// but host no kinds and are left out of protoactor's topology.
	Client bool `msgpack:"cl,omitempty"`
}

// Address is the node's remote address, host:port.
func (m NodeMeta) Address() string {
	return net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
}

// HasRole reports whether the node has role r.
func (m NodeMeta) HasRole(r Role) bool { return slices.Contains(m.Roles, r) }

// HasKind reports whether the node hosts kind k.
func (m NodeMeta) HasKind(k string) bool { return slices.Contains(m.Kinds, k) }

// Validate checks the fields that every member must have.
func (m NodeMeta) Validate() error {
	if m.Version != MetaVersion {
		return fmt.Errorf("node metadata version %d, this node understands %d", m.Version, MetaVersion)
	}
	if m.ID == "" {
		return errors.New("node metadata without id")
	}
	if m.Name == "" {
		return errors.New("node metadata without name")
	}
	if m.Host == "" || m.Port <= 0 || m.Port > 65535 {
		return fmt.Errorf("node metadata with bad remote address %q", m.Address())
	}
	for _, r := range m.Roles {
		if !r.valid() {
			return fmt.Errorf("node metadata with unknown role %q", r)
		}
	}
	if m.Capacity < 0 {
		return fmt.Errorf("node metadata with negative capacity %d", m.Capacity)
	}
	if len(m.Free) > MaxClasses {
		return fmt.Errorf("node metadata with %d work classes, at most %d", len(m.Free), MaxClasses)
	}
	for c, n := range m.Free {
		if c == "" || len(c) > 16 || n < 0 {
			return fmt.Errorf("node metadata with work class %q of capacity %d", c, n)
		}
	}
	if m.GPUs < 0 || (m.GPUs == 0 && m.GPUMemory != 0) {
		return fmt.Errorf("node metadata with %d GPUs and %d bytes of GPU memory", m.GPUs, m.GPUMemory)
	}
	return nil
}

// EncodeMeta validates and encodes m, refusing encodings over MaxMetaSize.
func EncodeMeta(m NodeMeta) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("encode node metadata: %w", err)
	}
	b, err := msgpack.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("encode node metadata: %w", err)
	}
	if len(b) > MaxMetaSize {
		return nil, fmt.Errorf("encode node metadata for %q: %d bytes, limit %d (fewer kinds or a shorter name/host): %w",
			m.Name, len(b), MaxMetaSize, ErrMetaTooLarge)
	}
	return b, nil
}

// DecodeMeta decodes and validates metadata gossiped by another node.
func DecodeMeta(b []byte) (NodeMeta, error) {
	var m NodeMeta
	if len(b) == 0 {
		return m, errors.New("decode node metadata: empty")
	}
	if len(b) > MaxMetaSize {
		return m, fmt.Errorf("decode node metadata: %d bytes: %w", len(b), ErrMetaTooLarge)
	}
	if err := msgpack.Unmarshal(b, &m); err != nil {
		return NodeMeta{}, fmt.Errorf("decode node metadata: %w", err)
	}
	if err := m.Validate(); err != nil {
		return NodeMeta{}, fmt.Errorf("decode node metadata: %w", err)
	}
	return m, nil
}
