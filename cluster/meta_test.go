package cluster

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func sampleMeta() NodeMeta {
	return NodeMeta{
		Version:   MetaVersion,
		ID:        "Vq3u8dJc2HqLZr4nKqG3bA", // shortuuid length, like ActorSystem.ID
		Name:      "worker-1",
		Roles:     []Role{RoleWorker, RoleGPU},
		Host:      "10.0.0.12",
		Port:      8090,
		Kinds:     []string{"job", "batch", "upload", "prototopic"},
		Capacity:  7,
		GPUs:      2,
		GPUMemory: 2 * 85_520_809_984, // two H100 80GB
		LowDisk:   true,
	}
}

func TestMetaRoundTrip(t *testing.T) {
	in := sampleMeta()
	b, err := EncodeMeta(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("typical metadata: %d bytes of %d", len(b), MaxMetaSize)
	out, err := DecodeMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", out, in)
	}
	if out.Address() != "10.0.0.12:8090" || !out.HasRole(RoleGPU) || out.HasRole(RoleEdge) || !out.HasKind("job") {
		t.Fatalf("accessors wrong on %#v", out)
	}
	// IPv6 hosts are bracketed in the address.
	in.Host = "fd00::1"
	if got := in.Address(); got != "[fd00::1]:8090" {
		t.Fatalf("Address = %q", got)
	}
}

func TestMetaSizeLimit(t *testing.T) {
	m := sampleMeta()
	// A realistic worst case still fits: long DNS host, long name, all roles.
	m.Host = strings.Repeat("h", 120) + ".internal.example"
	m.Name = strings.Repeat("n", 64)
	m.Roles = []Role{RoleEdge, RoleAPI, RoleWorker, RoleCPU, RoleCPULong, RoleGPU}
	m.Capacity = 1 << 20
	m.Free = map[string]int{"cpu": 1 << 16, "cpu-long": 1 << 16, "gpu": 1 << 16}
	m.GPUs, m.GPUMemory = 16, 16*150_754_820_096 // sixteen H200
	b, err := EncodeMeta(m)
	if err != nil {
		t.Fatalf("realistic worst case refused: %v", err)
	}
	t.Logf("large metadata: %d bytes", len(b))

	for len(b) <= MaxMetaSize {
		m.Kinds = append(m.Kinds, "some-long-kind-name")
		b, _ = msgpack.Marshal(&m)
	}
	if _, err := EncodeMeta(m); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("EncodeMeta(%d bytes) error = %v, want ErrMetaTooLarge", len(b), err)
	}
	if _, err := DecodeMeta(b); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("DecodeMeta(%d bytes) error = %v, want ErrMetaTooLarge", len(b), err)
	}
}

func TestMetaRejectsBadInput(t *testing.T) {
	bad := map[string]func(*NodeMeta){
		"version":  func(m *NodeMeta) { m.Version = 2 },
		"no id":    func(m *NodeMeta) { m.ID = "" },
		"no name":  func(m *NodeMeta) { m.Name = "" },
		"no host":  func(m *NodeMeta) { m.Host = "" },
		"port":     func(m *NodeMeta) { m.Port = 0 },
		"role":     func(m *NodeMeta) { m.Roles = []Role{"chef"} },
		"capacity": func(m *NodeMeta) { m.Capacity = -1 },
		"gpus":     func(m *NodeMeta) { m.GPUs = -1 },
		"gpu mem":  func(m *NodeMeta) { m.GPUs = 0 },
		"free":     func(m *NodeMeta) { m.Free = map[string]int{"cpu": -1} },
		"class":    func(m *NodeMeta) { m.Free = map[string]int{"": 1} },
		"long class": func(m *NodeMeta) {
			m.Free = map[string]int{"a-class-name-too-long": 1}
		},
		"classes": func(m *NodeMeta) {
			m.Free = map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1, "h": 1, "i": 1}
		},
	}
	for name, mutate := range bad {
		t.Run(name, func(t *testing.T) {
			m := sampleMeta()
			mutate(&m)
			if _, err := EncodeMeta(m); err == nil {
				t.Fatal("EncodeMeta accepted it")
			}
			raw, _ := msgpack.Marshal(&m)
			if _, err := DecodeMeta(raw); err == nil {
				t.Fatal("DecodeMeta accepted it")
			}
		})
	}
	for name, raw := range map[string][]byte{"empty": nil, "garbage": []byte("garbage!"), "string": {0xa1, 'x'}} {
		if _, err := DecodeMeta(raw); err == nil {
			t.Fatalf("DecodeMeta(%s) accepted", name)
		}
	}
}

// Metadata without the GPU and low-disk fields (a node from before they existed) decodes with zero GPUs and not
// low on disk, and a node that does not know the fields still decodes metadata carrying them: the encoding
// version need not change.
func TestMetaGPUFieldsAreCompatible(t *testing.T) {
	type oldMeta struct {
		Version  int      `msgpack:"v"`
		ID       string   `msgpack:"id"`
		Name     string   `msgpack:"n"`
		Roles    []Role   `msgpack:"r"`
		Host     string   `msgpack:"h"`
		Port     int      `msgpack:"p"`
		Kinds    []string `msgpack:"k"`
		Capacity int      `msgpack:"c"`
	}
	m := sampleMeta()
	raw, err := msgpack.Marshal(&oldMeta{m.Version, m.ID, m.Name, m.Roles, m.Host, m.Port, m.Kinds, m.Capacity})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMeta(raw)
	if err != nil || got.GPUs != 0 || got.GPUMemory != 0 || got.LowDisk || got.Capacity != m.Capacity {
		t.Fatalf("old metadata: %+v, %v", got, err)
	}
	b, err := EncodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	var old oldMeta
	if err := msgpack.Unmarshal(b, &old); err != nil || old.Name != m.Name || old.Capacity != m.Capacity {
		t.Fatalf("an older node cannot read new metadata: %+v, %v", old, err)
	}
}
