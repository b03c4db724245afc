//! Reading a whole package from its files: the TOSCA side first ([`super::tosca`]: entry
//! file, imports, types, descriptor), then each deployment flavour ([`super::flavour`]), then
//! the Kubernetes manifests; [`VnfPackage::from_files`] calls it. It stands above both
//! readers, so that the flavour reader, which reads the TOSCA documents, is not called back
//! from the TOSCA one.

use std::collections::BTreeMap;

use super::tosca::{self, Types};
use super::{flavour, is_kubernetes_file, VnfPackage};
use crate::error::{Error, Location};
use crate::Result;

/// Reads the whole package.
pub(super) fn read_package(source: &str, files: &BTreeMap<String, Vec<u8>>) -> Result<VnfPackage> {
    let entry = tosca::entry_definitions(source, files)?;
    let docs = tosca::load_definitions(source, files, &entry)?;
    let types = Types::new(&docs)?;
    let entry_doc = docs.first().ok_or_else(|| {
        Error::invalid(
            Location::file(source),
            "the entry definitions file was not read",
        )
    })?;
    let d = tosca::descriptor(entry_doc, &docs, &types)?;

    let mut flavours = BTreeMap::new();
    let mut defined_in: BTreeMap<String, String> = BTreeMap::new();
    for doc in &docs {
        let Some(fid) = tosca::flavour_id(doc)? else {
            continue;
        };
        let id_text = fid.text()?;
        if let Some(first) = defined_in.get(&id_text) {
            return Err(fid.err(format!(
                "flavour `{id_text}` is defined twice: first in {first}"
            )));
        }
        defined_in.insert(id_text.clone(), doc.rel.clone());
        let f = flavour::parse(source, files, doc, &types, &id_text)?;
        flavours.insert(id_text, f);
    }
    if flavours.is_empty() {
        return Err(Error::invalid(
            Location::file(&entry_doc.shown),
            format!(
                "no deployment flavour: none of the files read from the entry ({}) has \
                 topology_template.substitution_mappings.properties.flavour_id",
                docs.iter()
                    .map(|d| d.rel.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }

    Ok(VnfPackage {
        source: source.to_owned(),
        entry_definitions: entry,
        vnf_type: d.vnf_type,
        descriptor_id: d.descriptor_id,
        descriptor_version: d.descriptor_version,
        provider: d.provider,
        product_name: d.product_name,
        software_version: d.software_version,
        vnfm_info: d.vnfm_info,
        flavours,
        kubernetes: kubernetes_files(source, files)?,
    })
}

/// The Kubernetes manifests of the package: the `.yaml` / `.yml` files directly under
/// `Files/kubernetes/` (Tacker v2's CNF layout), as text.
fn kubernetes_files(
    source: &str,
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (path, bytes) in files {
        if !is_kubernetes_file(path) {
            continue;
        }
        let text = String::from_utf8(bytes.clone()).map_err(|_| {
            Error::invalid(
                Location::file(source).with_field(path.as_str()),
                format!("{path} is not UTF-8: a Kubernetes manifest must be YAML text"),
            )
        })?;
        out.insert(path.clone(), text);
    }
    Ok(out)
}
