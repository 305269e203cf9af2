// Package cputime reads the CPU time, user and system, that the kernel has accounted to this
// process and to the children it has waited for: the benchmarks' CPU columns, which other work on
// a shared machine moves far less than wall time. It reads 0 where the system keeps no such
// account (Windows); the benchmarks run on Linux.
package cputime
