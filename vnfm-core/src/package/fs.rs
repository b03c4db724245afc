//! Reading a package from disk: the only IO of [`crate::package`].
//!
//! [`load`] takes a package directory or a `.zip` (or `.csar`) file (the latter needs the `zip`
//! feature of vnfm-core), collects its files and hands them to [`VnfPackage::from_files`]. The top-level
//! `Files/` folder (software images and other large artifacts, which the reader does not use)
//! is not read. A zip whose entries all sit in one folder, with no `TOSCA-Metadata/` or
//! `Definitions/` at its root, is read from inside that folder.

use std::collections::BTreeMap;
use std::path::Path;

use super::VnfPackage;
use crate::error::{Error, Location};
use crate::Result;

/// The top-level folder that is not read.
const SKIPPED_DIR: &str = "Files";

/// Loads the package at `path`: a directory, or a `.zip` file.
///
/// # Errors
/// [`Error::Io`] when a file cannot be read (or the zip archive is corrupt);
/// [`Error::Invalid`] when `path` is neither a directory nor a `.zip` file, when it is a zip
/// and vnfm-core was built without the `zip` feature, when a zip entry has an unsafe path, and
/// for every problem [`VnfPackage::from_files`] reports.
pub fn load(path: &Path) -> Result<VnfPackage> {
    let source = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    let files = if meta.is_dir() {
        let mut files = BTreeMap::new();
        read_dir(path, "", &mut files)?;
        files
    } else if is_zip(path) {
        read_zip(path)?
    } else {
        return Err(Error::invalid(
            Location::file(path),
            "not a VNF package: expected a package directory or a .zip file",
        ));
    };
    VnfPackage::from_files(&source, files)
}

fn is_zip(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("zip") || e.eq_ignore_ascii_case("csar"))
}

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// Reads the files below `dir` into `files`, keyed by `/`-joined paths below `prefix`.
fn read_dir(dir: &Path, prefix: &str, files: &mut BTreeMap<String, Vec<u8>>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    let mut list = Vec::new();
    for entry in entries {
        list.push(entry.map_err(|e| io_err(dir, e))?);
    }
    list.sort_by_key(|e| e.file_name());
    for entry in list {
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            return Err(Error::invalid(
                Location::file(&path),
                "file name is not UTF-8: package paths must be text",
            ));
        };
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let ft = entry.file_type().map_err(|e| io_err(&path, e))?;
        if ft.is_dir() {
            if rel != SKIPPED_DIR {
                read_dir(&path, &rel, files)?;
            }
        } else if ft.is_file() || (ft.is_symlink() && path.is_file()) {
            let bytes = std::fs::read(&path).map_err(|e| io_err(&path, e))?;
            files.insert(rel, bytes);
        }
        // Symbolic links to folders are not followed (no cycles).
    }
    Ok(())
}

#[cfg(feature = "zip")]
fn read_zip(path: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    use std::io::Read;

    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let zip_err = |e: zip::result::ZipError| io_err(path, std::io::Error::other(e));
    let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(zip_err)?;
    let mut files = BTreeMap::new();
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(zip_err)?;
        if entry.is_dir() {
            continue;
        }
        let Some(name) = entry.enclosed_name() else {
            return Err(Error::invalid(
                Location::file(path),
                format!(
                    "zip entry `{}` has an unsafe path (absolute or leaving the archive)",
                    entry.name()
                ),
            ));
        };
        let rel: Vec<String> = name
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let rel = rel.join("/");
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(|e| io_err(path, e))?;
        files.insert(rel, bytes);
    }
    let files = strip_single_root(files);
    Ok(files
        .into_iter()
        .filter(|(p, _)| !p.starts_with(&format!("{SKIPPED_DIR}/")))
        .collect())
}

#[cfg(not(feature = "zip"))]
fn read_zip(path: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    Err(Error::invalid(
        Location::file(path),
        "reading zip packages needs the `zip` feature of vnfm-core (this build has it off); \
         unpack the archive and load the directory instead",
    ))
}

/// Removes a folder that wraps every entry, when the root has no package layout of its own.
#[cfg_attr(not(feature = "zip"), allow(dead_code))]
fn strip_single_root(files: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    let has_layout = files
        .keys()
        .any(|p| p.starts_with("TOSCA-Metadata/") || p.starts_with("Definitions/"));
    let first = |p: &str| p.split_once('/').map(|(d, _)| d.to_owned());
    let root = files.keys().next().and_then(|p| first(p));
    match root {
        Some(root) if !has_layout && files.keys().all(|p| first(p).as_ref() == Some(&root)) => {
            files
                .into_iter()
                .map(|(p, b)| (p[root.len() + 1..].to_owned(), b))
                .collect()
        }
        _ => files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_wrapping_folder_is_stripped() {
        let files: BTreeMap<String, Vec<u8>> = [
            ("pkg/Definitions/a.yaml".to_owned(), vec![]),
            ("pkg/TOSCA-Metadata/TOSCA.meta".to_owned(), vec![]),
        ]
        .into();
        let out = strip_single_root(files);
        assert!(out.contains_key("Definitions/a.yaml"));
        let files: BTreeMap<String, Vec<u8>> = [
            ("Definitions/a.yaml".to_owned(), vec![]),
            ("Definitions/b.yaml".to_owned(), vec![]),
        ]
        .into();
        assert!(strip_single_root(files).contains_key("Definitions/a.yaml"));
    }

    #[test]
    fn neither_directory_nor_zip_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pkg.tar");
        std::fs::write(&p, b"x").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(
            e.contains("expected a package directory or a .zip file"),
            "{e}"
        );
        let e = load(&dir.path().join("absent")).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
    }

    #[cfg(not(feature = "zip"))]
    #[test]
    fn zip_without_the_feature_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pkg.zip");
        std::fs::write(&p, b"PK").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("needs the `zip` feature"), "{e}");
    }
}
