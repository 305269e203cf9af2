package cputime

import "time"

// Self is 0 on Windows: see the package comment.
func Self() time.Duration { return 0 }

// Children is 0 on Windows, which has no account of waited-for children.
func Children() time.Duration { return 0 }
