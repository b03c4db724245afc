//! Reading a zip package is bounded (issue 14 row 3): entries under `Files/` (images, other
//! artifacts) are skipped without being decompressed, an entry vnfm reads is refused past
//! `MAX_ZIP_ENTRY_BYTES` whatever the archive declares. Allocations are counted with
//! `stats_alloc` (this workspace forbids unsafe code).
#![cfg(feature = "zip")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::System;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use vnfm_core::package::fs::{self, MAX_ZIP_ENTRY_BYTES};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes obtained from the allocator since `region` began: new allocations plus growth by
/// reallocation (a `Vec` read to its end grows by `realloc`).
fn obtained(region: &Region<'_, System>) -> usize {
    let s = region.change();
    s.bytes_allocated + usize::try_from(s.bytes_reallocated).unwrap_or(0)
}

fn demo_files() -> BTreeMap<String, Vec<u8>> {
    let root = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/packages/demo-vnf"
    ));
    let mut out = BTreeMap::new();
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, root, out);
            } else {
                let rel = p
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    walk(&root, &root, &mut out);
    out
}

/// Writes the demo package plus `extra` (name, size in zero bytes), deflated.
fn zip_with(path: &Path, extra: &[(&str, usize)]) {
    let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    for (name, bytes) in demo_files() {
        w.start_file(name.as_str(), opts).unwrap();
        w.write_all(&bytes).unwrap();
    }
    let chunk = vec![0u8; 1 << 20];
    for (name, size) in extra {
        w.start_file(*name, opts).unwrap();
        let mut left = *size;
        while left > 0 {
            let n = left.min(chunk.len());
            w.write_all(&chunk[..n]).unwrap();
            left -= n;
        }
    }
    w.finish().unwrap();
}

#[test]
fn a_200_mb_image_under_files_is_never_decompressed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("with-image.zip");
    zip_with(&path, &[("Files/images/disk.img", 200 << 20)]);
    let region = Region::new(GLOBAL);
    let pkg = fs::load(&path).unwrap();
    let allocated = obtained(&region);
    assert_eq!(
        pkg.descriptor_id,
        fs::load(&PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/packages/demo-vnf"
        )))
        .unwrap()
        .descriptor_id
    );
    assert!(
        allocated < 32 << 20,
        "loading allocated {allocated} bytes: the 200 MB image was read"
    );
}

#[test]
fn an_entry_vnfm_reads_is_refused_past_the_limit_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big-template.zip");
    let size = usize::try_from(MAX_ZIP_ENTRY_BYTES).unwrap() + 1;
    zip_with(&path, &[("Definitions/huge.yaml", size)]);
    let region = Region::new(GLOBAL);
    let e = fs::load(&path).unwrap_err().to_string();
    assert!(
        e.contains("Definitions/huge.yaml") && e.contains("more than 16777216 bytes"),
        "{e}"
    );
    assert!(obtained(&region) < 80 << 20);
}
