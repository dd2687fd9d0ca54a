package syncbuf_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/statesidecar/state/internal/syncbuf"
)

// A logger shared by goroutines writes to one Buffer.
func ExampleBuffer() {
	var buf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { log.Info("hello", "n", i) })
	}
	wg.Wait()
	fmt.Println(strings.Count(buf.String(), "msg=hello"))
	// Output:
	// 3
}
