package imageiotest

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// XMP packets of a photographer's export, as PhotoXMP builds them, and a reader of their own (XMPOf, XMPProps)
// to check what the outputs carry.

// Pieces of PhotoXMP's packet that an output must keep byte for byte.
const (
	XMPCreator = `<dc:creator>
     <rdf:Seq>
      <rdf:li>Jeanne Dupont</rdf:li>
     </rdf:Seq>
    </dc:creator>`
	XMPRights = `<dc:rights>
     <rdf:Alt>
      <rdf:li xml:lang="x-default">© 2024 Jeanne Dupont &amp; Studio Filigrane. All rights reserved.</rdf:li>
     </rdf:Alt>
    </dc:rights>`
	XMPUsageTerms = `<xmpRights:UsageTerms>
     <rdf:Alt>
      <rdf:li xml:lang="x-default">Licensed for editorial use only; no resale.</rdf:li>
     </rdf:Alt>
    </xmpRights:UsageTerms>`
	XMPCredit    = `photoshop:Credit="Studio Filigrane"`
	XMPCameraRaw = `crs:Exposure2012="+0.35"`
	// XMPThumbnailMark is in the base64 body of every thumbnail PhotoXMP writes: no output may hold it.
	XMPThumbnailMark = "UNMARKEDXMPTHUMBNAIL"
	// XMPPacketHead and XMPPacketTail wrap the packet.
	XMPPacketHead = "<?xpacket begin=\"\uFEFF\" id=\"W5M0MpCehiHzreSzNTczkc9d\"?>"
	XMPPacketTail = `<?xpacket end="w"?>`
)

// XMPPhoto describes PhotoXMP's packet: the orientation and stored size it claims, and whether those are
// written as element properties (OrientationElement) rather than attributes of rdf:Description.
type XMPPhoto struct {
	Orientation        int
	Width, Height      int
	OrientationElement bool
	Padding            int // bytes of white space before the closing xpacket, as editors leave for updates
}

// PhotoXMP returns a Lightroom-like XMP packet: creator tool and dates, tiff and exif size and orientation (the
// width and orientation as attributes or elements, the height as elements), dc:creator, dc:rights, usage terms,
// a description and keywords, camera raw settings, xmpNote:HasExtendedXMP, an xmp:Thumbnails element holding a
// base64 JPEG, and a second rdf:Description with a thumbnail in xmpGImg attributes.
func PhotoXMP(p XMPPhoto) []byte {
	orientAttr, orientElem := fmt.Sprintf("\n    tiff:Orientation=\"%d\"", p.Orientation), ""
	if p.OrientationElement {
		orientAttr, orientElem = "", fmt.Sprintf("\n   <tiff:Orientation>%d</tiff:Orientation>", p.Orientation)
	}
	thumb := "/9j/4AAQSkZJRgABAgEASABIAAD/" + strings.Repeat(XMPThumbnailMark, 20)
	var b strings.Builder
	b.WriteString(XMPPacketHead + `
<x:xmpmeta xmlns:x="adobe:ns:meta/" x:xmptk="Adobe XMP Core 7.0-c000 1.000000, 0000/00/00-00:00:00        ">
 <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
  <rdf:Description rdf:about=""
    xmlns:xmp="http://ns.adobe.com/xap/1.0/"
    xmlns:xmpGImg="http://ns.adobe.com/xap/1.0/g/img/"
    xmlns:dc="http://purl.org/dc/elements/1.1/"
    xmlns:xmpRights="http://ns.adobe.com/xap/1.0/rights/"
    xmlns:photoshop="http://ns.adobe.com/photoshop/1.0/"
    xmlns:tiff="http://ns.adobe.com/tiff/1.0/"
    xmlns:exif="http://ns.adobe.com/exif/1.0/"
    xmlns:xmpNote="http://ns.adobe.com/xmp/note/"
    xmlns:crs="http://ns.adobe.com/camera-raw-settings/1.0/"
    xmp:CreatorTool="Adobe Photoshop Lightroom Classic 13.0 (Macintosh)"
    xmp:CreateDate="2024-05-17T10:42:07"`)
	fmt.Fprintf(&b, "%s\n    tiff:ImageWidth=\"%d\"\n    exif:PixelXDimension=\"%d\"", orientAttr, p.Width, p.Width)
	b.WriteString(`
    ` + XMPCredit + `
    xmpRights:Marked="True"
    xmpNote:HasExtendedXMP="0123456789ABCDEF0123456789ABCDEF"
    ` + XMPCameraRaw + `>` + orientElem)
	fmt.Fprintf(&b, "\n   <tiff:ImageLength>%d</tiff:ImageLength>\n   <exif:PixelYDimension>%d</exif:PixelYDimension>",
		p.Height, p.Height)
	b.WriteString(`
   ` + XMPCreator + `
   ` + XMPRights + `
   ` + XMPUsageTerms + `
   <dc:description>
    <rdf:Alt>
     <rdf:li xml:lang="x-default">Fishing boats in the harbour at dawn</rdf:li>
    </rdf:Alt>
   </dc:description>
   <dc:subject>
    <rdf:Bag>
     <rdf:li>harbour</rdf:li>
     <rdf:li>dawn</rdf:li>
    </rdf:Bag>
   </dc:subject>
   <xmp:Thumbnails>
    <rdf:Alt>
     <rdf:li rdf:parseType="Resource">
      <xmpGImg:width>256</xmpGImg:width>
      <xmpGImg:height>171</xmpGImg:height>
      <xmpGImg:format>JPEG</xmpGImg:format>
      <xmpGImg:image>` + thumb + `</xmpGImg:image>
     </rdf:li>
    </rdf:Alt>
   </xmp:Thumbnails>
  </rdf:Description>
  <rdf:Description rdf:about="" xmlns:g="http://ns.adobe.com/xap/1.0/g/img/" g:format="JPEG" g:image="` + thumb + `"/>
 </rdf:RDF>
</x:xmpmeta>
`)
	b.WriteString(strings.Repeat(" ", p.Padding))
	b.WriteString(XMPPacketTail)
	return []byte(b.String())
}

