//! The folder of VNF packages (`[packages] dir`): which of its entries are packages, what is
//! refused before anything is opened, and a stamp of each entry that changes when the
//! package changes.
//!
//! Every entry whose name does not start with `.` is a package: a folder, or a `.zip` /
//! `.csar` file. Hidden entries are ignored (write a package under a hidden name, then rename
//! it, to publish it whole). An entry that is a symbolic link is the operator's (a release
//! link, a Kubernetes ConfigMap or volume mount) and is followed to its folder or file.
//! Refused, without being opened or followed: special files (FIFOs, sockets, devices), and
//! symbolic links inside a package folder (outside its `Files/`, which is never read, but for
//! `Files/kubernetes/`: `Files`, `Files/kubernetes` and the entries in it are refused as links
//! too), and, in a package folder, a file above
//! [`MAX_ZIP_ENTRY_BYTES`] or files above [`MAX_ZIP_TOTAL_BYTES`] together (the bounds of a
//! zip's entries), and more than [`MAX_ZIP_ENTRIES`] entries.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use vnfm_core::package::fs::{MAX_ZIP_ENTRIES, MAX_ZIP_ENTRY_BYTES, MAX_ZIP_TOTAL_BYTES};
use vnfm_core::package::VnfPackage;

/// The top-level folder of a package that vnfm never reads (images and other artifacts).
const SKIPPED_DIR: &str = "Files";

/// A package folder nested deeper than this is refused.
const MAX_DEPTH: usize = 32;

/// What identifies the content of an entry without reading it: its kind, sizes and
/// modification times (every file and folder of a package folder, `Files/` left out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp(u64);

/// The entries of `dir` that may be packages (hidden names left out), sorted by name.
///
/// # Errors
/// The folder cannot be read.
pub(crate) fn entries(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        out.push(entry.path());
    }
    out.sort();
    Ok(out)
}

/// Looks at the entry `path` without opening any file: its stamp, or why it is refused.
///
/// # Errors
/// The reason, naming the path at fault and what was expected.
pub(crate) fn inspect(path: &Path) -> Result<Stamp, String> {
    let mut meta =
        std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if meta.file_type().is_symlink() {
        // The operator's link: followed, and its target is part of the stamp (a link moved to
        // another release is a change).
        std::fs::read_link(path).ok().hash(&mut h);
        meta = std::fs::metadata(path).map_err(|e| {
            format!(
                "{}: a symbolic link whose target cannot be read ({e}); expected a link to a \
                 package folder or a .zip / .csar file",
                path.display()
            )
        })?;
    }
    let ft = meta.file_type();
    if ft.is_dir() {
        let mut walk = Walk {
            hasher: &mut h,
            entries: 0,
            bytes: 0,
        };
        walk.dir(path, "", 0)?;
    } else if ft.is_file() {
        stamp_of(&mut h, "", &meta);
    } else {
        return Err(refused(path, &ft));
    }
    Ok(Stamp(h.finish()))
}

/// Loads the package at `path` once [`inspect`] accepts it.
///
/// # Errors
/// Why it is refused or does not load (the core's error, with its causes).
pub(crate) fn load(path: &Path) -> Result<(Stamp, VnfPackage), String> {
    let stamp = inspect(path)?;
    let pkg = vnfm_core::package::fs::load(path).map_err(|e| chain(&e))?;
    Ok((stamp, pkg))
}

/// `e` and its causes, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn refused(path: &Path, ft: &std::fs::FileType) -> String {
    let what = if ft.is_symlink() {
        "a symbolic link inside a package (not followed; only the package itself may be a link)"
    } else {
        "a special file (FIFO, socket or device; not opened)"
    };
    format!(
        "{}: {what}; expected a package folder or a .zip / .csar file, made of regular files \
         and folders",
        path.display()
    )
}

fn stamp_of(h: &mut impl Hasher, rel: &str, meta: &std::fs::Metadata) {
    rel.hash(h);
    meta.is_dir().hash(h);
    meta.len().hash(h);
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .hash(h);
}

struct Walk<'a, H> {
    hasher: &'a mut H,
    entries: usize,
    bytes: u64,
}

