package fetch

import (
	"errors"
	"io"
)

// errTooLong is the error of a copy that got more bytes than it was bounded to.
var errTooLong = errors.New("more bytes than declared")

// copyBounded copies src to dst and fails with errTooLong as soon as src yields more than limit
// bytes (a negative limit is no bound): a body longer than its manifest or index declares is
// stopped at the first byte too many, whether it is chunked and endless or lies in its
// Content-Length. A src that writes itself (a registry blob reads ahead in a goroutine) keeps
// doing so.
func copyBounded(dst io.Writer, src io.Reader, limit int64) (int64, error) {
	if limit < 0 {
		return io.Copy(dst, src)
	}
	lw := &limitedWriter{w: dst, left: limit}
	if wt, ok := src.(io.WriterTo); ok {
		return wt.WriteTo(lw)
	}
	return io.Copy(lw, src)
}

type limitedWriter struct {
	w    io.Writer
	left int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) <= l.left {
		n, err := l.w.Write(p)
		l.left -= int64(n)
		return n, err
	}
	n, err := l.w.Write(p[:l.left])
	l.left -= int64(n)
	if err == nil {
		err = errTooLong
	}
	return n, err
}
