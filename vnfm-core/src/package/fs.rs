//! Reading a package from disk: the only IO of [`crate::package`].
//!
//! [`load`] takes a package directory or a `.zip` (or `.csar`) file (the latter needs the `zip`
//! feature of vnfm-core), collects its files and hands them to [`VnfPackage::from_files`]. The top-level
//! `Files/` folder (software images and other large artifacts, which the reader does not use)
//! is not read, but for the Kubernetes manifests of a CNF: the `.yaml` / `.yml` files directly
//! under `Files/kubernetes/` (see [`super::is_kubernetes_file`]), each at most
//! [`MAX_ZIP_ENTRY_BYTES`]. A zip whose entries all sit in one folder, with no `TOSCA-Metadata/` or
//! `Definitions/` at its root, is read from inside that folder.
//!
//! Symbolic links: the package path itself may be one (the operator's own link, e.g. a
//! release link or a Kubernetes volume mount) and is followed; every link inside a package
//! folder that vnfm would read through is refused, naming it: an entry outside `Files/`,
//! `Files/` itself, `Files/kubernetes/` and the entries in it (a link there could make vnfm
//! read, and apply to a cluster, a file of the host). Links elsewhere under `Files/` are not
//! looked at (that folder is not read).

use std::collections::BTreeMap;
use std::path::Path;

use super::VnfPackage;
use crate::error::{Error, Location};
use crate::Result;

/// The top-level folder that is not read.
const SKIPPED_DIR: &str = "Files";

/// Loads the package at `path`: a directory, or a `.zip` (or `.csar`) file.
///
/// # Errors
/// [`Error::Io`] when a file cannot be read (or the zip archive is corrupt);
/// [`Error::Invalid`] when `path` is neither a directory nor a `.zip` file, when it is a zip
/// and vnfm-core was built without the `zip` feature, when a zip entry has an unsafe path, when
/// a file or entry vnfm reads is larger than [`MAX_ZIP_ENTRY_BYTES`] or all of them than
/// [`MAX_ZIP_TOTAL_BYTES`], and
/// for every problem [`VnfPackage::from_files`] reports.
pub fn load(path: &Path) -> Result<VnfPackage> {
    let source = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    let files = if meta.is_dir() {
        let mut files = BTreeMap::new();
        read_dir(path, "", &mut files, &mut 0)?;
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

/// Reads the files below `dir` into `files`, keyed by `/`-joined paths below `prefix`: each
/// at most [`MAX_ZIP_ENTRY_BYTES`], all of them (`total` so far) at most
/// [`MAX_ZIP_TOTAL_BYTES`], as the entries of a zip; only regular files (and links to them).
fn read_dir(
    dir: &Path,
    prefix: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
    total: &mut u64,
) -> Result<()> {
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
        if ft.is_symlink() {
            return Err(link_inside(&path));
        }
        if ft.is_dir() {
            if rel == SKIPPED_DIR {
                read_manifests(&path.join("kubernetes"), files, total)?;
            } else {
                read_dir(&path, &rel, files, total)?;
            }
        } else if ft.is_file() {
            let bytes = crate::input::read_bytes(
                &path,
                MAX_ZIP_ENTRY_BYTES,
                &format!(
                    "a descriptor or template (artifacts belong under {SKIPPED_DIR}/, which is \
                     not read)"
                ),
            )?;
            *total += bytes.len() as u64;
            if *total > MAX_ZIP_TOTAL_BYTES {
                return Err(Error::invalid(
                    Location::file(&path),
                    format!(
                        "the files vnfm reads from this package are more than \
                         {MAX_ZIP_TOTAL_BYTES} bytes together; expected at most that"
                    ),
                ));
            }
            files.insert(rel, bytes);
        }
    }
    Ok(())
}

/// The error of a symbolic link inside a package.
fn link_inside(path: &Path) -> Error {
    Error::invalid(
        Location::file(path),
        "a symbolic link inside a package (not followed); expected regular files and folders \
         (only the package folder itself may be a link)",
    )
}

/// Reads the Kubernetes manifests of a package directory's `Files/kubernetes/` (absent: none):
/// regular files only, each at most [`MAX_ZIP_ENTRY_BYTES`], counted in the package's total.
fn read_manifests(
    dir: &Path,
    files: &mut BTreeMap<String, Vec<u8>>,
    total: &mut u64,
) -> Result<()> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(dir, e)),
    };
    if meta.file_type().is_symlink() {
        return Err(link_inside(dir));
    }
    if !meta.is_dir() {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| io_err(&path, e))?;
        if ft.is_symlink() {
            return Err(link_inside(&path));
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let rel = format!("{}/{name}", super::KUBERNETES_DIR);
        if !super::is_kubernetes_file(&rel) || !ft.is_file() {
            continue;
        }
        let bytes = crate::input::read_bytes(&path, MAX_ZIP_ENTRY_BYTES, "a Kubernetes manifest")?;
        *total += bytes.len() as u64;
        if *total > MAX_ZIP_TOTAL_BYTES {
            return Err(Error::invalid(
                Location::file(&path),
                format!(
                    "the files vnfm reads from this package are more than \
                     {MAX_ZIP_TOTAL_BYTES} bytes together; expected at most that"
                ),
            ));
        }
        files.insert(rel, bytes);
    }
    Ok(())
}

