//! The files of a served package, and a zip of them that is the same bytes every time
//! (`vnfm serve`'s SOL005 package endpoints: `package_content`, `vnfd`).
//!
//! A package is a folder of `[packages] dir` (every regular file in it, `Files/` included; a
//! symbolic link inside is refused, not followed), a `.zip` / `.csar` file (its entries), or
//! the built-in demo package (its embedded files). [`stable_zip`] writes the files in the
//! order of their paths, each stored (not compressed) with the same time (1980-01-01 00:00,
//! the earliest a zip can say) and the same permissions (`0644`): the bytes depend on the
//! paths and contents alone, not on the files' times, modes or the order a folder lists them.
//!
//! Bounded: at most [`MAX_ZIP_ENTRIES`] files, [`MAX_CONTENT_BYTES`] bytes together.

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::path::Path;

use vnfm_core::package::fs::MAX_ZIP_ENTRIES;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

/// The most bytes of a package's files together that are zipped (in memory) or read.
pub(crate) const MAX_CONTENT_BYTES: u64 = 128 * 1024 * 1024;

/// A package's files: path relative to its root (`/`-separated) → content.
pub(crate) type Files = BTreeMap<String, Vec<u8>>;

/// The top-level folders of a package that hold its VNFD (SOL004): `TOSCA-Metadata/` and
/// `Definitions/`.
const VNFD_DIRS: [&str; 2] = ["TOSCA-Metadata/", "Definitions/"];

/// Every file of the package folder `root`.
///
/// # Errors
/// Why it cannot be read or is refused (a link, a special file, over a bound), naming the
/// path relative to the package.
pub(crate) fn folder_files(root: &Path) -> Result<Files, String> {
    let mut out = Files::new();
    let mut total = 0u64;
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let read = |e: std::io::Error| format!("{}: {e}", display(&rel));
        for entry in std::fs::read_dir(&dir).map_err(read)? {
            let entry = entry.map_err(read)?;
            let name = entry
                .file_name()
                .into_string()
                .map_err(|n| format!("{}/{n:?}: a name that is not UTF-8", display(&rel)))?;
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ft = entry.file_type().map_err(read)?;
            if ft.is_dir() {
                stack.push((entry.path(), path));
            } else if ft.is_file() {
                let bytes = std::fs::read(entry.path()).map_err(|e| format!("{path}: {e}"))?;
                total += bytes.len() as u64;
                check_bounds(out.len() + 1, total)?;
                out.insert(path, bytes);
            } else {
                return Err(format!(
                    "{path}: a symbolic link or special file, which is not followed; expected \
                     regular files and folders"
                ));
            }
        }
    }
    Ok(out)
}

fn display(rel: &str) -> &str {
    if rel.is_empty() {
        "."
    } else {
        rel
    }
}

fn check_bounds(entries: usize, bytes: u64) -> Result<(), String> {
    if entries > MAX_ZIP_ENTRIES {
        return Err(format!(
            "more than {MAX_ZIP_ENTRIES} files; at most {MAX_ZIP_ENTRIES} are served"
        ));
    }
    if bytes > MAX_CONTENT_BYTES {
        return Err(format!(
            "the files add up to more than {MAX_CONTENT_BYTES} bytes; at most that is served"
        ));
    }
    Ok(())
}

/// The files of the zip package `bytes`, read from inside its one top folder when it has no
/// `TOSCA-Metadata/` or `Definitions/` at its root (as the package reader does).
///
/// # Errors
/// A corrupt zip, or one over a bound.
pub(crate) fn zip_files(bytes: &[u8]) -> Result<Files, String> {
    let mut archive = ZipArchive::new(Cursor::new(bytes)).map_err(|e| format!("{e}"))?;
    check_bounds(archive.len(), 0)?;
    let mut out = Files::new();
    let mut total = 0u64;
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).map_err(|e| format!("{e}"))?;
        if f.is_dir() {
            continue;
        }
        let name = f
            .enclosed_name()
            .and_then(|p| p.to_str().map(|s| s.replace('\\', "/")))
            .ok_or_else(|| format!("entry {:?}: an unsafe path", f.name()))?;
        let mut content = Vec::new();
        let room = MAX_CONTENT_BYTES.saturating_sub(total) + 1;
        (&mut f)
            .take(room)
            .read_to_end(&mut content)
            .map_err(|e| format!("{name}: {e}"))?;
        total += content.len() as u64;
        check_bounds(out.len() + 1, total)?;
        out.insert(name, content);
    }
    Ok(strip_root(out))
}

