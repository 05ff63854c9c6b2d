package safe

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/cuvs-go/cuvs/generated"
)

// Option configures Load.
type Option func(*loadConfig)

type loadConfig struct {
	path         string
	pool         bool
	poolInitial  int
	poolMax      int
	poolManaged  bool
	async        bool // WithAsyncMemoryResource
	versionCheck bool
	limit        int64 // WithMemoryLimit's bytes, 0 for none
}

// DefaultPoolInitialPercent and DefaultPoolMaxPercent are the device memory
// pool Load enables unless told otherwise: 10% of the device's memory
// reserved at once, growing to at most 60%.
const (
	DefaultPoolInitialPercent = 10
	DefaultPoolMaxPercent     = 60
)

// WithLibrary loads the library at path instead of searching for it.
func WithLibrary(path string) Option { return func(c *loadConfig) { c.path = path } }

// WithMemoryPool sets the device memory pool Load enables: initialPercent of
// the device's memory reserved at once, growing up to maxPercent; managed
// uses CUDA managed memory for it.
func WithMemoryPool(initialPercent, maxPercent int, managed bool) Option {
	return func(c *loadConfig) {
		c.pool, c.poolInitial, c.poolMax, c.poolManaged = true, initialPercent, maxPercent, managed
	}
}

// WithoutMemoryPool keeps cuVS's default memory resource. Every search then
// allocates and frees device memory with blocking calls: measured on an
// H200, a CAGRA search stays at ~2.9k queries/s however many goroutines
// search. Use it only where something else manages device memory.
func WithoutMemoryPool() Option { return func(c *loadConfig) { c.pool = false } }

// WithAsyncMemoryResource makes Load switch the process's device memory
// resource to stream-ordered asynchronous allocation
// (cuvsRMMAsyncMemoryResourceEnable: cudaMallocAsync / cudaFreeAsync)
// instead of the pool: a free returns memory to its stream without
// blocking the host, so concurrent searches on separate streams do not
// serialize on their scratch allocations. cuVS 26.08 and later: with a
// 26.06 library Load returns an error wrapping ErrNotInRelease and loads
// nothing. Like the pool it is process-wide, and reaches each other device
// with its first bound Resources (OnDevice). Measured on an H200 (cuVS
// 26.08.01, CAGRA 100k × 128, examples/serving -pool async): concurrent
// one-query searches ran at about half the pool's rate (32 goroutines:
// single-CTA 44.6k against ~83k queries/s, multi-CTA 21.1k against 38k);
// the pool stays the default.
func WithAsyncMemoryResource() Option {
	return func(c *loadConfig) { c.async, c.pool = true, false }
}

// WithoutVersionCheck loads a library whose major.minor version is none of
// the releases the bindings serve (generated.Releases), bound as the nearest
// of them. Its ABI may differ: use it only to experiment.
func WithoutVersionCheck() Option { return func(c *loadConfig) { c.versionCheck = false } }

var (
	loadMu   sync.Mutex
	loadedOK bool
	loaded   loadConfig // the options of the Load that succeeded
)

// normalized is c with what does not apply cleared: the pool's sizes when
// there is no pool.
func (c loadConfig) normalized() loadConfig {
	if !c.pool {
		c.poolInitial, c.poolMax, c.poolManaged = 0, 0, false
	}
	if c.pool {
		c.async = false
	}
	return c
}

// differs describes how c's options differ from the loaded ones', or is
// "". A Load without WithLibrary accepts the library already loaded.
func (c loadConfig) differs(was loadConfig) string {
	c, was = c.normalized(), was.normalized()
	var d []string
	if c.path != "" && !samePath(c.path, was.path) {
		d = append(d, fmt.Sprintf("library %q, loaded %q", c.path, generated.LibraryPath()))
	}
	if c.pool != was.pool || c.async != was.async || c.poolInitial != was.poolInitial || c.poolMax != was.poolMax || c.poolManaged != was.poolManaged || c.limit != was.limit {
		d = append(d, fmt.Sprintf("memory pool %s, loaded with %s", c.poolString(), was.poolString()))
	}
	if c.versionCheck != was.versionCheck {
		d = append(d, fmt.Sprintf("version check %t, loaded with %t", c.versionCheck, was.versionCheck))
	}
	return strings.Join(d, "; ")
}