/// The most bytes one zip entry that vnfm reads may decompress to (a VNFD, a HOT template),
/// and the most bytes of one file vnfm reads from a package folder.
pub const MAX_ZIP_ENTRY_BYTES: u64 = 16 * 1024 * 1024;
/// The most bytes all the entries vnfm reads from one zip may decompress to, and all the files
/// it reads from one package folder.
pub const MAX_ZIP_TOTAL_BYTES: u64 = 64 * 1024 * 1024;
/// The most entries a zip package may have.
pub const MAX_ZIP_ENTRIES: usize = 10_000;

/// Reads a zip package: only the entries vnfm uses (everything outside `Files/`, which holds
/// images and other artifacts it never reads, is skipped without being decompressed), each
/// read at most to [`MAX_ZIP_ENTRY_BYTES`] and all together to [`MAX_ZIP_TOTAL_BYTES`]
/// whatever the archive declares; more than [`MAX_ZIP_ENTRIES`] entries are refused.
#[cfg(feature = "zip")]
fn read_zip(path: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    read_zip_from(path, std::io::BufReader::new(file))
}

/// Reads a zip package held in memory, as [`load`] reads a `.zip` file (same limits, same
/// errors); `source` names it in messages. Used by the fuzz targets of `fuzz/`.
///
/// # Errors
/// As [`load`] for a zip file.
#[cfg(feature = "zip")]
pub fn load_zip_bytes(source: &str, bytes: &[u8]) -> Result<VnfPackage> {
    let files = read_zip_from(Path::new(source), std::io::Cursor::new(bytes))?;
    VnfPackage::from_files(source, files)
}

