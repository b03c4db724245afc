//! TOSCA `scalar-unit.size` values (`4096 MB`, `1 GiB`).
//!
//! Units are matched case-insensitively: `B`, `kB`/`KiB`, `MB`/`MiB`, `GB`/`GiB`,
//! `TB`/`TiB`. vnfm reads the decimal units as their binary counterparts (`MB` = `MiB` =
//! 1024² bytes): VNFDs write `virtual_mem_size: 4096 MB` for a Nova flavor of 4096 MiB and
//! `size_of_storage: 1 GB` for a Cinder volume of size 1 (GiB), and that is what they mean.
//! Conversions to a coarser unit round up, since a resource must hold at least the size asked.

/// Bytes per unit, lowercase unit names.
const UNITS: &[(&str, u64)] = &[
    ("b", 1),
    ("kb", 1 << 10),
    ("kib", 1 << 10),
    ("mb", 1 << 20),
    ("mib", 1 << 20),
    ("gb", 1 << 30),
    ("gib", 1 << 30),
    ("tb", 1 << 40),
    ("tib", 1 << 40),
];

/// The unit names accepted, for messages.
pub(crate) const UNIT_NAMES: &str = "B, kB, KiB, MB, MiB, GB, GiB, TB, TiB";

/// Parses a size into bytes; the error message says what was wrong.
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    if num.is_empty() {
        return Err(format!(
            "expected a size such as `4 GB` (a number and a unit), found `{s}`"
        ));
    }
    if unit.is_empty() {
        return Err(format!(
            "size `{s}` has no unit: expected one of {UNIT_NAMES}"
        ));
    }
    let lower = unit.to_ascii_lowercase();
    let Some(&(_, mult)) = UNITS.iter().find(|(u, _)| *u == lower) else {
        return Err(format!(
            "unknown size unit `{unit}` in `{s}`: expected one of {UNIT_NAMES}"
        ));
    };
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if frac.contains('.') || (int.is_empty() && frac.is_empty()) {
        return Err(format!("malformed number `{num}` in size `{s}`"));
    }
    let too_big = || format!("size `{s}` is too large");
    let int_val: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| too_big())?
    };
    let mut bytes = int_val.checked_mul(mult).ok_or_else(too_big)?;
    // The fraction, exactly: frac_digits / 10^len * mult, rounded up to a whole byte.
    let frac = frac.trim_end_matches('0');
    if !frac.is_empty() {
        if frac.len() > 18 {
            return Err(format!("too many decimals in size `{s}`"));
        }
        let digits: u128 = frac.parse().map_err(|_| too_big())?;
        let scale = 10u128.pow(u32::try_from(frac.len()).map_err(|_| too_big())?);
        let part = (digits * u128::from(mult)).div_ceil(scale);
        let part = u64::try_from(part).map_err(|_| too_big())?;
        bytes = bytes.checked_add(part).ok_or_else(too_big)?;
    }
    Ok(bytes)
}

/// Bytes to MiB, rounded up.
pub(crate) fn to_mib(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20)
}

/// Bytes to GiB, rounded up.
pub(crate) fn to_gib(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(parse_bytes("4096 MB").map(to_mib), Ok(4096));
        assert_eq!(parse_bytes("4 GB").map(to_mib), Ok(4096));
        assert_eq!(parse_bytes("512 MiB").map(to_mib), Ok(512));
        assert_eq!(parse_bytes("1 GiB").map(to_gib), Ok(1));
        assert_eq!(parse_bytes("1.5 GB").map(to_mib), Ok(1536));
        assert_eq!(parse_bytes("45 gb").map(to_gib), Ok(45));
        assert_eq!(parse_bytes("2TB").map(to_gib), Ok(2048));
        assert_eq!(parse_bytes("0 GB"), Ok(0));
        // rounding up to the coarser unit
        assert_eq!(parse_bytes("512 MB").map(to_gib), Ok(1));
        assert_eq!(parse_bytes("1 B").map(to_mib), Ok(1));
    }

    #[test]
    fn bad_sizes_say_why() {
        let e = parse_bytes("4 GiGa").unwrap_err();
        assert!(e.contains("unknown size unit `GiGa`"), "{e}");
        assert!(e.contains("MiB"), "{e}");
        assert!(parse_bytes("4096").unwrap_err().contains("has no unit"));
        assert!(parse_bytes("MB")
            .unwrap_err()
            .contains("a number and a unit"));
        assert!(parse_bytes("-1 MB")
            .unwrap_err()
            .contains("a number and a unit"));
        assert!(parse_bytes("1.2.3 MB").unwrap_err().contains("malformed"));
        assert!(parse_bytes("99999999999999999999 TB")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_bytes("16777216 TB")
            .unwrap_err()
            .contains("too large"));
    }
}