// samePath reports whether a and b name the same file.
func samePath(a, b string) bool {
	if a == b {
		return true
	}
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

func (c loadConfig) poolString() string {
	if c.async {
		return "async (cudaMallocAsync)"
	}
	if !c.pool {
		return "off"
	}
	if c.limit > 0 {
		return fmt.Sprintf("%d%%..%d bytes (managed %t)", c.poolInitial, c.limit, c.poolManaged)
	}
	return fmt.Sprintf("%d%%..%d%% (managed %t)", c.poolInitial, c.poolMax, c.poolManaged)
}

// Load opens libcuvs_c and prepares the process for cuVS:
//
//   - it finds the library (WithLibrary, else $CUVS_LIBRARY, else the
//     dynamic loader's search for libcuvs_c.so, else $CONDA_PREFIX/lib);
//   - it refuses a library whose major.minor version is none of the
//     releases the bindings serve (generated.Releases: 26.06 and 26.08),
//     and binds the functions of the library's release;
//   - unless WithoutMemoryPool, it switches the process's device memory
//     resource to a pool (DefaultPoolInitialPercent of device memory reserved
//     at once, growing to DefaultPoolMaxPercent), through
//     cuvsRMMPoolMemoryResourceEnable. That is process-wide: every later cuVS
//     call in the process, and any other RMM user in it, allocates from the
//     pool, and the reserved memory is not returned until ResetMemoryResource.
//     It is what makes concurrent searches scale.
//
// Load is safe to call more than once. A later call with the same options
// (defaults included; without WithLibrary, whichever library is loaded)
// does nothing; one whose options differ from those of the Load that
// succeeded returns an *ArgError naming "opts" and changes nothing: the
// library, its memory pool and the version check are chosen once per
// process (EnableMemoryPool and ResetMemoryResource change the pool
// afterwards).
func Load(opts ...Option) error {
	c := loadConfig{pool: true, poolInitial: DefaultPoolInitialPercent, poolMax: DefaultPoolMaxPercent, versionCheck: true}
	for _, o := range opts {
		o(&c)
	}
	loadMu.Lock()
	defer loadMu.Unlock()
	if loadedOK {
		if d := c.differs(loaded); d != "" {
			return argf("safe.Load", "opts", "differ from those the library was loaded with (%s): Load chooses them once per process", d)
		}
		return nil
	}
	load := generated.Load
	if !c.versionCheck {
		load = generated.LoadUnchecked
	}
	if err := load(c.path); err != nil {
		if errors.Is(err, generated.ErrUnsupportedRelease) {
			return fmt.Errorf("safe.Load: %w: %w (or load with WithoutVersionCheck)", ErrVersion, err)
		}
		if errors.Is(err, ErrLibraryNotFound) {
			return fmt.Errorf("safe.Load: %w; these bindings load the libcuvs_c of cuVS %s", err, strings.Join(Releases(), " or "))
		}
		return fmt.Errorf("safe.Load: %w", err)
	}
	if c.versionCheck {
		if err := checkVersion(); err != nil {
			generated.Unload()
			return err
		}
	}
	if c.limit < 0 {
		generated.Unload()
		return argf("safe.Load", "WithMemoryLimit", "%d bytes is negative", c.limit)
	}
	if c.limit > 0 { // the limit is the pool's maximum
		c.pool, c.async = true, false
	}
	if c.async {
		if err := inRelease("safe.Load", "cuvsRMMAsyncMemoryResourceEnable"); err != nil {
			generated.Unload()
			return err
		}
		if err := generated.CuvsRMMAsyncMemoryResourceEnable(); err != nil {
			generated.Unload()
			return wrap("safe.Load: enabling the asynchronous memory resource", err)
		}
		recordNoPool(currentDevice())
		rememberAsync()
	}
	if c.pool {
		if err := enablePool("safe.Load", currentDevice(), c.poolInitial, c.poolMax, c.poolManaged, c.limit); err != nil {
			generated.Unload()
			return err
		}
		if c.limit > 0 {
			memDevices.limit.Store(c.limit)
		}
		rememberPool(c.poolInitial, c.poolMax, c.poolManaged, c.limit) // for the other devices (device.go)
	}
	loadedOK = true
	loaded = c
	if loaded.path == "" {
		loaded.path = generated.LibraryPath()
	}
	return nil
}

// Version is a cuVS release number.
type Version struct{ Major, Minor, Patch int }

// String formats the version as cuVS does, e.g. "26.06.00".
func (v Version) String() string { return fmt.Sprintf("%d.%02d.%02d", v.Major, v.Minor, v.Patch) }

// LibraryVersion asks the loaded library its version (cuvsVersionGet).
func LibraryVersion() (Version, error) {
	var major, minor, patch uint16
	if err := generated.CuvsVersionGet(&major, &minor, &patch); err != nil {
		return Version{}, wrap("safe.LibraryVersion", err)
	}
	return Version{int(major), int(minor), int(patch)}, nil
}

// BindingsVersion is the version of the cuVS headers the bindings of the
// loaded library's release were generated from; before Load, those of the
// oldest release the bindings serve.
func BindingsVersion() Version {
	h := generated.HeaderVersion(generated.Release())
	if h == "" {
		h = generated.CuvsVersion
	}
	v, _ := parseVersion(h)
	return v
}

func parseVersion(s string) (Version, error) {
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	var n [3]int
	for i := range n {
		if i >= len(parts) {
			break
		}
		x, err := strconv.Atoi(parts[i])
		if err != nil {
			return Version{}, fmt.Errorf("bad version %q", s)
		}
		n[i] = x
	}
	return Version{n[0], n[1], n[2]}, nil
}

func checkVersion() error {
	lib, err := LibraryVersion()
	if err != nil {
		return fmt.Errorf("safe.Load: reading the library's version: %w", err)
	}
	rel := fmt.Sprintf("%d.%02d", lib.Major, lib.Minor)
	if generated.HeaderVersion(rel) == "" {
		return fmt.Errorf("safe.Load: %w: %s is cuVS %s, these bindings are for cuVS %s (regenerate them, or load with WithoutVersionCheck)",
			ErrVersion, generated.LibraryPath(), lib, strings.Join(generated.Releases(), ", "))
	}
	return checkErrorText()
}

// errorTextProbe is what checkErrorText has the library store and return.
const errorTextProbe = "cuvs-go: error text probe"

// checkErrorText checks the channel every error of the library comes
// through: cuVS keeps the text of a thread's last failure in a
// thread-local string (cuvsSetLastErrorText stores a copy, and
// cuvsGetLastErrorText returns it), which the generated bindings read on
// the failing call's own thread. A probe stored and read back on one OS
// thread, then cleared, shows the pair works on this library; a library
// that cannot round-trip it would report every failure without its cause.
func checkErrorText() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	probe := []byte(errorTextProbe + "\x00")
	if err := generated.CuvsSetLastErrorText(&probe[0]); err != nil {
		return fmt.Errorf("safe.Load: %w", err)
	}
	got, err := generated.CuvsGetLastErrorText()
	if cerr := generated.CuvsSetLastErrorText(nil); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("safe.Load: %w", err)
	}
	if got != errorTextProbe {
		return fmt.Errorf("safe.Load: %w: %s stored the error text %q and returned %q (load with WithoutVersionCheck to skip this check)",
			ErrVersion, generated.LibraryPath(), errorTextProbe, got)
	}
	return nil
}

