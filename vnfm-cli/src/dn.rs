//! X.500 distinguished names as RFC 4514 writes them (`CN=tacker,O=example`): parsed from the
//! configuration (`[[server.oauth2.clients]] tls_client_auth_subject_dn`) and compared with
//! the subject of a client certificate, for OAuth 2.0 mutual-TLS client authentication
//! (RFC 8705 section 2.1.2).
//!
//! The comparison is the one RFC 4517's `distinguishedNameMatch` makes for the usual string
//! attributes: the same relative distinguished names in the same order (RFC 4514 writes the
//! last RDN of the certificate first), attribute types by name or dotted OID without regard to
//! case, values equal after folding case and collapsing inner runs of spaces
//! (`caseIgnoreMatch`). A multi-valued RDN (`CN=a+UID=b`) matches whatever the order of its
//! values.

use std::fmt;

/// A distinguished name: its RDNs in RFC 4514's order (most specific first), each a sorted
/// list of normalised `(type, value)` pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistinguishedName {
    rdns: Vec<Vec<(String, String)>>,
}

/// Attribute type names of RFC 4514 section 3 (and `emailAddress`), by OID.
const NAMES: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.6", "C"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
    ("1.2.840.113549.1.9.1", "EMAILADDRESS"),
    ("2.5.4.5", "SERIALNUMBER"),
];

/// The most bytes of a distinguished name that is parsed.
pub const MAX_DN_BYTES: usize = 1024;

/// The canonical name of an attribute type: the short name of [`NAMES`] (upper case) for a
/// known name or OID, else the dotted OID or the name in upper case.
fn canonical_type(t: &str) -> String {
    let t = t.trim();
    let t = t
        .strip_prefix("oid.")
        .or_else(|| t.strip_prefix("OID."))
        .unwrap_or(t);
    if let Some((_, name)) = NAMES.iter().find(|(oid, _)| *oid == t) {
        return (*name).to_owned();
    }
    t.to_ascii_uppercase()
}

/// A value as `caseIgnoreMatch` compares it: trimmed, inner runs of spaces collapsed, lower
/// case.
fn canonical_value(v: &str) -> String {
    v.split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Why a distinguished name cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnError(String);

impl fmt::Display for DnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DnError {}

/// `s` split at the unescaped `sep`s (a backslash escapes the next character).
fn split_unescaped(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&s[start..]);
    parts
}

/// An RFC 4514 value with its escapes (`\,`, `\\`, `\2C`, ...) undone.
fn unescape(v: &str) -> Result<String, DnError> {
    if v.starts_with('#') {
        return Err(DnError(format!(
            "the value {v:?} is hex-encoded BER (#...), which is not supported; expected the value as a string"
        )));
    }
    let mut bytes = Vec::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let Some(next) = chars.next() else {
            return Err(DnError(format!(
                "the value {v:?} ends with a lone backslash"
            )));
        };
        if next.is_ascii_hexdigit() {
            let low = chars
                .next()
                .filter(char::is_ascii_hexdigit)
                .ok_or_else(|| {
                    DnError(format!(
                        "the value {v:?} has a backslash followed by one hex digit; expected two (\\2C) or a special character (\\,)"
                    ))
                })?;
            let pair = format!("{next}{low}");
            let b = u8::from_str_radix(&pair, 16)
                .map_err(|_| DnError(format!("the value {v:?} has a bad escape \\{pair}")))?;
            bytes.push(b);
        } else {
            let mut buf = [0u8; 4];
            bytes.extend_from_slice(next.encode_utf8(&mut buf).as_bytes());
        }
    }
    String::from_utf8(bytes).map_err(|_| {
        DnError(format!(
            "the value {v:?} is not UTF-8 once its escapes are undone"
        ))
    })
}

impl DistinguishedName {
    /// Parses `s` (RFC 4514: `type=value` pairs, RDNs separated by `,`, multi-valued RDNs by
    /// `+`, special characters escaped with `\`).
    ///
    /// # Errors
    /// A [`DnError`] naming what cannot be read: an empty name or RDN, a pair without `=`, an
    /// empty attribute type, a bad escape, a hex-encoded value, more than [`MAX_DN_BYTES`].
    pub fn parse(s: &str) -> Result<Self, DnError> {
        if s.len() > MAX_DN_BYTES {
            return Err(DnError(format!(
                "it has {} bytes; expected at most {MAX_DN_BYTES}",
                s.len()
            )));
        }
        if s.trim().is_empty() {
            return Err(DnError("it is empty".into()));
        }
        let mut rdns = Vec::new();
        for rdn in split_unescaped(s, ',') {
            let mut pairs = Vec::new();
            for pair in split_unescaped(rdn, '+') {
                let Some((t, v)) = pair.split_once('=') else {
                    return Err(DnError(format!(
                        "{:?} has no '='; expected type=value",
                        pair.trim()
                    )));
                };
                if t.trim().is_empty() {
                    return Err(DnError(format!(
                        "{:?} has no attribute type before '='",
                        pair.trim()
                    )));
                }
                pairs.push((canonical_type(t), canonical_value(&unescape(v.trim())?)));
            }
            pairs.sort();
            rdns.push(pairs);
        }
        Ok(Self { rdns })
    }

