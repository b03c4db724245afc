//! `vnfm package show`.

use std::path::Path;

use crate::error::CliError;
use crate::output::Output;
use crate::render::package::{human, report};

/// `vnfm package show PATH`.
///
/// # Errors
/// The package cannot be read or is invalid (exit 2).
pub fn show(path: &Path, out: Output) -> Result<(), CliError> {
    let pkg = vnfm_core::package::fs::load(path)?;
    let r = report(&pkg);
    out.data(&human(&r), &r)?;
    // Diagnostics: on stderr (the JSON carries them too, as `warnings` of the flavour).
    for w in r.flavours.iter().flat_map(|f| &f.warnings) {
        out.note(&format!("warning: {w}"));
    }
    Ok(())
}
