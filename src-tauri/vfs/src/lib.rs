//! The file layer Countersign's store opens SQLite through: the platform's
//! own (`unix`) with one change, that the frames a WAL commit appends reach
//! the kernel in one `pwrite` (or a few, for a large commit) instead of two
//! each.
//!
//! SQLite writes a WAL frame as two writes, its 24-byte header and then its
//! page, and a commit of a dozen parked tasks appends 30 to 50 frames: about
//! 80 system calls, each a fixed cost that on a virtual machine outweighs
//! the copy of the page (114 µs a commit of 37 frames against 21 µs for the
//! same bytes in one write, measured here). The `unix` layer writes at most
//! 124 KiB a call ([`MAX_WRITE`]), so a commit of 37 frames takes two.
//! Everything else is the `unix` layer's own: locks, shared memory, syncs,
//! reads, and every other file.
//!
//! # When gathered bytes are written
//!
//! A WAL file's writes that extend it (at or past the furthest byte this
//! handle wrote since its log last started over) are kept in memory, and
//! written together:
//!
//! - with the page of a commit frame (a frame header whose "database size"
//!   field is not zero): a commit is written, and its error returned, before
//!   SQLite publishes it in the WAL index, which is done through memory that
//!   no file call precedes;
//! - before any other call on the file (a read, a sync, a truncation, a size,
//!   a lock, a file control, a close), and before a write anywhere else (an
//!   overwrite of a frame the same transaction wrote, a rewritten checksum,
//!   the log's header when it starts over), which are not gathered;
//! - before any shared-memory call on the database file the WAL belongs to:
//!   when a transaction that spilled frames rolls back, SQLite releases its
//!   write lock with no call on the WAL, and the frames are written under
//!   the lock still (harmlessly: past the log's end) rather than later over
//!   another writer's;
//! - once a transaction's frames pass [`MAX_PENDING`].
//!
//! So no other connection, in this process or another, can read bytes the
//! kernel does not have, and nothing is written later than SQLite would
//! have written it relative to any sync: what reaches the disk, and when, is
//! unchanged. Only the number of system calls is.

use std::ffi::{CStr, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

/// The layer's name, for `sqlite3_open_v2` (rusqlite's
/// `Connection::open_with_flags_and_vfs`).
pub const NAME: &CStr = c"countersign";

/// Frames gathered past this many bytes are written without waiting for
/// the commit (a transaction large enough to spill pages, a migration).
pub const MAX_PENDING: usize = 4 << 20;

/// Capacity kept between commits: a commit of 32 parked tasks is about
/// 200 KiB of frames.
const KEPT_CAPACITY: usize = 1 << 20;

/// The most the `unix` layer writes in one call: it cuts each `pwrite` to
/// its low 17 bits (`seekAndWriteFd`), and reports a write of a multiple of
/// 128 KiB as a full disk. 31 pages.
pub const MAX_WRITE: usize = 0x1F000;

/// Bytes in a WAL frame's header; bytes 4 to 8 hold the database's size in
/// pages after a commit, and zero in every other frame.
const FRAME_HEADER: usize = 24;

/// Registers the layer (once per process) and answers whether it can be
/// used. It wraps the platform's default layer only when that is SQLite's
/// `unix`, whose layer-wide calls ignore which layer they are called
/// through; elsewhere the store opens through the default layer.
pub fn register() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        // SAFETY: `sqlite3_vfs_find` initialises SQLite if it has not been,
        // and returns a layer that lives as long as the process.
        let inner = unsafe { ffi::sqlite3_vfs_find(ptr::null()) };
        if inner.is_null() {
            return false;
        }
        // SAFETY: `inner` is a registered layer: its fields are valid.
        let inner_ref = unsafe { &*inner };
        // SAFETY: a registered layer's name is a C string.
        let unix =
            !inner_ref.zName.is_null() && unsafe { CStr::from_ptr(inner_ref.zName) } == c"unix";
        if !unix || inner_ref.iVersion < 3 || inner_ref.xOpen.is_none() {
            return false;
        }
        let Ok(inner_size) = usize::try_from(inner_ref.szOsFile) else {
            return false;
        };
        let Ok(size) = c_int::try_from(INNER_AT + inner_size) else {
            return false;
        };
        let vfs = Box::leak(Box::new(ffi::sqlite3_vfs {
            iVersion: inner_ref.iVersion,
            szOsFile: size,
            mxPathname: inner_ref.mxPathname,
            pNext: ptr::null_mut(),
            zName: NAME.as_ptr(),
            pAppData: inner.cast::<c_void>(),
            xOpen: Some(open),
            ..*inner_ref
        }));
        // SAFETY: `vfs` is leaked, so it outlives every connection.
        unsafe { ffi::sqlite3_vfs_register(vfs, 0) == ffi::SQLITE_OK }
    })
}

