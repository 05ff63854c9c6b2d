package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// trackedSources are the memory sources of a tracking CSV that allocate
// device memory from the process's memory resource (the pool): RAFT's
// memory_tracking_resources (cuVS 26.08's cuvsResourcesCreateWithMemoryTracking)
// wraps the global device resource ("device"), the handle's workspace
// ("workspace", its upstream tracked) and large workspace
// ("large_workspace") apart. host, pinned and managed memory are not the
// device's pool and are left out.
var trackedSources = []string{"device", "workspace", "large_workspace"}

// trackedPeak reads a tracking CSV (raft/mr/resource_monitor.hpp: a
// header "timestamp_us,<src>_current,<src>_peak,<src>_total_alloc,
// <src>_total_freed,...,nvtx_depth,nvtx_range", then one row per sample,
// each <src>_peak being the most that source held since the previous
// row) and returns the most the device sources held at once: the largest
// sum over a row of their peaks (an upper bound by at most one sampling
// interval's overlap: the sources' peaks within a row need not coincide),
// for the rows at or before untilUS microseconds (untilUS < 0: all rows).
// ok is false when the file has no samples.
func trackedPeak(path string, untilUS int64) (peak int64, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	return parseTracked(f, untilUS)
}

func parseTracked(r io.Reader, untilUS int64) (peak int64, ok bool, err error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	head, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return 0, false, nil // the double writes no samples
	}
	if err != nil {
		return 0, false, fmt.Errorf("tracking CSV header: %w", err)
	}
	if len(head) == 0 || strings.TrimSpace(head[0]) != "timestamp_us" {
		return 0, false, fmt.Errorf("tracking CSV: header %q does not start with timestamp_us", strings.Join(head, ","))
	}
	var cols []int
	for _, src := range trackedSources {
		for i, h := range head {
			if strings.TrimSpace(h) == src+"_peak" {
				cols = append(cols, i)
			}
		}
	}
	if len(cols) == 0 {
		return 0, false, fmt.Errorf("tracking CSV: no %v _peak column in %q", trackedSources, strings.Join(head, ","))
	}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return peak, ok, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("tracking CSV line %d: %w", line, err)
		}
		ts, err := strconv.ParseInt(strings.TrimSpace(rec[0]), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("tracking CSV line %d: timestamp %q", line, rec[0])
		}
		if untilUS >= 0 && ts > untilUS {
			continue
		}
		var sum int64
		for _, c := range cols {
			if c >= len(rec) {
				return 0, false, fmt.Errorf("tracking CSV line %d: %d fields, want column %d", line, len(rec), c+1)
			}
			v, err := strconv.ParseInt(strings.TrimSpace(rec[c]), 10, 64)
			if err != nil {
				return 0, false, fmt.Errorf("tracking CSV line %d: %s = %q", line, head[c], rec[c])
			}
			sum += v
		}
		peak, ok = max(peak, sum), true
	}
}
