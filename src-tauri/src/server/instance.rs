//! How the CLI finds the running server: `countersign serve` writes
//! `instance.json` (its URL, pid and version) into the data dir while it
//! serves and removes it on a clean shutdown; the CLI reads it, together
//! with the UI secret, to call the UI API. One server at a time uses a data
//! dir: it holds an exclusive lock on `countersign.lock` there for its life
//! (the OS releases it when the process ends, even on `kill -9`), and the
//! CLI asks that lock whether the server in `instance.json` still lives.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ui_auth::{SecretError, UiSecret, write_private_temp};

/// The file's name in the data dir.
pub const INSTANCE_FILE: &str = "instance.json";

/// What a serving process says about itself in `instance.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceInfo {
    /// Where to reach it from this machine: `http://127.0.0.1:PORT`.
    pub url: String,
    pub pid: u32,
    /// The `countersign` version serving.
    pub version: String,
}

/// A running instance, as the CLI needs it: where it is and the UI token.
#[derive(Debug, Clone)]
pub struct Instance {
    pub info: InstanceInfo,
    pub token: UiSecret,
}

/// Why no running instance could be found.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error(
        "no Countersign server is running with the data dir {0} (start one with `countersign serve`)"
    )]
    NotRunning(PathBuf),
    #[error(
        "no Countersign server is running with the data dir {dir}: process {pid} named in {INSTANCE_FILE} is gone \
         (it did not shut down cleanly; start one with `countersign serve`)"
    )]
    Stale { dir: PathBuf, pid: u32 },
    #[error("cannot read {0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("{0} is not a valid instance file: {1}")]
    Malformed(PathBuf, serde_json::Error),
    #[error(transparent)]
    Secret(#[from] SecretError),
}

/// The lock file's name in the data dir.
pub const LOCK_FILE: &str = "countersign.lock";

/// The exclusive lock on a data dir, held while this process serves from
/// it; released when dropped or when the process ends.
#[derive(Debug)]
pub struct DataDirLock {
    _file: Option<std::fs::File>,
}

/// Why a data dir could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "another Countersign server is using the data dir {dir}{} — \
         use that one (the CLI finds it), stop it first, or give this one another --data-dir",
        holder.as_ref().map(|i| format!(" (process {} at {})", i.pid, i.url)).unwrap_or_default()
    )]
    Held {
        dir: PathBuf,
        holder: Option<InstanceInfo>,
    },
    #[error("cannot lock {0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// Takes the data dir for this process, or says which server has it. A
/// file system without locks (some network mounts) gets a warning: two
/// servers on one data dir would then not be stopped.
pub fn lock_data_dir(data_dir: &Path) -> Result<DataDirLock, LockError> {
    let path = data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| LockError::Io(path.clone(), e))?;
    // The CLI holds the lock shared for an instant to see whether a server
    // is alive; a server starting just then waits that instant out.
    let mut attempts = 0;
    let taken = loop {
        match file.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if attempts < LOCK_ATTEMPTS => {
                attempts += 1;
                std::thread::sleep(LOCK_RETRY);
            }
            taken => break taken,
        }
    };
    match taken {
        Ok(()) => Ok(DataDirLock { _file: Some(file) }),
        Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Held {
            dir: data_dir.to_path_buf(),
            holder: std::fs::read(data_dir.join(INSTANCE_FILE))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok()),
        }),
        Err(std::fs::TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => {
            tracing::warn!("{} cannot be locked here: {e}", path.display());
            Ok(DataDirLock { _file: None })
        }
        Err(std::fs::TryLockError::Error(e)) => Err(LockError::Io(path, e)),
    }
}

const LOCK_ATTEMPTS: u32 = 10;
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(20);