// XMPOf returns the XMP packet of a JPEG (the first APP1 segment headed "http://ns.adobe.com/xap/1.0/\0"),
// PNG (the first uncompressed iTXt chunk with the keyword XML:com.adobe.xmp) or WebP ("XMP " chunk) file as it
// is stored, nil when there is none.
func XMPOf(file []byte) []byte {
	const jpegHeader, pngKeyword = "http://ns.adobe.com/xap/1.0/\x00", "XML:com.adobe.xmp\x00"
	var xmp []byte
	MetadataBlocks(file, func(kind string, body []byte) bool {
		switch kind {
		case "APP1":
			if rest, ok := bytes.CutPrefix(body, []byte(jpegHeader)); ok {
				xmp = rest
				return false
			}
		case "iTXt":
			if rest, ok := bytes.CutPrefix(body, []byte(pngKeyword)); ok {
				// compression flag and method 0, empty language tag and translated keyword; a compressed one is
				// not read (nil)
				if packet, ok := bytes.CutPrefix(rest, []byte{0, 0, 0, 0}); ok {
					xmp = packet
				}
				return false
			}
		case "XMP ":
			xmp = body
			return false
		}
		return true
	})
	return xmp
}

// XMPProps reads the simple properties of an XMP packet, wherever they are, as a reader of the RDF shorthand
// sees them: each attribute (but namespace declarations and rdf:*) and each element holding text alone, keyed by
// namespace URI, a space and local name, with every value found in order. It fails on XML that is not
// well-formed.
func XMPProps(x []byte) (map[string][]string, error) {
	d := xml.NewDecoder(bytes.NewReader(x))
	props := map[string][]string{}
	type open struct {
		name  xml.Name
		text  strings.Builder
		child bool
	}
	var stack []*open
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) > 0 {
				return nil, errors.New("imageiotest: XMP ends inside an element")
			}
			return props, nil
		}
		if err != nil {
			return nil, fmt.Errorf("imageiotest: XMP: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) > 0 {
				stack[len(stack)-1].child = true
			}
			for _, a := range t.Attr {
				if a.Name.Space != "xmlns" && a.Name.Local != "xmlns" &&
					a.Name.Space != "http://www.w3.org/1999/02/22-rdf-syntax-ns#" {
					k := a.Name.Space + " " + a.Name.Local
					props[k] = append(props[k], a.Value)
				}
			}
			stack = append(stack, &open{name: t.Name})
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text.Write(t)
			}
		case xml.EndElement:
			o := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if !o.child {
				k := o.name.Space + " " + o.name.Local
				props[k] = append(props[k], o.text.String())
			}
		}
	}
}
