//! Identifier newtypes.
//!
//! Every identifier that crosses a module boundary is a newtype over `String`, so a zone name
//! cannot be passed where a stack id is expected. They serialize as plain strings.

use std::fmt;

use rand::RngCore;

macro_rules! string_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// Wraps a string.
            pub fn new(s: impl Into<String>) -> Self {
                Self(s.into())
            }
            /// The identifier as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

string_id!(
    /// An availability zone name (Nova `zoneName`, SOL003 `ZoneInfo.zoneId`).
    ZoneId
);
string_id!(
    /// A compute host name (Nova `OS-EXT-SRV-ATTR:host`).
    HostId
);
string_id!(
    /// A Heat stack id.
    StackId
);
string_id!(
    /// A Nova server id.
    ServerId
);
string_id!(
    /// A flavor name or id.
    FlavorId
);
string_id!(
    /// A VDU id from the VNFD (`VDU1`).
    VduId
);
string_id!(
    /// A VNF instance id.
    VnfInstanceId
);
string_id!(
    /// An LCM operation occurrence id.
    OpOccId
);
string_id!(
    /// A grant id.
    GrantId
);
string_id!(
    /// A Kubernetes node name.
    NodeName
);

/// `name-index`: the name of a VNFC (`VDU1-0`) or of one of its resources
/// (`VDU1-VirtualStorage-0`), as Tacker's StandardUserData names them.
pub fn add_idx(name: &str, index: u32) -> String {
    format!("{name}-{index}")
}

/// The name without its `-<index>` suffix (`VDU1-VirtualStorage-0` → `VDU1-VirtualStorage`);
/// the name itself when it has no numeric suffix.
pub fn rm_idx(name: &str) -> &str {
    match name.rsplit_once('-') {
        Some((base, idx)) if !idx.is_empty() && idx.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

/// Produces UUID-shaped identifiers (version 4 layout) from a seeded random source, so that
/// ids in the simulator, tests and demo are reproducible.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct IdGen {
    rng: rand_chacha::ChaCha8Rng,
}

impl IdGen {
    /// An id generator seeded with `seed`.
    pub fn seeded(seed: u64) -> Self {
        use rand::SeedableRng;
        Self {
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// The next UUID-shaped id, e.g. `5b2c3f0e-8a1d-4c6e-9f00-1a2b3c4d5e6f`.
    pub fn next_uuid(&mut self) -> String {
        let mut b = [0u8; 16];
        self.rng.fill_bytes(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}

/// A salt for the ids of the `n`-th run of a program over one state, for
/// [`crate::lifecycle::Lifecycle::with_id_salt`] (the CLI runs one operation per process): a
/// fixed `base` and a run counter give ids that are the same in every replay of a script and
/// still differ from run to run. Distinct `n` for one `base` give distinct salts (SplitMix64's
/// finalizer, a bijection, over `base + n * golden ratio`).
pub fn run_salt(base: u64, n: u64) -> u64 {
    let mut z = base.wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_reproducible_and_uuid_shaped() {
        let a = IdGen::seeded(7).next_uuid();
        let b = IdGen::seeded(7).next_uuid();
        assert_eq!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert_ne!(a, IdGen::seeded(8).next_uuid());
    }

    #[test]
    fn run_salts_are_reproducible_and_differ_between_runs() {
        assert_eq!(run_salt(1, 2), run_salt(1, 2));
        let salts: std::collections::BTreeSet<u64> = (0..1000).map(|n| run_salt(42, n)).collect();
        assert_eq!(salts.len(), 1000);
        assert_ne!(run_salt(1, 1), run_salt(2, 1));
    }

    #[test]
    fn ids_serialize_as_strings() {
        let z = ZoneId::new("AZ-1");
        assert_eq!(serde_json::to_string(&z).unwrap(), "\"AZ-1\"");
    }
}
