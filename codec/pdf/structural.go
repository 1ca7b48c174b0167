package pdf

import (
	"crypto/hmac"
	"encoding/hex"
	"strings"
	"time"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"filigrane/codec"
)

// The structural layer: the id and a truncated MAC, in the catalog's /PieceInfo (the place ISO 32000 gives to
// private application data) and, as a second copy that tools which drop /PieceInfo keep, in the document
// information dictionary.
const (
	pieceKey   = "Filigrane"
	infoKey    = "FiligraneMark"
	macDomain  = "pdf-structural-v1"
	macBytes   = 16
	infoPrefix = "v1:"
)

func structuralMAC(c *codec.Codec, id codec.ID) []byte {
	return c.MAC(macDomain, id[:])[:macBytes]
}

// structuralMark reads and verifies the structural layer; d.info is not used.
func (d *document) structuralMark(root types.Dict) (codec.ID, bool) {
	return d.readStructural(root, d.codec)
}

func (d *document) readStructural(root types.Dict, c *codec.Codec) (codec.ID, bool) {
	if c == nil {
		return codec.ID{}, false
	}
	verify := func(idHex, macHex string) (codec.ID, bool) { return verifyStructural(c, idHex, macHex) }
	if pi := d.dict(root["PieceInfo"]); pi != nil {
		if priv := d.dict(d.dict(pi[pieceKey])["Private"]); priv != nil {
			if id, ok := verify(d.text(priv["ID"]), d.text(priv["MAC"])); ok {
				return id, true
			}
		}
	}
	if d.ctx.XRefTable.Info != nil {
		if info := d.dict(*d.ctx.XRefTable.Info); info != nil {
			s := d.text(info[infoKey])
			if rest, ok := strings.CutPrefix(s, infoPrefix); ok {
				if idHex, macHex, ok := strings.Cut(rest, ":"); ok {
					if id, ok := verify(idHex, macHex); ok {
						return id, true
					}
				}
			}
		}
	}
	return codec.ID{}, false
}

// verifyStructural parses a hex id and MAC and checks the MAC under the deployment key.
func verifyStructural(c *codec.Codec, idHex, macHex string) (codec.ID, bool) {
	idb, err1 := hex.DecodeString(idHex)
	mac, err2 := hex.DecodeString(macHex)
	if c == nil || err1 != nil || err2 != nil || len(idb) != len(codec.ID{}) || len(mac) != macBytes {
		return codec.ID{}, false
	}
	var id codec.ID
	copy(id[:], idb)
	return id, hmac.Equal(mac, structuralMAC(c, id))
}

func (d *document) text(o types.Object) string {
	o, err := d.ctx.XRefTable.Dereference(o)
	if err != nil || o == nil {
		return ""
	}
	switch v := o.(type) {
	case types.StringLiteral:
		s, err := types.StringLiteralToString(v)
		if err != nil {
			return ""
		}
		return s
	case types.HexLiteral:
		b, err := v.Bytes()
		if err != nil {
			return ""
		}
		return string(b)
	case types.Name:
		return v.Value()
	}
	return ""
}

// writeStructural stores the id and its MAC, replacing an earlier mark.
func (d *document) writeStructural(c *codec.Codec, id codec.ID, now time.Time) error {
	xt := d.ctx.XRefTable
	root, err := xt.Catalog()
	if err != nil {
		return err
	}
	idHex, macHex := hex.EncodeToString(id[:]), hex.EncodeToString(structuralMAC(c, id))
	priv := types.Dict{"ID": types.StringLiteral(idHex), "MAC": types.StringLiteral(macHex)}
	entry := types.Dict{"LastModified": types.StringLiteral(types.DateString(now)), "Private": priv}
	pi := d.dict(root["PieceInfo"])
	if pi == nil {
		pi = types.Dict{}
		root["PieceInfo"] = pi
	}
	pi[pieceKey] = entry

	mark := types.StringLiteral(infoPrefix + idHex + ":" + macHex)
	if xt.Info != nil {
		if info := d.dict(*xt.Info); info != nil {
			info[infoKey] = mark
			return nil
		}
	}
	ref, err := xt.IndRefForNewObject(types.Dict{infoKey: mark})
	if err != nil {
		return err
	}
	xt.Info = ref
	return nil
}
