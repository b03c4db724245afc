//! Promise capacities and allocations as people read them.

use std::fmt::Write as _;

use vnfm_core::reservation::{Allocation, Capacity, ResourceLine};

/// The human lines of the allocations an operation drew and gave back.
pub fn human_drawn(drawn: &[Allocation], released: &[Allocation]) -> String {
    let mut s = String::new();
    for (verb, list) in [("drew", drawn), ("gave back", released)] {
        for a in list {
            let _ = writeln!(
                s,
                "  {verb} {} for {}{} (allocation {})",
                amounts(&a.capacity),
                a.instance_ref.as_deref().unwrap_or("-"),
                a.reservation
                    .as_ref()
                    .map(|r| format!(
                        " {} reservation {r}",
                        if verb == "drew" { "from" } else { "to" }
                    ))
                    .unwrap_or_default(),
                a.id
            );
        }
    }
    s
}

/// `4 cores, 4096 MiB ram, 1 instances`: the non-zero lines (`nothing` when all are zero).
pub fn amounts(c: &Capacity) -> String {
    let parts: Vec<String> = c
        .lines()
        .filter(|(_, a)| *a > 0)
        .map(|(l, a)| match l {
            ResourceLine::Ram => format!("{a} MiB ram"),
            ResourceLine::Size => format!("{a} GiB size"),
            l => format!("{a} {l}"),
        })
        .collect();
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join(", ")
    }
}
