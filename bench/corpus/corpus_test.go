package corpus

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

func TestLoadListsImagesBySize(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, w, h int) {
		p := filepath.Join(dir, "root", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)))
		os.WriteFile(p, b.Bytes(), 0o644)
	}
	write("usr/share/backgrounds/mate/nature/Big.png", 1200, 900)
	write("usr/share/backgrounds/mate/desktop/Ui.png", 1000, 1000)
	write("usr/share/doc/opencv-doc/examples/data/small.png", 64, 64)
	os.WriteFile(filepath.Join(dir, "root/usr/share/doc/opencv-doc/examples/data/readme.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "root/usr/share/doc/opencv-doc/examples/data/broken.jpg"), []byte("nope"), 0o644)

	all, err := Load(context.Background(), dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("got %d images: %+v", len(all), all)
	}
	big, err := Load(context.Background(), dir, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	// Sorted by name: desktop/Ui.png, then nature/Big.png.
	if len(big) != 2 || big[1].Width != 1200 || big[1].Format != "png" {
		t.Fatalf("got %+v", big)
	}
	if Kind(big[1].Name) != KindPhoto || Kind(big[0].Name) != KindGraphic {
		t.Fatalf("kinds: %s %s", Kind(big[1].Name), Kind(big[0].Name))
	}
	if _, err := Load(context.Background(), t.TempDir(), 0); err == nil {
		t.Fatal("empty corpus accepted")
	}
}

func TestKind(t *testing.T) {
	for name, want := range map[string]string{
		"usr/share/backgrounds/mate/abstract/Elephants_5640x3172.jpg": KindGraphic,
		"usr/share/backgrounds/mate/nature/Wood.jpg":                  KindPhoto,
		"usr/share/backgrounds/mate/abstract/Flow.png":                KindGraphic,
		"usr/share/doc/opencv-doc/examples/data/chessboard.png":       KindGraphic,
		"usr/share/doc/opencv-doc/examples/data/aloeL.jpg":            KindPhoto,
		"usr/share/doc/opencv-doc/examples/data/baboon.jpg":           KindPhoto,
	} {
		if got := Kind(name); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}
