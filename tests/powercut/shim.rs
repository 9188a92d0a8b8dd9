//! Power cuts for tests: a library preloaded into the server
//! (`LD_PRELOAD`) that records, before each write to the files it watches,
//! the bytes that write replaces, and marks each `fsync`/`fdatasync` of
//! them. After the server is killed, `tests/common/powercut.rs` reads that
//! record and undoes every write made after its file's last sync, or keeps
//! a prefix of those writes with the next one torn, or any of them out of
//! order: what a disk may hold after the power went, when nothing unsynced
//! had to reach it.
//!
//! Everything else (reads, `mmap`, the `-shm` file) goes to the file
//! system as it would. The process is only ever slowed: one lock is held
//! across each watched write and sync, so the record's order is the disk's.
//!
//! Environment:
//! - `POWERCUT_FILES`: the watched files, absolute paths separated by `:`
//!   (their index in this list names them in the record);
//! - `POWERCUT_LOG`: the record, appended to;
//! - `POWERCUT_STALL` (optional): a thread name; that thread's syncs of the
//!   watched files never finish, as a sync on a slow disk may still be
//!   going when the power goes. A test can then tell what a commit's own
//!   sync kept from what a background one happened to keep.
//! - `POWERCUT_SLOW_MS` (optional): every other sync of the watched files
//!   first waits this long, as a slow disk's flush does. What is answered
//!   before its sync returned then meets a kill right after its answer
//!   with that sync unfinished, rather than a few microseconds after it.
//!
//! A record is a kind byte (`W` a write, `T` a truncation, `S` a sync), the
//! file's index (a byte), then for `W` and `T` four little-endian u64s and
//! the old bytes: `W` offset, length written, the file's size before, the
//! number of old bytes; `T` the new length, the old size, 0, the number of
//! old bytes (those cut off).
//!
//! Built by `cargo test` as an example (a `cdylib`).
#![allow(clippy::missing_safety_doc)]

use std::ffi::{CStr, CString, c_int, c_void};
use std::sync::{Mutex, OnceLock};

use libc::{off_t, size_t, ssize_t};

type WriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
type PwriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
type TruncateFn = unsafe extern "C" fn(c_int, off_t) -> c_int;
type SyncFn = unsafe extern "C" fn(c_int) -> c_int;

/// The C library's own functions, found past this library.
struct Real {
    write: WriteFn,
    pwrite: PwriteFn,
    pwrite64: PwriteFn,
    ftruncate: TruncateFn,
    ftruncate64: TruncateFn,
    fsync: SyncFn,
    fdatasync: SyncFn,
}

struct Watch {
    files: Vec<Vec<u8>>,
    log: c_int,
    lock: Mutex<()>,
    /// The name of a thread whose syncs of watched files never finish
    /// (`POWERCUT_STALL`), as the kernel keeps it (at most 15 bytes).
    stalled: Option<Vec<u8>>,
    /// How long each other sync of a watched file takes at least
    /// (`POWERCUT_SLOW_MS`).
    slow: std::time::Duration,
}

struct Shim {
    real: Real,
    watch: Option<Watch>,
}

static SHIM: OnceLock<Shim> = OnceLock::new();

unsafe fn next(name: &CStr) -> *mut c_void {
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if f.is_null() {
        // Nothing sensible can run without the real function.
        unsafe { libc::abort() };
    }
    f
}

fn shim() -> &'static Shim {
    SHIM.get_or_init(|| unsafe {
        let real = Real {
            write: std::mem::transmute::<*mut c_void, WriteFn>(next(c"write")),
            pwrite: std::mem::transmute::<*mut c_void, PwriteFn>(next(c"pwrite")),
            pwrite64: std::mem::transmute::<*mut c_void, PwriteFn>(next(c"pwrite64")),
            ftruncate: std::mem::transmute::<*mut c_void, TruncateFn>(next(c"ftruncate")),
            ftruncate64: std::mem::transmute::<*mut c_void, TruncateFn>(next(c"ftruncate64")),
            fsync: std::mem::transmute::<*mut c_void, SyncFn>(next(c"fsync")),
            fdatasync: std::mem::transmute::<*mut c_void, SyncFn>(next(c"fdatasync")),
        };
        Shim {
            real,
            watch: watch(),
        }
    })
}