// LogLevel is cuVS's logging threshold (cuvsLogLevel_t).
type LogLevel int32

// Log levels, from the most verbose.
const (
	LogTrace    = LogLevel(generated.CuvsLogLevel_t_CUVS_LOG_LEVEL_TRACE)
	LogDebug    = LogLevel(generated.CuvsLogLevel_t_CUVS_LOG_LEVEL_DEBUG)
	LogInfo     = LogLevel(generated.CuvsLogLevel_t_CUVS_LOG_LEVEL_INFO)
	LogWarn     = LogLevel(generated.CuvsLogLevel_t_CUVS_LOG_LEVEL_WARN)
	LogError    = LogLevel(generated.CuvsLogLevel_t_CUVS_LOG_LEVEL_ERROR)
	LogCritical = LogLevel(generated.CuvsLogLevel_t_CUVS_LOG_LEVEL_CRITICAL)
	LogOff      = LogLevel(generated.CuvsLogLevel_t_CUVS_LOG_LEVEL_OFF)
)

// String returns cuVS's name of the level, e.g. "CUVS_LOG_LEVEL_WARN", or
// "LogLevel(n)" for a value that is none of them.
func (l LogLevel) String() string {
	if l < LogTrace || l > LogOff {
		return fmt.Sprintf("LogLevel(%d)", int32(l))
	}
	return generated.CuvsLogLevel_t(l).String()
}

