//go:build !unix

package benchvs

import "time"

// selfCPU cannot tell where getrusage is missing.
func selfCPU() time.Duration { return 0 }