unsafe fn watch() -> Option<Watch> {
    let files = std::env::var_os("POWERCUT_FILES")?;
    let log = std::env::var_os("POWERCUT_LOG")?;
    let log = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(log.as_os_str())).ok()?;
    let fd = unsafe {
        libc::open(
            log.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        unsafe { libc::abort() };
    }
    let files = std::os::unix::ffi::OsStrExt::as_bytes(files.as_os_str())
        .split(|b| *b == b':')
        .map(<[u8]>::to_vec)
        .collect();
    let stalled = std::env::var_os("POWERCUT_STALL").map(|t| {
        let t = std::os::unix::ffi::OsStrExt::as_bytes(t.as_os_str());
        t[..t.len().min(15)].to_vec()
    });
    let slow = std::env::var("POWERCUT_SLOW_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(std::time::Duration::ZERO, std::time::Duration::from_millis);
    Some(Watch {
        files,
        log: fd,
        lock: Mutex::new(()),
        stalled,
        slow,
    })
}

impl Watch {
    /// The index of the watched file `fd` is open on.
    fn file(&self, fd: c_int) -> Option<u8> {
        let link = format!("/proc/self/fd/{fd}\0");
        let mut buf = [0u8; 4096];
        let n =
            unsafe { libc::readlink(link.as_ptr().cast(), buf.as_mut_ptr().cast(), buf.len() - 1) };
        let path = buf.get(..usize::try_from(n).ok()?)?;
        let i = self.files.iter().position(|f| f == path)?;
        u8::try_from(i).ok()
    }

    fn size(fd: c_int) -> u64 {
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            unsafe { libc::abort() };
        }
        u64::try_from(st.st_size).unwrap_or(0)
    }

    /// The bytes of `fd` in `[from, to)` (within the file), read through a
    /// descriptor of our own: `fd` may be open for writing only.
    fn read(fd: c_int, from: u64, to: u64) -> Vec<u8> {
        let mut old = vec![0u8; usize::try_from(to.saturating_sub(from)).unwrap_or(0)];
        if old.is_empty() {
            return old;
        }
        let link = format!("/proc/self/fd/{fd}\0");
        let own = unsafe { libc::open(link.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if own < 0 {
            unsafe { libc::abort() };
        }
        let mut done = 0;
        while done < old.len() {
            let at = off_t::try_from(from + done as u64).unwrap_or(off_t::MAX);
            let n =
                unsafe { libc::pread(own, old[done..].as_mut_ptr().cast(), old.len() - done, at) };
            if n <= 0 {
                unsafe { libc::abort() };
            }
            done += n as usize;
        }
        unsafe { libc::close(own) };
        old
    }

    /// Appends a record: `nums` and `old` are left out of a sync's.
    fn append(&self, real: &Real, kind: u8, file: u8, nums: [u64; 3], old: &[u8]) {
        let mut rec = Vec::with_capacity(2 + 32 + old.len());
        rec.extend_from_slice(&[kind, file]);
        if kind != b'S' {
            for n in nums.into_iter().chain([old.len() as u64]) {
                rec.extend_from_slice(&n.to_le_bytes());
            }
            rec.extend_from_slice(old);
        }
        let mut done = 0;
        while done < rec.len() {
            let n =
                unsafe { (real.write)(self.log, rec[done..].as_ptr().cast(), rec.len() - done) };
            if n <= 0 {
                unsafe { libc::abort() };
            }
            done += n as usize;
        }
    }

    /// Records what a write of `len` bytes at `off` replaces.
    fn before_write(&self, real: &Real, file: u8, fd: c_int, off: u64, len: u64) {
        let size = Self::size(fd);
        let old = Self::read(fd, off.min(size), (off + len).min(size));
        self.append(real, b'W', file, [off, len, size], &old);
    }
}

unsafe fn written(
    fd: c_int,
    off: Option<off_t>,
    len: size_t,
    op: impl FnOnce() -> ssize_t,
) -> ssize_t {
    let s = shim();
    let Some(w) = &s.watch else { return op() };
    let Some(file) = w.file(fd) else { return op() };
    let _held = w.lock.lock().unwrap_or_else(|e| e.into_inner());
    let off = match off {
        Some(o) => o,
        // A descriptor opened to append writes at the end, wherever its
        // offset stands (at 0 before its first write).
        None if unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_APPEND != 0 => {
            off_t::try_from(Watch::size(fd)).unwrap_or(off_t::MAX)
        }
        None => unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) },
    };
    if let Ok(off) = u64::try_from(off) {
        w.before_write(&s.real, file, fd, off, len as u64);
    }
    op()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, len: size_t) -> ssize_t {
    unsafe { written(fd, None, len, || (shim().real.write)(fd, buf, len)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, len: size_t, off: off_t) -> ssize_t {
    unsafe {
        written(fd, Some(off), len, || {
            (shim().real.pwrite)(fd, buf, len, off)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite64(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    off: off_t,
) -> ssize_t {
    unsafe {
        written(fd, Some(off), len, || {
            (shim().real.pwrite64)(fd, buf, len, off)
        })
    }
}

unsafe fn truncated(fd: c_int, len: off_t, op: impl FnOnce() -> c_int) -> c_int {
    let s = shim();
    let Some(w) = &s.watch else { return op() };
    let Some(file) = w.file(fd) else { return op() };
    let _held = w.lock.lock().unwrap_or_else(|e| e.into_inner());
    let new = u64::try_from(len).unwrap_or(0);
    let size = Watch::size(fd);
    let cut = Watch::read(fd, new.min(size), size);
    w.append(&s.real, b'T', file, [new, size, 0], &cut);
    op()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: off_t) -> c_int {
    unsafe { truncated(fd, len, || (shim().real.ftruncate)(fd, len)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: off_t) -> c_int {
    unsafe { truncated(fd, len, || (shim().real.ftruncate64)(fd, len)) }
}

unsafe fn synced(fd: c_int, op: impl FnOnce() -> c_int) -> c_int {
    let s = shim();
    let Some(w) = &s.watch else { return op() };
    let Some(file) = w.file(fd) else { return op() };
    if w.stalled.is_some() && w.stalled == this_thread() {
        // A sync that is still going when the power goes: nothing it
        // would have kept counts. The process is killed meanwhile.
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    // Before the lock: writes go on meanwhile, as they do beside a flush.
    if !w.slow.is_zero() {
        std::thread::sleep(w.slow);
    }
    let _held = w.lock.lock().unwrap_or_else(|e| e.into_inner());
    let r = op();
    if r == 0 {
        w.append(&s.real, b'S', file, [0, 0, 0], &[]);
    }
    r
}

/// The calling thread's name.
fn this_thread() -> Option<Vec<u8>> {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included.
    if unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) } != 0 {
        return None;
    }
    let len = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    Some(name[..len].to_vec())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    unsafe { synced(fd, || (shim().real.fsync)(fd)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    unsafe { synced(fd, || (shim().real.fdatasync)(fd)) }
}