// SetLogLevel sets cuVS's logging threshold (process-wide).
func SetLogLevel(l LogLevel) error {
	if l < LogTrace || l > LogOff {
		return argf("safe.SetLogLevel", "level", "%d is not a log level", int(l))
	}
	return wrap("safe.SetLogLevel", generated.CuvsSetLogLevel(generated.CuvsLogLevel_t(l)))
}

// GetLogLevel returns cuVS's logging threshold.
func GetLogLevel() (LogLevel, error) {
	l, err := generated.CuvsGetLogLevel()
	return LogLevel(l), wrap("safe.GetLogLevel", err)
}

// EnableMemoryPool switches the process's device memory resource to a pool
// (see Load, which does this by default). It affects the whole process.
func EnableMemoryPool(initialPercent, maxPercent int, managed bool) error {
	const op = "safe.EnableMemoryPool"
	if initialPercent <= 0 || initialPercent > 100 {
		return argf(op, "initialPercent", "%d is not in 1..100", initialPercent)
	}
	if maxPercent < initialPercent || maxPercent > 100 {
		return argf(op, "maxPercent", "%d is not in %d..100", maxPercent, initialPercent)
	}
	return enablePool(op, currentDevice(), initialPercent, maxPercent, managed, 0)
}

// EnableMemoryLimit switches the process's device memory resource (on the
// calling thread's current device) to a pool of initialPercent of bytes
// growing to bytes at most, and sets SetMemoryLimit(bytes): what Load's
// WithMemoryLimit does, for a process already loaded. As
// EnableMemoryPool, it affects the whole process, and no device memory of
// the previous resource may be in use.
func EnableMemoryLimit(initialPercent int, bytes int64, managed bool) error {
	const op = "safe.EnableMemoryLimit"
	if initialPercent <= 0 || initialPercent > 100 {
		return argf(op, "initialPercent", "%d is not in 1..100", initialPercent)
	}
	if bytes <= 0 {
		return argf(op, "bytes", "%d, want a positive cap", bytes)
	}
	if err := enablePool(op, currentDevice(), initialPercent, 100, managed, bytes); err != nil {
		return err
	}
	memDevices.limit.Store(bytes)
	return nil
}

// ResetMemoryResource returns the process to cuVS's default device memory
// resource, releasing a pool. No device memory allocated from the pool may
// be in use.
func ResetMemoryResource() error {
	err := generated.CuvsRMMMemoryResourceReset()
	if err == nil {
		recordNoPool(currentDevice())
	}
	return wrap("safe.ResetMemoryResource", err)
}
