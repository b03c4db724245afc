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

/// The built-in demo cloud.
///
/// # Errors
/// Only if the embedded file were invalid (a test checks it is not).
pub fn demo_cloud() -> Result<CloudFile, vnfm_core::Error> {
    CloudFile::from_yaml(DEMO_CLOUD_NAME, DEMO_CLOUD)
}

/// The built-in demo package.
///
/// # Errors
/// Only if the embedded files were invalid (a test checks they are not).
pub fn demo_package() -> Result<VnfPackage, vnfm_core::Error> {
    let files: BTreeMap<String, Vec<u8>> = DEMO_PACKAGE
        .iter()
        .map(|(p, b)| ((*p).to_owned(), b.to_vec()))
        .collect();
    VnfPackage::from_files(DEMO_PACKAGE_NAME, files)
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
}