/// [`read_zip`] over any seekable reader; `path` names the archive in errors.
#[cfg(feature = "zip")]
fn read_zip_from<R: std::io::Read + std::io::Seek>(
    path: &Path,
    reader: R,
) -> Result<BTreeMap<String, Vec<u8>>> {
    use std::io::Read;

    let zip_err = |e: zip::result::ZipError| io_err(path, std::io::Error::other(e));
    let mut archive = zip::ZipArchive::new(reader).map_err(zip_err)?;
    if archive.len() > MAX_ZIP_ENTRIES {
        return Err(Error::invalid(
            Location::file(path),
            format!(
                "the archive has {} entries; expected at most {MAX_ZIP_ENTRIES}",
                archive.len()
            ),
        ));
    }
    // The names first (no data read), to know the wrapping folder and what to skip.
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..archive.len() {
        let entry = archive.by_index_raw(i).map_err(zip_err)?;
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
        names.insert(rel.join("/"), i);
    }
    let names = strip_single_root(names);
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    for (rel, i) in names {
        if rel.starts_with(&format!("{SKIPPED_DIR}/")) && !super::is_kubernetes_file(&rel) {
            continue;
        }
        let entry = archive.by_index(i).map_err(zip_err)?;
        let mut bytes = Vec::new();
        entry
            .take(MAX_ZIP_ENTRY_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| io_err(path, e))?;
        let n = bytes.len() as u64;
        if n > MAX_ZIP_ENTRY_BYTES {
            return Err(Error::invalid(
                Location::file(path).with_field(rel.as_str()),
                format!(
                    "zip entry `{rel}` decompresses to more than {MAX_ZIP_ENTRY_BYTES} bytes; \
                     expected a descriptor or template of at most that (artifacts belong under \
                     {SKIPPED_DIR}/, which is not read)"
                ),
            ));
        }
        total += n;
        if total > MAX_ZIP_TOTAL_BYTES {
            return Err(Error::invalid(
                Location::file(path),
                format!(
                    "the entries vnfm reads decompress to more than {MAX_ZIP_TOTAL_BYTES} bytes \
                     together; expected at most that"
                ),
            ));
        }
        files.insert(rel, bytes);
    }
    Ok(files)
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
fn strip_single_root<T>(files: BTreeMap<String, T>) -> BTreeMap<String, T> {
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

    use crate::id::{FlavorId, VduId};
    use crate::package::{RuleKind, RuleScope};
    use crate::vectors::shared_vectors;

    fn demo_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/demo-vnf")
    }

    fn vdu(s: &str) -> VduId {
        VduId::new(s)
    }

    #[test]
    fn the_demo_package_loads() {
        let p = load(&demo_dir()).unwrap();
        assert_eq!(p.entry_definitions, "Definitions/demo_top.vnfd.yaml");
        assert_eq!(p.vnf_type, "vnfm.demo.VNF");
        assert_eq!(p.descriptor_id, "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d");
        assert_eq!(p.vnfm_info, vec!["vnfm"]);
        let f = p.flavour("default").unwrap();
        assert_eq!(p.flavours.len(), 1);

        let v1 = f.vdu(&vdu("VDU1")).unwrap();
        assert_eq!(v1.flavor, Some(FlavorId::new("m1.small")));
        assert_eq!((v1.min_instances, v1.max_instances), (1, 4));
        assert_eq!(v1.storages, vec!["VDU1-BootVolume"]);
        assert_eq!(v1.image.as_deref(), Some("demo-frontend-image"));
        assert_eq!(f.storages["VDU1-BootVolume"].size_gib, 2);
        assert_eq!(f.initial_instances(&vdu("VDU1")), Some(2));
        let v2 = f.vdu(&vdu("VDU2")).unwrap();
        assert_eq!(v2.flavor, Some(FlavorId::new("m1.medium")));
        assert_eq!((v2.min_instances, v2.max_instances), (1, 2));
        assert_eq!(
            v2.virtual_compute.as_ref().unwrap().virtual_mem_size_mib,
            4096
        );
        assert_eq!(f.initial_instances(&vdu("VDU2")), Some(1));

        let zone: Vec<_> = f
            .rules
            .iter()
            .filter(|r| r.scope == RuleScope::Zone)
            .collect();
        assert_eq!(zone.len(), 1);
        assert_eq!(zone[0].kind, RuleKind::AntiAffinity);
        assert_eq!(zone[0].vdus, vec![vdu("VDU1"), vdu("VDU2")]);
        let host: Vec<_> = f.rules_for(&vdu("VDU1"));
        assert_eq!(host.len(), 2);
        assert_eq!(host[1].scope, RuleScope::NfviNode);
        assert_eq!(host[1].targets, vec!["VDU1"]);
        assert_eq!(f.rules_for(&vdu("VDU2")).len(), 1);

        assert_eq!(f.scaling_aspects["VDU1_scale"].max_scale_level, 2);
        assert_eq!(f.scaling_aspects["VDU2_scale"].max_scale_level, 1);
        assert_eq!(f.aspect_delta("VDU1_scale", &vdu("VDU1")), Some(1));
        assert_eq!(f.aspect_delta("VDU2_scale", &vdu("VDU2")), Some(1));
        let levels = f.instantiation_levels.as_ref().unwrap();
        assert_eq!(levels.default_level.as_deref(), Some("small"));
        assert!(f.lcm_operations.contains_key("instantiate_end"));

        let hot = p.base_hot("default").unwrap();
        assert!(hot.template.contains("type: VDU1.yaml"));
        assert!(hot
            .template
            .contains("[ nfv, VDU, VDU1, locationConstraints ]"));
        assert!(hot.template.contains("OS::Nova::ServerGroup"));
        for key in [
            "VDU1.yaml",
            "VDU2.yaml",
            "nested/VDU1.yaml",
            "nested/VDU2.yaml",
        ] {
            assert!(hot.files.contains_key(key), "{key}");
        }
        assert!(hot.files["VDU1.yaml"].contains("OS::Cinder::Volume"));
        assert!(hot.files["VDU2.yaml"].contains("allocate_network: none"));
    }

    /// The demo package's files as the CLI embeds them (no disk access by the reader).
    #[test]
    fn the_demo_package_reads_from_memory() {
        let mut files = BTreeMap::new();
        read_dir(&demo_dir(), "", &mut files, &mut 0).unwrap();
        let p = VnfPackage::from_files("<built-in demo-vnf>", files).unwrap();
        assert_eq!(p.source, "<built-in demo-vnf>");
        assert!(p.flavour("default").is_some());
    }

    fn copy_vector(vectors: &Path, from: &str, root: &Path, to: &str) {
        let dest = root.join(to);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(vectors.join(from), dest).unwrap();
    }

    const SAMPLE6_TYPES: &str = r#"
tosca_definitions_version: tosca_simple_yaml_1_2
imports:
  - etsi_nfv_sol001_common_types.yaml
  - etsi_nfv_sol001_vnfd_types.yaml
node_types:
  company.provider.VNF:
    derived_from: tosca.nodes.nfv.VNF
    properties:
      descriptor_id:
        type: string
        constraints: [ valid_values: [ 0f3a9c5e-test-4c1e-9d2b-sample6 ] ]
        default: 0f3a9c5e-test-4c1e-9d2b-sample6
      provider:
        type: string
        default: Company
      flavour_id:
        type: string
        constraints: [ valid_values: [ simple ] ]
        default: simple
"#;

    #[test]
    fn tacker_az_reselection_sample_loads() {
        let Some(vectors) = shared_vectors(env!("CARGO_MANIFEST_DIR"), "tacker sample6 package")
        else {
            return;
        };
        let v = vectors.join("tacker/az_reselection");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        copy_vector(
            &v,
            "vnfd/v2_sample6_df_simple.yaml",
            root,
            "Definitions/v2_sample6_df_simple.yaml",
        );
        copy_vector(&v, "hot/sample6.yaml", root, "BaseHOT/simple/sample6.yaml");
        copy_vector(
            &v,
            "hot/nested/VDU1.yaml",
            root,
            "BaseHOT/simple/nested/VDU1.yaml",
        );
        std::fs::write(
            root.join("Definitions/v2_sample6_types.yaml"),
            SAMPLE6_TYPES,
        )
        .unwrap();

        let p = load(root).unwrap();
        assert_eq!(p.entry_definitions, "Definitions/v2_sample6_df_simple.yaml");
        assert_eq!(p.descriptor_id, "0f3a9c5e-test-4c1e-9d2b-sample6");
        assert_eq!(p.provider.as_deref(), Some("Company"));
        let f = p.flavour("simple").unwrap();
        let v1 = f.vdu(&vdu("VDU1")).unwrap();
        assert_eq!(v1.flavor, Some(FlavorId::new("sample4G")));
        assert_eq!((v1.min_instances, v1.max_instances), (1, 5));
        let vc = v1.virtual_compute.as_ref().unwrap();
        assert_eq!((vc.num_virtual_cpu, vc.virtual_mem_size_mib), (2, 4096));
        assert_eq!(vc.virtual_local_storage_gib, vec![4]);
        assert_eq!(v1.storages, vec!["VDU1-VirtualStorage"]);
        assert_eq!(f.storages["VDU1-VirtualStorage"].size_gib, 1);
        assert_eq!(v1.image.as_deref(), Some("VDU1-VirtualStorage-image"));

        let rules = f.rules_for(&vdu("VDU1"));
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].kind, RuleKind::AntiAffinity);
        assert_eq!(rules[0].scope, RuleScope::NfviNode);
        assert_eq!(rules[0].targets, vec!["affinityOrAntiAffinityGroup1"]);
        assert_eq!(rules[0].vdus, vec![vdu("VDU1")]);

        assert_eq!(f.scaling_aspects["VDU1_scale"].max_scale_level, 4);
        assert_eq!(f.aspect_delta("VDU1_scale", &vdu("VDU1")), Some(1));
        assert_eq!(f.initial_instances(&vdu("VDU1")), Some(1));
        assert_eq!(f.connection_points.len(), 3);
        assert_eq!(f.virtual_links.len(), 2);
        assert_eq!(f.external_links["virtual_link_external1_1"], "VDU1_CP1");
        assert_eq!(f.lcm_operations.len(), 12);
        assert_eq!(
            f.lcm_operations["heal_end"].artifact_file.as_deref(),
            Some("../Scripts/sample_script.py")
        );

        let hot = p.base_hot("simple").unwrap();
        assert!(hot.template.contains("nfvi_node_affinity"));
        assert!(hot.files["VDU1.yaml"].contains("VDU1-VirtualStorage"));
        assert_eq!(hot.files["VDU1.yaml"], hot.files["nested/VDU1.yaml"]);
    }

    #[test]
    fn tacker_pod_affinity_sample_loads() {
        let Some(vectors) =
            shared_vectors(env!("CARGO_MANIFEST_DIR"), "tacker podaffinity package")
        else {
            return;
        };
        let v = vectors.join("tacker/pod_affinity");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        copy_vector(
            &v,
            "vnfd/sample_kubernetes_df_podaffinity.yaml",
            root,
            "Definitions/sample_kubernetes_df_podaffinity.yaml",
        );
        copy_vector(
            &v,
            "hot/podaffinity_hot_top.yaml",
            root,
            "BaseHOT/podaffinity/podaffinity_hot_top.yaml",
        );
        for n in [
            "podaffinity_nested_master.yaml",
            "podaffinity_nested_worker.yaml",
        ] {
            copy_vector(
                &v,
                &format!("hot/nested/{n}"),
                root,
                &format!("BaseHOT/podaffinity/nested/{n}"),
            );
        }
        std::fs::write(
            root.join("Definitions/sample_kubernetes_types.yaml"),
            SAMPLE6_TYPES.replace("sample6", "k8s"),
        )
        .unwrap();

        let p = load(root).unwrap();
        assert_eq!(p.descriptor_id, "0f3a9c5e-test-4c1e-9d2b-k8s");
        let f = p.flavour("podaffinity").unwrap();
        assert_eq!(f.description.as_deref(), Some("A complex flavour"));
        let master = f.vdu(&vdu("masterNode")).unwrap();
        assert_eq!((master.min_instances, master.max_instances), (3, 5));
        assert_eq!(master.flavor, Some(FlavorId::new("m1.medium")));
        assert_eq!(
            master.image.as_deref(),
            Some("Image for masterNode HA kubernetes")
        );
        let vc = master.virtual_compute.as_ref().unwrap();
        assert_eq!(
            (
                vc.virtual_mem_size_mib,
                vc.virtual_local_storage_gib.as_slice()
            ),
            (4096, &[45][..])
        );
        let worker = f.vdu(&vdu("workerNode")).unwrap();
        assert_eq!((worker.min_instances, worker.max_instances), (2, 4));
        // no placement policy in this VNFD: the anti-affinity lives in the HOT server groups
        assert!(f.rules.is_empty());
        assert_eq!(f.initial_instances(&vdu("masterNode")), Some(3));
        assert_eq!(f.initial_instances(&vdu("workerNode")), Some(2));
        assert_eq!(
            f.aspect_delta("worker_instance", &vdu("workerNode")),
            Some(1)
        );
        assert_eq!(f.aspect_delta("worker_instance", &vdu("masterNode")), None);
        assert_eq!(f.scaling_aspects["master_instance"].max_scale_level, 2);
        assert_eq!(f.vdu_instantiation_levels.len(), 2);
        assert_eq!(f.lcm_operations.len(), 6);

        let hot = p.base_hot("podaffinity").unwrap();
        assert!(hot.template.contains("srvgroup_worker"));
        assert!(hot.files.contains_key("podaffinity_nested_worker.yaml"));
        assert!(hot
            .files
            .contains_key("nested/podaffinity_nested_master.yaml"));
    }

    #[cfg(feature = "zip")]
    fn write_zip(path: &Path, entries: &[(String, Vec<u8>)]) {
        use std::io::Write;
        let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        for (name, bytes) in entries {
            w.start_file(name.as_str(), zip::write::SimpleFileOptions::default())
                .unwrap();
            w.write_all(bytes).unwrap();
        }
        w.finish().unwrap();
    }

    #[cfg(feature = "zip")]
    #[test]
    fn zip_round_trip() {
        let mut files = BTreeMap::new();
        read_dir(&demo_dir(), "", &mut files, &mut 0).unwrap();
        let dir = tempfile::tempdir().unwrap();

        // at the root, with an image under Files/ that is not read
        let mut entries: Vec<(String, Vec<u8>)> = files.clone().into_iter().collect();
        entries.push(("Files/images/big.img".into(), vec![0; 64]));
        let zip_path = dir.path().join("demo-vnf.zip");
        write_zip(&zip_path, &entries);
        let from_zip = load(&zip_path).unwrap();
        let mut from_dir = load(&demo_dir()).unwrap();
        assert_eq!(from_zip.source, zip_path.display().to_string());
        from_dir.source = from_zip.source.clone();
        assert_eq!(from_zip, from_dir);

        // wrapped in one folder
        let wrapped: Vec<(String, Vec<u8>)> = files
            .iter()
            .map(|(p, b)| (format!("demo-vnf/{p}"), b.clone()))
            .collect();
        let wrapped_path = dir.path().join("wrapped.zip");
        write_zip(&wrapped_path, &wrapped);
        let p = load(&wrapped_path).unwrap();
        assert_eq!(p.entry_definitions, "Definitions/demo_top.vnfd.yaml");

        // an entry that escapes the archive
        let evil_path = dir.path().join("evil.zip");
        write_zip(&evil_path, &[("../evil.yaml".to_owned(), b"x".to_vec())]);
        let e = load(&evil_path).unwrap_err().to_string();
        assert!(
            e.contains("zip entry `../evil.yaml` has an unsafe path"),
            "{e}"
        );

        // not a zip archive at all
        let bad = dir.path().join("bad.zip");
        std::fs::write(&bad, b"not a zip").unwrap();
        let e = load(&bad).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
        assert!(std::error::Error::source(&e).is_some());
    }

    fn cnf_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/cnf-podaffinity")
    }

    #[test]
    fn a_cnf_package_reads_files_kubernetes_and_nothing_else_of_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = BTreeMap::new();
        read_dir(&cnf_dir(), "", &mut files, &mut 0).unwrap();
        for (rel, bytes) in &files {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        // not manifests: a subfolder, another extension, another folder of Files/
        for rel in [
            "Files/kubernetes/helm/values.yaml",
            "Files/kubernetes/notes.txt",
            "Files/images/pause.yaml",
        ] {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"x: 1").unwrap();
        }
        let p = load(dir.path()).unwrap();
        assert_eq!(
            p.kubernetes.keys().collect::<Vec<_>>(),
            ["Files/kubernetes/deployment.yaml"]
        );
        assert!(p.is_cnf("podaffinity"));
        assert!(p.kubernetes["Files/kubernetes/deployment.yaml"].contains("kind: Deployment"));
    }

    #[cfg(feature = "zip")]
    #[test]
    fn a_zipped_cnf_package_reads_its_manifests() {
        let mut files = BTreeMap::new();
        read_dir(&cnf_dir(), "", &mut files, &mut 0).unwrap();
        let mut entries: Vec<(String, Vec<u8>)> = files.into_iter().collect();
        entries.push(("Files/images/big.img".into(), vec![0; 64]));
        entries.push(("Files/kubernetes/sub/skip.yaml".into(), b"x: 1".to_vec()));
        let dir = tempfile::tempdir().unwrap();
        let zip_path = dir.path().join("cnf.zip");
        write_zip(&zip_path, &entries);
        let from_zip = load(&zip_path).unwrap();
        let mut from_dir = load(&cnf_dir()).unwrap();
        from_dir.source = from_zip.source.clone();
        assert_eq!(from_zip, from_dir);
        assert_eq!(from_zip.kubernetes.len(), 1);
    }
}
