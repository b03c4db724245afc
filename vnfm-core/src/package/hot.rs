//! `BaseHOT/<flavourId>/`: the Heat templates of a flavour.

use std::collections::BTreeMap;
use std::path::Path;

use serde_yaml::Value;

use super::yaml::{self, At};
use crate::driver::TemplateBundle;
use crate::error::{Error, Location};
use crate::Result;

fn is_yaml(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".yml")
}

/// The flavour's templates, `None` when the package has no `BaseHOT/<id>/` folder. The rules
/// are documented on [`super::Flavour::base_hot`].
pub(crate) fn base_hot(
    source: &str,
    files: &BTreeMap<String, Vec<u8>>,
    flavour_id: &str,
) -> Result<Option<TemplateBundle>> {
    let prefix = format!("BaseHOT/{flavour_id}/");
    let dir_shown = Path::new(source).join(format!("BaseHOT/{flavour_id}"));
    let in_dir: Vec<(&str, &String, &Vec<u8>)> = files
        .iter()
        .filter_map(|(p, b)| p.strip_prefix(&prefix).map(|rest| (rest, p, b)))
        .collect();
    if in_dir.is_empty() {
        return Ok(None);
    }

    let mut texts: Vec<(&str, &String, String, Value)> = Vec::new();
    for (rel, full, bytes) in &in_dir {
        let shown = Path::new(source).join(full);
        let text =
            String::from_utf8(crate::input::strip_bom_bytes(bytes).to_vec()).map_err(|e| {
                Error::invalid(
                    Location::file(&shown),
                    format!(
                        "not UTF-8 text (at byte {}): BaseHOT files are Heat templates and other \
                     text files",
                        e.utf8_error().valid_up_to()
                    ),
                )
            })?;
        let value = if is_yaml(rel) {
            yaml::parse(&shown, text.as_bytes())?
        } else {
            Value::Null
        };
        texts.push((rel, full, text, value));
    }

    let tops: Vec<&str> = texts
        .iter()
        .filter(|(rel, ..)| !rel.contains('/') && is_yaml(rel))
        .map(|(rel, ..)| *rel)
        .collect();
    let top = match tops.as_slice() {
        [one] => *one,
        [] => {
            return Err(Error::invalid(
                Location::file(&dir_shown),
                "no top-level Heat template: expected one .yaml file directly in this folder",
            ))
        }
        several => {
            return Err(Error::invalid(
                Location::file(&dir_shown),
                format!(
                    "{} top-level Heat templates ({}): expected exactly one .yaml file directly \
                     in this folder (nested templates go in nested/)",
                    several.len(),
                    several.join(", ")
                ),
            ))
        }
    };

    let mut bundle = TemplateBundle::default();
    for (rel, _, text, _) in &texts {
        if *rel == top {
            bundle.template = text.clone();
        } else {
            bundle.files.insert((*rel).to_owned(), text.clone());
        }
    }
    // Bare-name aliases of the files directly in nested/, never replacing a relative key.
    for (rel, _, text, _) in &texts {
        if let Some(name) = rel.strip_prefix("nested/") {
            if !name.contains('/') && name != top {
                bundle
                    .files
                    .entry(name.to_owned())
                    .or_insert_with(|| text.clone());
            }
        }
    }

    // Check the templates: a mapping with heat_template_version, and every resource type that
    // names a template file must be in `files`.
    for (rel, full, _, value) in &texts {
        if !is_yaml(rel) {
            continue;
        }
        let shown = Path::new(source).join(full);
        let root = At::root(value, &shown);
        if !value.is_mapping() {
            return Err(root.expected("a Heat template (a mapping)"));
        }
        if *rel == top || rel.starts_with("nested/") {
            root.req("heat_template_version")?;
        }
        if let Some(resources) = root.opt("resources")? {
            check_types(&resources, &bundle, flavour_id)?;
        }
    }
    Ok(Some(bundle))
}

/// Every `type: X.yaml` below `at` must be a key of `bundle.files`.
fn check_types(at: &At<'_>, bundle: &TemplateBundle, flavour_id: &str) -> Result<()> {
    match at.v {
        Value::Mapping(_) => {
            for (key, child) in at.entries()? {
                if key == "type" {
                    if let Value::String(ty) = child.v {
                        if is_yaml(ty) && !bundle.files.contains_key(ty.as_str()) {
                            return Err(child.err(format!(
                                "resource type `{ty}` names a template that is not in \
                                 BaseHOT/{flavour_id}/ (expected nested/{ty}; files: {})",
                                super::list_or_none(bundle.files.keys())
                            )));
                        }
                    }
                } else {
                    check_types(&child, bundle, flavour_id)?;
                }
            }
        }
        Value::Sequence(_) => {
            for item in at.items()? {
                check_types(&item, bundle, flavour_id)?;
            }
        }
        _ => {}
    }
    Ok(())
}