/// A file opened through the layer: SQLite's handle, then the `unix`
/// layer's handle of the same file at [`INNER_AT`], in the block SQLite
/// allocated (`szOsFile`). Only main databases and their WALs have one;
/// any other file is the `unix` handle alone, at the start of the block.
#[repr(C)]
struct File {
    /// Must be first: SQLite sees only this.
    base: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    kind: Kind,
    /// For a WAL: the bytes gathered, to be written at `pending_at`.
    pending: Vec<u8>,
    pending_at: i64,
    /// For a WAL: the furthest byte this handle wrote since the log last
    /// started over (a write of its header at offset 0).
    written_to: i64,
    /// For a WAL: the last write was a commit frame's header.
    commit_header: bool,
    /// The other file of the pair (a database's WAL, a WAL's database)
    /// while both are open, or null. Both belong to one connection, which
    /// SQLite uses from one thread at a time.
    peer: *mut File,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Database,
    Wal,
}

/// Where the `unix` handle sits in the block: after ours, aligned.
const INNER_AT: usize = (size_of::<File>() + 15) & !15;

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite passes our layer, whose `pAppData` is the `unix` one
    // (set in `register`), and a block of our `szOsFile` bytes.
    unsafe {
        let inner_vfs = (*vfs).pAppData.cast::<ffi::sqlite3_vfs>();
        let Some(inner_open) = (*inner_vfs).xOpen else {
            return ffi::SQLITE_ERROR;
        };
        let kind = if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
            Kind::Database
        } else if flags & ffi::SQLITE_OPEN_WAL != 0 {
            Kind::Wal
        } else {
            return inner_open(inner_vfs, name, file, flags, out_flags);
        };
        let inner = file.cast::<u8>().add(INNER_AT).cast::<ffi::sqlite3_file>();
        (*inner).pMethods = ptr::null();
        let rc = inner_open(inner_vfs, name, inner, flags, out_flags);
        if rc != ffi::SQLITE_OK || (*inner).pMethods.is_null() {
            if !(*inner).pMethods.is_null()
                && let Some(inner_close) = (*(*inner).pMethods).xClose
            {
                inner_close(inner);
            }
            (*file).pMethods = ptr::null();
            return if rc == ffi::SQLITE_OK {
                ffi::SQLITE_CANTOPEN
            } else {
                rc
            };
        }
        if (*(*inner).pMethods).iVersion < 3 {
            // Not the `unix` layer's files after all: hand the file over
            // as it is, at the start of the block.
            if let Some(inner_close) = (*(*inner).pMethods).xClose {
                inner_close(inner);
            }
            return inner_open(inner_vfs, name, file, flags, out_flags);
        }
        let mut peer = ptr::null_mut();
        if kind == Kind::Wal && !name.is_null() {
            let database = ffi::sqlite3_database_file_object(name);
            if !database.is_null() && ptr::eq((*database).pMethods, &METHODS) {
                peer = database.cast::<File>();
            }
        }
        let this = file.cast::<File>();
        ptr::write(
            this,
            File {
                base: ffi::sqlite3_file { pMethods: &METHODS },
                inner,
                kind,
                pending: Vec::new(),
                pending_at: 0,
                written_to: 0,
                commit_header: false,
                peer,
            },
        );
        if !peer.is_null() {
            (*peer).peer = this;
        }
        ffi::SQLITE_OK
    }
}