/// Whether a server holds the data dir, asked of the lock itself: the OS
/// drops it with its process, so unlike a pid it cannot be stale or
/// reused. `None` when the lock cannot tell: no lock file (a server from
/// before the lock) or a file system without locks.
fn data_dir_in_use(data_dir: &Path) -> Option<bool> {
    let file = std::fs::File::open(data_dir.join(LOCK_FILE)).ok()?;
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            Some(false)
        }
        Err(std::fs::TryLockError::WouldBlock) => Some(true),
        Err(std::fs::TryLockError::Error(_)) => None,
    }
}

/// `instance.json` of this process: written when serving starts, removed
/// by [`InstanceFile::remove`] or, failing that, when dropped.
#[derive(Debug)]
pub struct InstanceFile {
    path: PathBuf,
    pid: u32,
    removed: bool,
}

impl InstanceFile {
    /// Announces this process as serving on `local_addr`. The file is
    /// private (0600) and replaced atomically, so a reader never sees half
    /// of it.
    pub fn write(data_dir: &Path, local_addr: SocketAddr) -> std::io::Result<InstanceFile> {
        let path = data_dir.join(INSTANCE_FILE);
        let info = InstanceInfo {
            url: format!("http://{}", reachable(local_addr)),
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        };
        let mut body = serde_json::to_vec_pretty(&info).map_err(std::io::Error::other)?;
        body.push(b'\n');
        // Not `write_private`: the folder is not synced, since what this
        // announces, a running process, cannot outlive a power loss.
        let tmp = write_private_temp(&path, &body)?;
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(InstanceFile {
            path,
            pid: info.pid,
            removed: false,
        })
    }

    /// Removes the file, unless another process has since announced itself in it.
    pub fn remove(mut self) {
        self.remove_if_ours();
    }

    fn remove_if_ours(&mut self) {
        if self.removed {
            return;
        }
        self.removed = true;
        let ours = std::fs::read(&self.path)
            .ok()
            .and_then(|b| serde_json::from_slice::<InstanceInfo>(&b).ok())
            .is_some_and(|i| i.pid == self.pid);
        if ours && let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!("cannot remove {}: {e}", self.path.display());
        }
    }
}

impl Drop for InstanceFile {
    fn drop(&mut self) {
        self.remove_if_ours();
    }
}

/// The address to reach a server bound to `addr` from this machine: the
/// loopback address when it listens on every address.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, addr.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, addr.port()).into(),
        _ => addr,
    }
}

/// The server running with `data_dir`, and the token to call its UI API.
/// A clear error when none is: no `instance.json`, or its process is gone
/// (the data dir's lock is free, or, where the lock cannot tell, on Linux
/// its pid is).
pub fn read_instance(data_dir: &Path) -> Result<Instance, InstanceError> {
    let path = data_dir.join(INSTANCE_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(InstanceError::NotRunning(data_dir.to_path_buf()));
        }
        Err(e) => return Err(InstanceError::Io(path, e)),
    };
    let info: InstanceInfo =
        serde_json::from_slice(&bytes).map_err(|e| InstanceError::Malformed(path, e))?;
    let alive = data_dir_in_use(data_dir).unwrap_or_else(|| process_alive(info.pid));
    if !alive {
        return Err(InstanceError::Stale {
            dir: data_dir.to_path_buf(),
            pid: info.pid,
        });
    }
    let token = UiSecret::load(data_dir)?;
    Ok(Instance { info, token })
}

