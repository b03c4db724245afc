//! The claims of `benches/README.md` on AZ reselection, checked as a test over a few hundred
//! seeded scenarios (the bench runs 10,000 per regime in release; this runs 300 per regime in
//! debug), generated deterministically with the bench's generator and driven against the
//! simulator exactly as the bench does:
//!
//! - capacity-aware never needs more stack attempts than random on the same scenario (and never
//!   fails where random succeeds), with the grant's zones the same for both (reselection alone)
//!   and end to end (each policy also makes the grant), in both regimes;
//! - crowded regime, end to end: capacity-aware's mean attempts ≤ 0.5 × random's;
//! - crowded regime, reselection alone (same grant): the ratio of mean reselection rounds is
//!   printed, not asserted: it is borderline around 0.5 (0.49 over the bench's 10,000
//!   scenarios, 0.52 over the first 600 here), see `benches/README.md`.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use vnfm_core::placement::Selection;
use vnfm_core::reselect::InsufficientResourcePattern;

use vnfm_benches::reselection::{run, run_from, Regime, Run, Scenario};

/// Scenarios per regime.
const SCENARIOS: usize = 300;

fn scenarios(regime: Regime) -> Vec<Scenario> {
    vnfm_benches::reselection::scenarios(regime, SCENARIOS)
}

/// Attempts of each policy on every scenario: (random, capacity-aware) with the same grant,
/// and (random, capacity-aware) end to end.
struct Tally {
    /// Scenarios where capacity-aware needs more attempts or fails where random succeeds.
    worse: Vec<String>,
    both: usize,
    sum_r: usize,
    sum_c: usize,
}

impl Tally {
    fn new() -> Self {
        Tally {
            worse: Vec::new(),
            both: 0,
            sum_r: 0,
            sum_c: 0,
        }
    }

    fn add(&mut self, seed: u64, what: &str, r: &Run, c: Option<&Run>) {
        let c_ok = c.filter(|c| c.succeeded);
        match (r.succeeded, c_ok) {
            (true, Some(c)) => {
                self.both += 1;
                self.sum_r += r.attempts;
                self.sum_c += c.attempts;
                if c.attempts > r.attempts {
                    self.worse.push(format!(
                        "{what} seed {seed}: random {} attempts, capacity-aware {}: {:?}",
                        r.attempts, c.attempts, c.trace
                    ));
                }
            }
            (true, None) => self.worse.push(format!(
                "{what} seed {seed}: random succeeds in {}, capacity-aware fails",
                r.attempts
            )),
            _ => {}
        }
    }

    fn mean_r(&self) -> f64 {
        self.sum_r as f64 / self.both.max(1) as f64
    }

    fn mean_c(&self) -> f64 {
        self.sum_c as f64 / self.both.max(1) as f64
    }
}

fn check(regime: Regime) {
    let pattern = InsufficientResourcePattern::standard().unwrap();
    let all = scenarios(regime);
    let mut same_grant = Tally::new();
    let mut end_to_end = Tally::new();
    // Reselection rounds (attempts - 1) over the scenarios both solve after the grant failed.
    let (mut resel, mut rounds_r, mut rounds_c) = (0usize, 0usize, 0usize);
    for s in &all {
        let r = run(s, Selection::Random, &pattern);
        let c = run(s, Selection::CapacityAware, &pattern);
        same_grant.add(s.seed, "same grant", &r, Some(&c));
        if r.succeeded && c.succeeded && r.attempts > 1 {
            resel += 1;
            rounds_r += r.attempts - 1;
            rounds_c += c.attempts - 1;
        }
        let e = s
            .initial_capacity_aware
            .as_ref()
            .map(|i| run_from(s, i, Selection::CapacityAware, &pattern));
        end_to_end.add(s.seed, "end to end", &r, e.as_ref());
    }
    let rr = rounds_r as f64 / resel.max(1) as f64;
    let rc = rounds_c as f64 / resel.max(1) as f64;
    println!(
        "{regime:?}, {} scenarios: same grant, mean attempts (of {} both solve) random {:.3}, \
         capacity-aware {:.3} ({:.2}); rounds after a failed grant (of {resel}) random {rr:.3}, \
         capacity-aware {rc:.3}; end to end (of {}) random {:.3}, capacity-aware {:.3} ({:.2})",
        all.len(),
        same_grant.both,
        same_grant.mean_r(),
        same_grant.mean_c(),
        same_grant.mean_c() / same_grant.mean_r(),
        end_to_end.both,
        end_to_end.mean_r(),
        end_to_end.mean_c(),
        end_to_end.mean_c() / end_to_end.mean_r(),
    );
    assert!(
        same_grant.worse.is_empty() && end_to_end.worse.is_empty(),
        "capacity-aware worse than random on {} scenarios:\n{}",
        same_grant.worse.len() + end_to_end.worse.len(),
        same_grant
            .worse
            .iter()
            .chain(&end_to_end.worse)
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The scenarios exercise what they claim to: enough of them both solve, and reselect.
    assert!(
        end_to_end.both >= SCENARIOS / 5,
        "{} both solve",
        end_to_end.both
    );
    assert!(resel >= SCENARIOS / 20, "{resel} reselect");
    if regime == Regime::Crowded {
        assert!(
            end_to_end.mean_c() <= 0.5 * end_to_end.mean_r(),
            "crowded, end to end: capacity-aware {:.3} attempts, random {:.3}: not at most half",
            end_to_end.mean_c(),
            end_to_end.mean_r()
        );
        // Reselection alone, in rounds: borderline (0.49 over the bench's 10,000 scenarios,
        // 0.52 over this test's first 600, 0.55 over its first 150), so not a claim a test can
        // hold; reported, and the README says so.
        println!(
            "crowded, same grant: capacity-aware / random reselection rounds {:.2} (not asserted)",
            rc / rr
        );
    }
}

#[test]
fn capacity_aware_claims_hold_on_the_crowded_regime() {
    check(Regime::Crowded);
}

#[test]
fn capacity_aware_is_never_worse_on_the_mixed_regime() {
    check(Regime::Mixed);
}