impl<H: Hasher> Walk<'_, H> {
    fn dir(&mut self, dir: &Path, rel: &str, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "{}: folders nested more than {MAX_DEPTH} deep",
                dir.display()
            ));
        }
        let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        stamp_of(self.hasher, rel, &meta);
        let read = |e: std::io::Error| format!("{}: {e}", dir.display());
        let mut list = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read)? {
            list.push(entry.map_err(read)?);
        }
        list.sort_by_key(|e| e.file_name());
        for entry in list {
            self.entries += 1;
            if self.entries > MAX_ZIP_ENTRIES {
                return Err(format!(
                    "{}: more than {MAX_ZIP_ENTRIES} entries in the package folder",
                    dir.display()
                ));
            }
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let meta =
                std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let ft = meta.file_type();
            if depth == 0 && rel == SKIPPED_DIR {
                if ft.is_symlink() {
                    return Err(refused(&path, &ft));
                }
                if ft.is_dir() {
                    self.manifests(&path.join("kubernetes"))?;
                }
                continue;
            }
            if ft.is_dir() {
                self.dir(&path, &rel, depth + 1)?;
            } else if ft.is_file() {
                if meta.len() > MAX_ZIP_ENTRY_BYTES {
                    return Err(format!(
                        "{}: {} bytes; expected at most {MAX_ZIP_ENTRY_BYTES} per file outside \
                         Files/",
                        path.display(),
                        meta.len()
                    ));
                }
                self.bytes += meta.len();
                if self.bytes > MAX_ZIP_TOTAL_BYTES {
                    return Err(format!(
                        "{}: the files outside Files/ add up to more than \
                         {MAX_ZIP_TOTAL_BYTES} bytes",
                        dir.display()
                    ));
                }
                stamp_of(self.hasher, &rel, &meta);
            } else {
                return Err(refused(&path, &ft));
            }
        }
        Ok(())
    }

    /// `Files/kubernetes/` (the part of `Files/` that is read): no link, its entries stamped.
    fn manifests(&mut self, dir: &Path) -> Result<(), String> {
        let meta = match std::fs::symlink_metadata(dir) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            return Err(refused(dir, &ft));
        }
        if !ft.is_dir() {
            return Ok(());
        }
        let read = |e: std::io::Error| format!("{}: {e}", dir.display());
        let mut list = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read)? {
            list.push(entry.map_err(read)?);
        }
        list.sort_by_key(|e| e.file_name());
        for entry in list {
            self.entries += 1;
            if self.entries > MAX_ZIP_ENTRIES {
                return Err(format!(
                    "{}: more than {MAX_ZIP_ENTRIES} entries in the package folder",
                    dir.display()
                ));
            }
            let path = entry.path();
            let meta =
                std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let ft = meta.file_type();
            if ft.is_symlink() {
                return Err(refused(&path, &ft));
            }
            let rel = format!("Files/kubernetes/{}", entry.file_name().to_string_lossy());
            stamp_of(self.hasher, &rel, &meta);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn stamps_change_with_the_content_and_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("pkg");
        std::fs::create_dir_all(pkg.join("Definitions")).unwrap();
        std::fs::create_dir_all(pkg.join("Files")).unwrap();
        std::fs::write(pkg.join("Definitions/a.yaml"), "a: 1\n").unwrap();
        std::fs::write(dir.path().join(".hidden.zip"), "x").unwrap();
        let first = inspect(&pkg).unwrap();
        assert_eq!(inspect(&pkg).unwrap(), first);
        // Files/ is not looked at.
        std::fs::write(pkg.join("Files/image.qcow2"), "big").unwrap();
        assert_eq!(inspect(&pkg).unwrap(), first);
        std::fs::write(pkg.join("Definitions/a.yaml"), "a: 12\n").unwrap();
        assert_ne!(inspect(&pkg).unwrap(), first);
        assert_eq!(entries(dir.path()).unwrap(), vec![pkg.clone()]);
        #[cfg(unix)]
        {
            // The operator's link to a package folder is followed.
            std::os::unix::fs::symlink(&pkg, dir.path().join("link")).unwrap();
            assert!(inspect(&dir.path().join("link")).is_ok());
            std::os::unix::fs::symlink("/etc/hostname", pkg.join("Definitions/b.yaml")).unwrap();
            let e = inspect(&pkg).unwrap_err();
            assert!(
                e.contains("Definitions/b.yaml: a symbolic link inside a package (not followed"),
                "{e}"
            );
            let e = inspect(&dir.path().join("link")).unwrap_err();
            assert!(
                e.contains("Definitions/b.yaml: a symbolic link inside"),
                "{e}"
            );
            std::fs::remove_file(pkg.join("Definitions/b.yaml")).unwrap();
            // Files/kubernetes is read: a link there is refused, elsewhere in Files/ not.
            std::os::unix::fs::symlink("/etc/hostname", pkg.join("Files/image.link")).unwrap();
            assert!(inspect(&pkg).is_ok());
            std::fs::create_dir_all(pkg.join("Files/kubernetes")).unwrap();
            std::os::unix::fs::symlink("/etc/hostname", pkg.join("Files/kubernetes/m.yaml"))
                .unwrap();
            let e = inspect(&pkg).unwrap_err();
            assert!(
                e.contains("Files/kubernetes/m.yaml: a symbolic link inside"),
                "{e}"
            );
        }
    }
}