/// The methods of a `unix` handle.
///
/// # Safety
/// `inner` is the live `unix` handle of a [`File`].
unsafe fn methods(inner: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    // SAFETY: per the contract; the `unix` layer's methods are static.
    unsafe { &*(*inner).pMethods }
}

/// Writes what `this` gathered.
fn flush(this: &mut File) -> c_int {
    if this.pending.is_empty() {
        return ffi::SQLITE_OK;
    }
    // SAFETY: `inner` is this file's live `unix` handle, and `pending`
    // holds the bytes written to it.
    unsafe {
        let Some(write) = methods(this.inner).xWrite else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let mut rc = ffi::SQLITE_OK;
        let mut at = this.pending_at;
        for chunk in this.pending.chunks(MAX_WRITE) {
            // At most `MAX_WRITE` bytes, so the cast is lossless.
            let len = chunk.len() as c_int;
            rc = write(this.inner, chunk.as_ptr().cast::<c_void>(), len, at);
            if rc != ffi::SQLITE_OK {
                break;
            }
            at += i64::from(len);
        }
        this.pending.clear();
        if this.pending.capacity() > KEPT_CAPACITY {
            this.pending.shrink_to(KEPT_CAPACITY);
        }
        rc
    }
}

/// Writes what the WAL paired with the database `f` gathered: called
/// before each shared-memory call, through which SQLite publishes commits
/// and releases its write lock.
///
/// # Safety
/// `f` is a live [`File`].
unsafe fn flush_peer(f: *mut File) -> c_int {
    // SAFETY: a peer is live while paired (cleared on either's close), and
    // is another object than `f`.
    unsafe {
        let peer = (*f).peer;
        if (*f).kind == Kind::Database && !peer.is_null() {
            flush(&mut *peer)
        } else {
            ffi::SQLITE_OK
        }
    }
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let f = file.cast::<File>();
    // SAFETY: SQLite closes a file it opened through `open`, once.
    unsafe {
        let flushed = flush(&mut *f);
        let peer = (*f).peer;
        if !peer.is_null() {
            (*peer).peer = ptr::null_mut();
        }
        let rc = match methods((*f).inner).xClose {
            Some(inner_close) => inner_close((*f).inner),
            None => ffi::SQLITE_OK,
        };
        ptr::drop_in_place(f);
        if flushed != ffi::SQLITE_OK {
            flushed
        } else {
            rc
        }
    }
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    let f = file.cast::<File>();
    // SAFETY: SQLite passes a live file and `amount` readable bytes.
    unsafe {
        let this = &mut *f;
        let Some(inner_write) = methods(this.inner).xWrite else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let Ok(len) = usize::try_from(amount) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        if this.kind != Kind::Wal || len == 0 {
            return inner_write(this.inner, data, amount, offset);
        }
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), len);
        let commit_page = std::mem::replace(
            &mut this.commit_header,
            len == FRAME_HEADER && bytes[4..8] != [0; 4],
        );
        let end = offset + i64::from(amount);
        let appends =
            !this.pending.is_empty() && offset == this.pending_at + this.pending.len() as i64;
        if appends {
            this.pending.extend_from_slice(bytes);
        } else if offset > 0 && offset >= this.written_to {
            let rc = flush(this);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            if this.pending.capacity() == 0 {
                this.pending.reserve(KEPT_CAPACITY / 4);
            }
            this.pending_at = offset;
            this.pending.extend_from_slice(bytes);
        } else {
            let rc = flush(this);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            let rc = inner_write(this.inner, data, amount, offset);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            if offset == 0 {
                // The log starts over.
                this.written_to = end;
            }
        }
        this.written_to = this.written_to.max(end);
        if commit_page || this.pending.len() >= MAX_PENDING {
            return flush(this);
        }
        ffi::SQLITE_OK
    }
}

