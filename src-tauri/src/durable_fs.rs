//! New names on the disk: a file or folder created in a folder survives a
//! power loss only once that folder is synced, however well its own
//! contents were.

use std::path::Path;

/// Syncs the folder `made` was just made in (a file, or a folder), so that
/// its name is on the disk. A failure is logged, not returned: what was
/// made is in place, and only a power loss before the next sync could undo
/// it.
pub fn sync_parent(made: &Path) {
    let dir = match made.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(
            "cannot sync {} after making {}: {e}",
            dir.display(),
            made.display()
        );
    }
}

/// Creates folder `dir` and whichever of its parents are missing, and
/// syncs each new one's name into its parent (see [`sync_parent`]).
pub fn create_dir_all(dir: &Path) -> std::io::Result<()> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && !p.is_dir())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    for made in missing.iter().rev() {
        sync_parent(made);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_every_missing_level_and_leaves_an_existing_one_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("a/b/c");
        create_dir_all(&deep).unwrap();
        assert!(deep.is_dir());
        create_dir_all(&deep).unwrap();
        std::fs::write(tmp.path().join("file"), "x").unwrap();
        assert!(create_dir_all(&tmp.path().join("file/below")).is_err());
    }
}
