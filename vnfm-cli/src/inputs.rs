//! The inputs of a command: cloud files and VNF packages, read from disk or built in.

use std::path::Path;

use vnfm_core::cloud::CloudFile;
use vnfm_core::package::VnfPackage;

use crate::builtin;
use crate::config::Config;
use crate::error::CliError;
use crate::package_dir;

/// Loads the cloud file at `path`, or the built-in demo cloud when `None`; returns it with the
/// name it goes by in messages.
///
/// # Errors
/// An unreadable or invalid cloud file (exit 2).
pub fn load_cloud(path: Option<&Path>) -> Result<(CloudFile, String), CliError> {
    match path {
        Some(p) => Ok((CloudFile::load(p)?, p.display().to_string())),
        None => Ok((builtin::demo_cloud()?, builtin::DEMO_CLOUD_NAME.to_owned())),
    }
}

/// The package: `explicit`, else the one in `[packages] dir` whose descriptor id is `vnfd_id`,
/// else the built-in demo package (when its descriptor id matches, or no id is asked). The
/// folder's entries are read in name order as [`crate::package_dir`] says (hidden ones left
/// out, links and special files refused); those that do not load are named when no package
/// has `vnfd_id`.
///
/// # Errors
/// An unreadable package, or no package for `vnfd_id` (exit 2).
pub fn load_package(
    explicit: Option<&Path>,
    config: &Config,
    vnfd_id: Option<&str>,
) -> Result<VnfPackage, CliError> {
    if let Some(p) = explicit {
        return Ok(vnfm_core::package::fs::load(p)?);
    }
    let mut not_loaded = Vec::new();
    if let (Some(dir), Some(id)) = (config.packages.dir.as_deref(), vnfd_id) {
        let paths = package_dir::entries(dir).map_err(|e| CliError::Config {
            file: dir.to_path_buf(),
            message: "cannot read the packages folder ([packages] dir)".into(),
            source: Some(e),
        })?;
        for p in paths {
            match package_dir::load(&p) {
                Ok((_, pkg)) if pkg.descriptor_id == id => return Ok(pkg),
                Ok(_) => {}
                Err(reason) => not_loaded.push(reason),
            }
        }
    }
    let demo = builtin::demo_package()?;
    match vnfd_id {
        Some(id) if id != demo.descriptor_id => {
            let mut message = format!(
                "no package with vnfdId {id}: give --package, or put it in the folder of \
                 --packages-dir / [packages] dir"
            );
            if !not_loaded.is_empty() {
                message.push_str(&format!(
                    " (not loaded from that folder: {})",
                    not_loaded.join("; ")
                ));
            }
            Err(CliError::Usage(message))
        }
        _ => Ok(demo),
    }
}

/// The flavour `flavour`, else the package's first.
///
/// # Errors
/// A package without a deployment flavour (exit 2).
pub fn default_flavour(pkg: &VnfPackage, flavour: Option<&str>) -> Result<String, CliError> {
    match flavour {
        Some(f) => Ok(f.to_owned()),
        None => pkg.flavours.keys().next().cloned().ok_or_else(|| {
            CliError::Usage(format!("package {} has no deployment flavour", pkg.source))
        }),
    }
}
