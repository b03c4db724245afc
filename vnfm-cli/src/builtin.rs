//! The demo package and cloud built into the binary, so `vnfm demo` needs no file. The same
//! files are under `examples/` for reading and changing.

use std::collections::BTreeMap;

use vnfm_core::cloud::CloudFile;
use vnfm_core::package::VnfPackage;

/// The name the built-in cloud has in messages.
pub const DEMO_CLOUD_NAME: &str = "<built-in demo cloud: examples/clouds/demo.yaml>";
/// The name the built-in package has in messages.
pub const DEMO_PACKAGE_NAME: &str = "<built-in demo package: examples/packages/demo-vnf>";

const DEMO_CLOUD: &str = include_str!("../../examples/clouds/demo.yaml");

macro_rules! package_files {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_bytes!(concat!("../../examples/packages/demo-vnf/", $path)).as_slice())),*]
    };
}

const DEMO_PACKAGE: &[(&str, &[u8])] = package_files![
    "TOSCA-Metadata/TOSCA.meta",
    "Definitions/demo_top.vnfd.yaml",
    "Definitions/demo_types.yaml",
    "Definitions/demo_df_default.yaml",
    "BaseHOT/default/demo.yaml",
    "BaseHOT/default/nested/VDU1.yaml",
    "BaseHOT/default/nested/VDU2.yaml",
];

/// The name the built-in cluster cloud has in messages.
pub const CLUSTER_CLOUD_NAME: &str = "<built-in cluster cloud: examples/clouds/cluster.yaml>";
/// The name the built-in cluster VNF package has in messages.
pub const CLUSTER_PACKAGE_NAME: &str =
    "<built-in cluster VNF package: examples/packages/k8s-cluster-vnf>";
/// The name the built-in CNF package has in messages.
pub const CNF_PACKAGE_NAME: &str = "<built-in CNF package: examples/packages/cnf-podaffinity>";

const CLUSTER_CLOUD: &str = include_str!("../../examples/clouds/cluster.yaml");

macro_rules! files_of {
    ($dir:literal: $($path:literal),* $(,)?) => {
        &[$(($path, include_bytes!(concat!("../../examples/packages/", $dir, "/", $path)).as_slice())),*]
    };
}

const CLUSTER_PACKAGE: &[(&str, &[u8])] = files_of!["k8s-cluster-vnf":
    "TOSCA-Metadata/TOSCA.meta",
    "Definitions/k8s_cluster_top.vnfd.yaml",
    "Definitions/k8s_cluster_types.yaml",
    "Definitions/k8s_cluster_df_default.yaml",
    "BaseHOT/default/k8s_cluster.yaml",
    "BaseHOT/default/nested/master.yaml",
    "BaseHOT/default/nested/worker.yaml",
];

const CNF_PACKAGE: &[(&str, &[u8])] = files_of!["cnf-podaffinity":
    "TOSCA-Metadata/TOSCA.meta",
    "Definitions/cnf_top.vnfd.yaml",
    "Definitions/cnf_types.yaml",
    "Definitions/cnf_df_podaffinity.yaml",
    "Files/kubernetes/deployment.yaml",
];

fn package(name: &str, files: &[(&str, &[u8])]) -> Result<VnfPackage, vnfm_core::Error> {
    let files: BTreeMap<String, Vec<u8>> = files
        .iter()
        .map(|(p, b)| ((*p).to_owned(), b.to_vec()))
        .collect();
    VnfPackage::from_files(name, files)
}

/// The built-in cloud of the hardware-affinity demo: four hosts, workers join a cluster.
///
/// # Errors
/// Only if the embedded file were invalid (a test checks it is not).
pub fn cluster_cloud() -> Result<CloudFile, vnfm_core::Error> {
    CloudFile::from_yaml(CLUSTER_CLOUD_NAME, CLUSTER_CLOUD)
}

/// The built-in cluster VNF (three workers on distinct hosts).
///
/// # Errors
/// Only if the embedded files were invalid (a test checks they are not).
pub fn cluster_package() -> Result<VnfPackage, vnfm_core::Error> {
    package(CLUSTER_PACKAGE_NAME, CLUSTER_PACKAGE)
}

/// The built-in CNF (a Deployment of three replicas with anti-affinity on the host label).
///
/// # Errors
/// Only if the embedded files were invalid (a test checks they are not).
pub fn cnf_package() -> Result<VnfPackage, vnfm_core::Error> {
    package(CNF_PACKAGE_NAME, CNF_PACKAGE)
}

/// The built-in demo cloud.
///
/// # Errors
/// Only if the embedded file were invalid (a test checks it is not).
pub fn demo_cloud() -> Result<CloudFile, vnfm_core::Error> {
    CloudFile::from_yaml(DEMO_CLOUD_NAME, DEMO_CLOUD)
}

/// The files of the built-in demo package (path in the package, content).
pub(crate) fn demo_package_files() -> &'static [(&'static str, &'static [u8])] {
    DEMO_PACKAGE
}

/// The built-in demo package.
///
/// # Errors
/// Only if the embedded files were invalid (a test checks they are not).
pub fn demo_package() -> Result<VnfPackage, vnfm_core::Error> {
    package(DEMO_PACKAGE_NAME, DEMO_PACKAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_load() {
        let c = demo_cloud().unwrap();
        assert!(c.zones.len() >= 3);
        let p = demo_package().unwrap();
        assert!(p.flavour("default").is_some());
    }

    #[test]
    fn builtin_package_equals_the_example_directory() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/demo-vnf");
        let from_disk = vnfm_core::package::fs::load(&dir).unwrap();
        let builtin = demo_package().unwrap();
        assert_eq!(from_disk.flavours, builtin.flavours);
        assert_eq!(from_disk.descriptor_id, builtin.descriptor_id);
    }

    #[test]
    fn builtin_cluster_packages_equal_their_example_directories() {
        let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        for (dir, builtin) in [
            ("k8s-cluster-vnf", cluster_package().unwrap()),
            ("cnf-podaffinity", cnf_package().unwrap()),
        ] {
            let from_disk =
                vnfm_core::package::fs::load(&examples.join("packages").join(dir)).unwrap();
            assert_eq!(from_disk.flavours, builtin.flavours, "{dir}");
            assert_eq!(from_disk.descriptor_id, builtin.descriptor_id, "{dir}");
            assert_eq!(from_disk.kubernetes, builtin.kubernetes, "{dir}");
        }
        let cloud = cluster_cloud().unwrap();
        assert_eq!(cloud.zones.len(), 1);
    }
}
