package main

import (
	"context"
	"fmt"
	"io"
)

func runExtras(ctx context.Context, out io.Writer, scratch string) {
	fmt.Fprintln(out, "not available yet")
}