/// `files` from inside their one common top folder, when none is at a VNFD folder already.
fn strip_root(files: Files) -> Files {
    let at_root = files
        .keys()
        .any(|p| VNFD_DIRS.iter().any(|d| p.starts_with(d)));
    let first = files
        .keys()
        .next()
        .and_then(|p| p.split_once('/'))
        .map(|(top, _)| format!("{top}/"));
    match first {
        Some(top) if !at_root && files.keys().all(|p| p.starts_with(&top)) => files
            .into_iter()
            .map(|(p, b)| (p[top.len()..].to_owned(), b))
            .collect(),
        _ => files,
    }
}

/// The files that make up the VNFD: those under `TOSCA-Metadata/` and `Definitions/`.
pub(crate) fn vnfd_files(files: &Files) -> Files {
    files
        .iter()
        .filter(|(p, _)| VNFD_DIRS.iter().any(|d| p.starts_with(d)))
        .map(|(p, b)| (p.clone(), b.clone()))
        .collect()
}

/// The VNFD as one file, when it is one: the only file of `Definitions/`, a YAML file.
pub(crate) fn single_vnfd_file(files: &Files) -> Option<(&str, &[u8])> {
    let mut defs = files.iter().filter(|(p, _)| p.starts_with("Definitions/"));
    let (path, bytes) = defs.next()?;
    let yaml = path.ends_with(".yaml") || path.ends_with(".yml");
    (defs.next().is_none() && yaml).then_some((path.as_str(), bytes.as_slice()))
}

/// A zip of `files` in path order, stored, each dated 1980-01-01 00:00 with mode `0644`: the
/// same bytes for the same paths and contents.
///
/// # Errors
/// Only if the zip writer fails (it writes to memory).
pub(crate) fn stable_zip(files: &Files) -> Result<Vec<u8>, String> {
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Stored)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    let mut w = ZipWriter::new(Cursor::new(Vec::new()));
    for (path, bytes) in files {
        w.start_file(path.as_str(), options)
            .map_err(|e| format!("{path}: {e}"))?;
        w.write_all(bytes).map_err(|e| format!("{path}: {e}"))?;
    }
    w.finish()
        .map(Cursor::into_inner)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Files {
        list.iter()
            .map(|(p, b)| ((*p).to_owned(), b.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn the_zip_is_the_same_bytes_and_reads_back() {
        let f = files(&[
            ("TOSCA-Metadata/TOSCA.meta", "meta"),
            ("Definitions/top.vnfd.yaml", "top"),
            ("BaseHOT/default/x.yaml", "hot"),
        ]);
        let a = stable_zip(&f).unwrap();
        assert_eq!(a, stable_zip(&f).unwrap());
        assert_eq!(zip_files(&a).unwrap(), f);
        assert_eq!(vnfd_files(&f).len(), 2);
        assert_eq!(
            single_vnfd_file(&f),
            Some(("Definitions/top.vnfd.yaml", b"top".as_slice()))
        );
        let two = files(&[("Definitions/a.yaml", "a"), ("Definitions/b.yaml", "b")]);
        assert_eq!(single_vnfd_file(&two), None);
        // A package zipped inside one folder is read from inside it.
        let nested = files(&[
            ("pkg/Definitions/a.yaml", "a"),
            ("pkg/TOSCA-Metadata/T", "t"),
        ]);
        let read = zip_files(&stable_zip(&nested).unwrap()).unwrap();
        assert!(read.contains_key("Definitions/a.yaml"), "{read:?}");
    }
}