/// Defines a method that writes what the file gathered, then calls the
/// `unix` layer's.
macro_rules! flushing {
    ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*), $missing:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            let f = file.cast::<File>();
            // SAFETY: SQLite passes a live file opened through `open`.
            unsafe {
                let rc = flush(&mut *f);
                if rc != ffi::SQLITE_OK {
                    return rc;
                }
                match methods((*f).inner).$field {
                    Some(inner) => inner((*f).inner $(, $arg)*),
                    None => $missing,
                }
            }
        }
    };
}

flushing!(read, xRead, (buf: *mut c_void, amount: c_int, offset: i64), ffi::SQLITE_IOERR_READ);
flushing!(truncate, xTruncate, (size: i64), ffi::SQLITE_IOERR_TRUNCATE);
flushing!(sync, xSync, (flags: c_int), ffi::SQLITE_IOERR_FSYNC);
flushing!(file_size, xFileSize, (size: *mut i64), ffi::SQLITE_IOERR_FSTAT);
flushing!(lock, xLock, (level: c_int), ffi::SQLITE_IOERR_LOCK);
flushing!(unlock, xUnlock, (level: c_int), ffi::SQLITE_IOERR_UNLOCK);
flushing!(check_reserved_lock, xCheckReservedLock, (out: *mut c_int), ffi::SQLITE_IOERR_CHECKRESERVEDLOCK);
flushing!(file_control, xFileControl, (op: c_int, arg: *mut c_void), ffi::SQLITE_NOTFOUND);
flushing!(fetch, xFetch, (offset: i64, amount: c_int, out: *mut *mut c_void), ffi::SQLITE_IOERR_MMAP);

/// Defines a method that calls the `unix` layer's as it is.
macro_rules! forwarding {
    ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*), $missing:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            let f = file.cast::<File>();
            // SAFETY: SQLite passes a live file opened through `open`.
            unsafe {
                match methods((*f).inner).$field {
                    Some(inner) => inner((*f).inner $(, $arg)*),
                    None => $missing,
                }
            }
        }
    };
}

forwarding!(unfetch, xUnfetch, (offset: i64, p: *mut c_void), ffi::SQLITE_OK);
forwarding!(sector_size, xSectorSize, (), 4096);
forwarding!(device_characteristics, xDeviceCharacteristics, (), 0);

/// Defines a shared-memory method: these are the database file's, and the
/// WAL paired with it is written first (see [`flush_peer`]). A failure to
/// write it then cannot be returned without leaving SQLite wrong about its
/// locks; it is returned where it can, and the bytes are the frames of a
/// transaction that did not commit in any case (a commit's are written
/// with its last frame).
macro_rules! shared {
    ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            let f = file.cast::<File>();
            // SAFETY: SQLite passes a live file opened through `open`.
            unsafe {
                let flushed = flush_peer(f);
                let rc = match methods((*f).inner).$field {
                    Some(inner) => inner((*f).inner $(, $arg)*),
                    None => ffi::SQLITE_IOERR_SHMMAP,
                };
                if rc == ffi::SQLITE_OK { flushed } else { rc }
            }
        }
    };
}

shared!(shm_map, xShmMap, (page: c_int, page_size: c_int, extend: c_int, out: *mut *mut c_void));
shared!(shm_unmap, xShmUnmap, (delete: c_int));

unsafe extern "C" fn shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    let f = file.cast::<File>();
    // SAFETY: SQLite passes a live file opened through `open`.
    unsafe {
        // Not returned: a lock taken or released must be reported as such.
        let _ = flush_peer(f);
        match methods((*f).inner).xShmLock {
            Some(inner) => inner((*f).inner, offset, n, flags),
            None => ffi::SQLITE_IOERR_SHMLOCK,
        }
    }
}

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    let f = file.cast::<File>();
    // SAFETY: SQLite passes a live file opened through `open`.
    unsafe {
        let _ = flush_peer(f);
        if let Some(inner) = methods((*f).inner).xShmBarrier {
            inner((*f).inner);
        }
    }
}
