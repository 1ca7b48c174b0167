//go:build tools

// This file pins the stack's modules in go.mod before every package imports them.
package filigrane

import (
	_ "github.com/asynkron/protoactor-go/actor"
	_ "github.com/asynkron/protoactor-go/cluster"
	_ "github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	_ "github.com/asynkron/protoactor-go/remote"
	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/hashicorp/memberlist"
	_ "github.com/minio/minio-go/v7"
	_ "github.com/rs/zerolog"
	_ "github.com/valyala/fasthttp"
	_ "github.com/vmihailenco/msgpack/v5"
	_ "golang.org/x/image/bmp"
	_ "golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"
	_ "google.golang.org/protobuf/types/known/anypb"
)
