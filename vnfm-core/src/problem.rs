//! ETSI NFV-SOL 013 `ProblemDetails`: the body of every error response of the SOL003 APIs
//! (RFC 7807 shape), also carried in `VnfLcmOpOcc.error`.
//!
//! `status` and `detail` are mandatory and always serialized; `type`, `title` and `instance`
//! are serialized only when set. Any other member ("extension members" in RFC 7807) is kept in
//! [`ProblemDetails::extensions`] and written back at the top level, so a problem received from
//! a peer round-trips unchanged. Deserialization is strict: a body without `status` or
//! `detail` is rejected by serde with an error naming the missing field.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Location};

/// SOL013 `ProblemDetails` (clause 6.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProblemDetails {
    /// `type` (0..1): a URI reference that identifies the problem type.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// `title` (0..1): a short, human-readable summary of the problem type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `status` (1): the HTTP status code of this occurrence of the problem.
    pub status: u16,
    /// `detail` (1): a human-readable explanation specific to this occurrence.
    pub detail: String,
    /// `instance` (0..1): a URI reference that identifies this occurrence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// Extension members: every other top-level member, kept as received.
    #[serde(flatten)]
    pub extensions: serde_json::Map<String, serde_json::Value>,
}

impl ProblemDetails {
    /// A problem with an HTTP `status` and a `detail` text, without type, title or instance.
    pub fn new(status: u16, detail: impl Into<String>) -> Self {
        Self {
            type_: None,
            title: None,
            status,
            detail: detail.into(),
            instance: None,
            extensions: serde_json::Map::new(),
        }
    }

    /// The same problem with a `title`.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The same problem with a `type` URI.
    pub fn with_type(mut self, type_: impl Into<String>) -> Self {
        self.type_ = Some(type_.into());
        self
    }

    /// The same problem with an `instance` URI.
    pub fn with_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = Some(instance.into());
        self
    }

    /// The same problem with one extension member `key` set to `value`.
    pub fn with_extension(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
        self.extensions.insert(key.into(), value);
        self
    }

    /// Checks what serde cannot: `status` is an HTTP error or success code (100 to 599) and
    /// `detail` is not empty.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the field (`status` or `detail`), the value and what was
    /// expected.
    pub fn validate(&self) -> Result<(), Error> {
        if !(100..=599).contains(&self.status) {
            return Err(Error::invalid(
                Location::default().with_field("status"),
                format!(
                    "ProblemDetails status {} is not an HTTP status code; expected 100 to 599",
                    self.status
                ),
            ));
        }
        if self.detail.is_empty() {
            return Err(Error::invalid(
                Location::default().with_field("detail"),
                "ProblemDetails detail is empty; expected a human-readable explanation",
            ));
        }
        Ok(())
    }
}

impl std::fmt::Display for ProblemDetails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.title {
            Some(title) => write!(f, "{} {}: {}", self.status, title, self.detail),
            None => write!(f, "{}: {}", self.status, self.detail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn full() -> ProblemDetails {
        ProblemDetails::new(409, "VNF instance 7a1 is in NOT_INSTANTIATED state")
            .with_type("https://example.com/problems/state-conflict")
            .with_title("Conflict")
            .with_instance("/vnflcm/v2/vnf_instances/7a1")
            .with_extension("retryAfter", json!(30))
    }

    #[test]
    fn round_trip_full_example() {
        let p = full();
        let s = serde_json::to_string(&p).unwrap();
        let back: ProblemDetails = serde_json::from_str(&s).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn serializes_with_sol013_names() {
        let v = serde_json::to_value(full()).unwrap();
        assert_eq!(
            v,
            json!({
                "type": "https://example.com/problems/state-conflict",
                "title": "Conflict",
                "status": 409,
                "detail": "VNF instance 7a1 is in NOT_INSTANTIATED state",
                "instance": "/vnflcm/v2/vnf_instances/7a1",
                "retryAfter": 30
            })
        );
        // optional members are omitted, mandatory ones always present
        let v = serde_json::to_value(ProblemDetails::new(404, "not found")).unwrap();
        assert_eq!(v, json!({"status": 404, "detail": "not found"}));
    }

    #[test]
    fn deserializes_a_literal_problem_and_keeps_extensions() {
        let p: ProblemDetails = serde_json::from_str(
            r#"{"title": "Bad Request", "status": 400, "detail": "flavourId is missing",
                "invalidParams": ["flavourId"]}"#,
        )
        .unwrap();
        assert_eq!(p.status, 400);
        assert_eq!(p.title.as_deref(), Some("Bad Request"));
        assert_eq!(p.type_, None);
        assert_eq!(
            p.extensions.get("invalidParams"),
            Some(&json!(["flavourId"]))
        );
        assert_eq!(p.to_string(), "400 Bad Request: flavourId is missing");
    }

    #[test]
    fn missing_mandatory_members_are_rejected() {
        let e = serde_json::from_str::<ProblemDetails>(r#"{"status": 500}"#).unwrap_err();
        assert!(e.to_string().contains("missing field `detail`"), "{e}");
        let e = serde_json::from_str::<ProblemDetails>(r#"{"detail": "x"}"#).unwrap_err();
        assert!(e.to_string().contains("missing field `status`"), "{e}");
    }

    #[test]
    fn validate_reports_bad_status_and_empty_detail() {
        assert!(full().validate().is_ok());
        let e = ProblemDetails::new(42, "odd").validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "status: ProblemDetails status 42 is not an HTTP status code; expected 100 to 599"
        );
        let e = ProblemDetails::new(500, "").validate().unwrap_err();
        assert!(e.to_string().starts_with("detail: "), "{e}");
    }
}