#[cfg(target_os = "linux")]
fn process_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Without `/proc`, trust the file; a dead server shows up as a refused
/// connection instead.
#[cfg(not(target_os = "linux"))]
fn process_alive(_pid: u32) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_file_is_private_readable_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        UiSecret::load_or_create(dir.path()).unwrap();
        let f = InstanceFile::write(dir.path(), "127.0.0.1:4321".parse().unwrap()).unwrap();
        let path = dir.path().join(INSTANCE_FILE);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let found = read_instance(dir.path()).unwrap();
        assert_eq!(found.info.url, "http://127.0.0.1:4321");
        assert_eq!(found.info.pid, std::process::id());
        assert_eq!(found.info.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(
            found.token.as_str(),
            UiSecret::load(dir.path()).unwrap().as_str()
        );
        f.remove();
        assert!(!path.exists());
        let e = read_instance(dir.path()).unwrap_err();
        assert!(matches!(e, InstanceError::NotRunning(_)), "{e}");
        assert!(e.to_string().contains("countersign serve"), "{e}");
    }

    #[test]
    fn one_lock_per_data_dir_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock_data_dir(dir.path()).unwrap();
        let _f = InstanceFile::write(dir.path(), "127.0.0.1:4321".parse().unwrap()).unwrap();
        let e = lock_data_dir(dir.path()).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, LockError::Held { .. }), "{text}");
        assert!(text.contains("another Countersign server"), "{text}");
        assert!(text.contains("http://127.0.0.1:4321"), "{text}");
        assert!(
            text.contains(&format!("process {}", std::process::id())),
            "{text}"
        );
        drop(held);
        lock_data_dir(dir.path()).unwrap();
    }

    #[test]
    fn the_lock_not_the_pid_says_whether_the_server_lives() {
        let dir = tempfile::tempdir().unwrap();
        UiSecret::load_or_create(dir.path()).unwrap();
        let held = lock_data_dir(dir.path()).unwrap();
        let _f = InstanceFile::write(dir.path(), "127.0.0.1:4321".parse().unwrap()).unwrap();
        assert_eq!(data_dir_in_use(dir.path()), Some(true));
        read_instance(dir.path()).unwrap();
        // The pid in the file (this process) lives on, as a reused pid
        // would; the free lock says the server is gone.
        drop(held);
        assert_eq!(data_dir_in_use(dir.path()), Some(false));
        let e = read_instance(dir.path()).unwrap_err();
        assert!(matches!(e, InstanceError::Stale { .. }), "{e}");
        // Asking did not keep the lock.
        lock_data_dir(dir.path()).unwrap();
    }

    #[test]
    fn a_server_waits_out_a_momentary_look_at_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        drop(lock_data_dir(dir.path()).unwrap());
        let look = std::fs::File::open(dir.path().join(LOCK_FILE)).unwrap();
        look.try_lock_shared().unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(60));
            drop(look);
        });
        lock_data_dir(dir.path()).unwrap();
        release.join().unwrap();
    }

    #[test]
    fn every_address_bind_is_reached_over_loopback() {
        let dir = tempfile::tempdir().unwrap();
        let _f = InstanceFile::write(dir.path(), "0.0.0.0:80".parse().unwrap()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(INSTANCE_FILE)).unwrap();
        let info: InstanceInfo = serde_json::from_str(&text).unwrap();
        assert_eq!(info.url, "http://127.0.0.1:80");
        assert_eq!(reachable("[::]:9".parse().unwrap()).to_string(), "[::1]:9");
    }

    #[test]
    fn another_process_file_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let f = InstanceFile::write(dir.path(), "127.0.0.1:1".parse().unwrap()).unwrap();
        let path = dir.path().join(INSTANCE_FILE);
        let other = InstanceInfo {
            url: "http://127.0.0.1:2".into(),
            pid: std::process::id().wrapping_add(1),
            version: "0".into(),
        };
        std::fs::write(&path, serde_json::to_vec(&other).unwrap()).unwrap();
        drop(f);
        assert!(path.exists());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn dead_process_is_reported_as_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let info = InstanceInfo {
            url: "http://127.0.0.1:1".into(),
            pid,
            version: "0".into(),
        };
        std::fs::write(
            dir.path().join(INSTANCE_FILE),
            serde_json::to_vec(&info).unwrap(),
        )
        .unwrap();
        let e = read_instance(dir.path()).unwrap_err();
        assert!(
            matches!(e, InstanceError::Stale { pid: p, .. } if p == pid),
            "{e}"
        );
    }
}
