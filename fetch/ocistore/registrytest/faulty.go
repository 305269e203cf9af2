package registrytest

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Fault answers a GET that an armed Faulty registry intercepts; next is the registry itself, for
// the requests the fault lets through.
type Fault func(w http.ResponseWriter, r *http.Request, next http.Handler)

// Faulty is an in-process registry that counts every request and, once armed, sends each GET
// other than the /v2/ ping through a Fault. Pushes are never faulted, so a test sets up its
// artifacts first and arms the fault afterwards.
type Faulty struct {
	*Registry
	requests atomic.Int64
	mu       sync.Mutex
	fault    Fault
}

// StartFaulty starts an unarmed Faulty registry that stops when t ends.
func StartFaulty(t testing.TB) *Faulty {
	t.Helper()
	f := &Faulty{}
	f.Registry = StartInProcess(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.requests.Add(1)
			f.mu.Lock()
			fault := f.fault
			f.mu.Unlock()
			if fault != nil && r.Method == http.MethodGet && r.URL.Path != "/v2/" {
				fault(w, r, next)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	return f
}

// Arm sends later GETs through fault; nil disarms.
func (f *Faulty) Arm(fault Fault) {
	f.mu.Lock()
	f.fault = fault
	f.mu.Unlock()
}

// Requests is how many requests of any kind the registry has received so far.
func (f *Faulty) Requests() int64 { return f.requests.Load() }

// IsBlob reports whether r asks for a blob rather than a manifest or a tag list.
func IsBlob(r *http.Request) bool { return strings.Contains(r.URL.Path, "/blobs/") }

// FailFirst is a Fault that answers the first N GETs of each path with an error status, the way
// a registry under load does, and lets the rest through.
type FailFirst struct {
	N          int
	Status     int
	RetryAfter string // the Retry-After header of each failure; "" sends none

	mu      sync.Mutex
	perPath map[string]int
	served  int
}

// Serve is the Fault; arm it with f.Arm(ff.Serve).
func (ff *FailFirst) Serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ff.mu.Lock()
	if ff.perPath == nil {
		ff.perPath = map[string]int{}
	}
	ff.perPath[r.URL.Path]++
	fail := ff.perPath[r.URL.Path] <= ff.N
	if fail {
		ff.served++
	}
	ff.mu.Unlock()
	if !fail {
		next.ServeHTTP(w, r)
		return
	}
	if ff.RetryAfter != "" {
		w.Header().Set("Retry-After", ff.RetryAfter)
	}
	http.Error(w, `{"errors":[{"code":"UNAVAILABLE","message":"try later"}]}`, ff.Status)
}

// Served is how many failures have been answered.
func (ff *FailFirst) Served() int {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	return ff.served
}

// Always fails every GET with status, counting them.
func Always(status int) *FailFirst { return &FailFirst{N: math.MaxInt, Status: status} }

// BlobBody is a Fault that answers blob GETs with body while claiming Content-Length length: a
// body of the right length with other bytes, or a body cut short. Other GETs go through.
func BlobBody(length int, body []byte) Fault {
	return func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if !IsBlob(r) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(length))
		w.Write(body)
	}
}

// StallBlob is a Fault that answers blob GETs with Content-Length length and the bytes of first,
// then sends nothing more until the client gives up or release is closed. Other GETs go to
// others, which may be nil to let them through or Hang to stall them too. A test closes release
// in t.Cleanup so that the server can stop.
func StallBlob(length int, first []byte, release <-chan struct{}, others Fault) Fault {
	return func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if !IsBlob(r) {
			if others == nil {
				next.ServeHTTP(w, r)
			} else {
				others(w, r, next)
			}
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(length))
		w.WriteHeader(http.StatusOK)
		w.Write(first)
		w.(http.Flusher).Flush()
		wait(r, release)
	}
}

// Hang is a Fault that answers nothing until the client gives up or release is closed.
func Hang(release <-chan struct{}) Fault {
	return func(w http.ResponseWriter, r *http.Request, next http.Handler) { wait(r, release) }
}

func wait(r *http.Request, release <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-release:
	}
}