    /// The name of RDNs given in a certificate's order (least specific first, as X.509
    /// encodes them), each a list of `(attribute type OID or name, value)`.
    pub fn from_certificate_order<I, R, T, V>(rdns: I) -> Self
    where
        I: IntoIterator<Item = R>,
        R: IntoIterator<Item = (T, V)>,
        T: AsRef<str>,
        V: AsRef<str>,
    {
        let mut out: Vec<Vec<(String, String)>> = rdns
            .into_iter()
            .map(|rdn| {
                let mut pairs: Vec<(String, String)> = rdn
                    .into_iter()
                    .map(|(t, v)| (canonical_type(t.as_ref()), canonical_value(v.as_ref())))
                    .collect();
                pairs.sort();
                pairs
            })
            .collect();
        out.reverse();
        Self { rdns: out }
    }
}

impl fmt::Display for DistinguishedName {
    /// The normalised form (`cn=...` values in lower case), for logs and errors.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, rdn) in self.rdns.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            for (j, (t, v)) in rdn.iter().enumerate() {
                if j > 0 {
                    f.write_str("+")?;
                }
                write!(f, "{t}=")?;
                for c in v.chars() {
                    if matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=') {
                        f.write_str("\\")?;
                    }
                    write!(f, "{c}")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn cert(rdns: &[&[(&str, &str)]]) -> DistinguishedName {
        DistinguishedName::from_certificate_order(rdns.iter().map(|r| r.iter().copied()))
    }

    #[test]
    fn rfc4514_order_is_the_certificates_reversed() {
        let c = cert(&[
            &[("2.5.4.6", "JP")],
            &[("2.5.4.10", "Example")],
            &[("2.5.4.3", "tacker")],
        ]);
        assert_eq!(
            DistinguishedName::parse("CN=tacker,O=Example,C=JP").unwrap(),
            c
        );
        assert_ne!(
            DistinguishedName::parse("C=JP,O=Example,CN=tacker").unwrap(),
            c
        );
        assert_ne!(DistinguishedName::parse("CN=tacker,O=Example").unwrap(), c);
        assert_eq!(c.to_string(), "CN=tacker,O=example,C=jp");
    }

    #[test]
    fn types_and_values_compare_as_caseignorematch() {
        let c = cert(&[&[("2.5.4.10", "Example  Corp")], &[("2.5.4.3", "Tacker")]]);
        for s in [
            "cn=tacker, o=example corp",
            "CN = TACKER ,O=Example Corp",
            "2.5.4.3=tacker,OID.2.5.4.10=EXAMPLE CORP",
        ] {
            assert_eq!(DistinguishedName::parse(s).unwrap(), c, "{s}");
        }
        assert_ne!(
            DistinguishedName::parse("CN=tacker2,O=Example Corp").unwrap(),
            c
        );
    }

    #[test]
    fn escapes_and_multi_valued_rdns() {
        let c = cert(&[
            &[("2.5.4.10", "a,b")],
            &[("2.5.4.3", "x"), ("0.9.2342.19200300.100.1.1", "u1")],
        ]);
        assert_eq!(DistinguishedName::parse("UID=u1+CN=x,O=a\\,b").unwrap(), c);
        assert_eq!(DistinguishedName::parse("CN=x+UID=u1,O=a\\2Cb").unwrap(), c);
        // An escaped comma is not a separator: this is one RDN whose value holds a comma.
        assert_ne!(DistinguishedName::parse("CN=x+UID=u1,O=a,b").ok(), Some(c));
    }

    #[test]
    fn bad_names_are_refused_saying_why() {
        for (s, why) in [
            ("", "empty"),
            ("CN=a,,O=b", "no '='"),
            ("tacker", "no '='"),
            ("=a", "no attribute type"),
            ("CN=a\\", "lone backslash"),
            ("CN=a\\4", "one hex digit"),
            ("CN=#04024869", "hex-encoded"),
        ] {
            let e = DistinguishedName::parse(s).unwrap_err().to_string();
            assert!(e.contains(why), "{s:?}: {e}");
        }
        let long = format!("CN={}", "a".repeat(MAX_DN_BYTES));
        assert!(DistinguishedName::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("at most"));
    }
}
