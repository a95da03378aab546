// A Go program using the installed module hb.dev/hb (cgo flags from
// pkg-config hb).
package main

import (
	"fmt"
	"os"

	"hb.dev/hb"
)

func main() {
	ctx, err := hb.NewContext()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer ctx.Close()
	x := []float32{1, 2, 3, 4}
	if err := hb.Allreduce(ctx, x, x, hb.Sum); err != nil || x[3] != 4 {
		fmt.Fprintln(os.Stderr, "allreduce:", err, x)
		os.Exit(1)
	}
	fmt.Printf("go consumer ok: world %d, %s\n", ctx.WorldSize(), hb.BuildInfo())
}
