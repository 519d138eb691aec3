// Package figure writes the lab's commands' plots to files.
package figure

import (
	"os"

	"gonum.org/v1/plot/vg/vgimg"
)

// WritePNG writes what was drawn on canvas to path as a PNG, creating or
// truncating the file. On an error the file may be left partly written.
func WritePNG(path string, canvas *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: canvas}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
