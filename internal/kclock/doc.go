// Package kclock is the kernel log's clock: the printk clock that dmesg and
// /dev/kmsg stamp records with, which is not CLOCK_MONOTONIC and drifts
// from it. Clock converts wall-clock readings to it and back (dmesg_time,
// and where a kernel line belongs among the rows); Estimator fits how it
// relates to CLOCK_MONOTONIC from the records' arrival (pure: time comes in
// as arguments); Fit is that estimate, shared by both and described in
// system-info.txt and snapshot headers.
package kclock
