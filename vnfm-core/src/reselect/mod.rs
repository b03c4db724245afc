//! Availability-zone reselection: the sans-IO state machine of the ETSI/Tacker "Enhance
//! Placement Process".
//!
//! When a stack create or update fails because a zone is out of resources, the machine reads
//! the failure, asks for the stack's resources (to find every failed VNFC, nested ones
//! included), asks where the failed servers really were (Nova's zone of each), and for the
//! compute zones (once per operation), excludes the zones where servers failed, reselects
//! zones for the affected VNFCs that still honour the zone-scope affinity / anti-affinity
//! constraints, and asks for the stack to be applied again — until the stack succeeds, the
//! failure is not a capacity error, no candidate zone is left, or the retry limit is reached.
//!
//! A failure is a capacity failure when the stack's reason matches the configured pattern, or
//! when a failed resource's own reason does (read as Heat would report it at the top:
//! `Resource <ACTION> failed: <reason>`), so a new wording of the top-level reason alone does
//! not end reselection. The zones excluded are facts, not the zones asked for: Heat's rolling
//! update of an AutoScalingGroup can rebuild a member not yet replaced with its old
//! definition, in its old zone, while the zone asked for had room (real Heat 27); a failed
//! server Nova no longer knows (or never created) is charged to the zone its unit was asked
//! in. The VNFCs moved in a round are the failed ones and the new ones in a zone where a
//! server failed.
//!
//! The machine never awaits, sleeps, reads a clock or draws unseeded random numbers. The
//! caller (the LCM driver loop) takes [`Action`]s from [`Reselection::poll_action`], performs
//! them through the driver traits and feeds the results back with the `handle_*` methods:
//!
//! ```text
//!   poll_action -> ApplyStack{zones}      caller creates/updates the stack, waits for a terminal state
//!   handle_stack_succeeded()              -> Done
//!   handle_apply_refused(reason)          -> GiveUp (the request itself was refused)
//!   handle_stack_rolled_back(reason)      -> GiveUp (Heat rolled the stack back)
//!   handle_stack_failed(reason)           -> ListResources | ApplyStack (same zones) | GiveUp
//!   handle_resources(resources)           -> LocateFailedServers | ListZones | ApplyStack | GiveUp
//!   handle_failed_servers(zones)          -> ListZones (first round) | LocateServers | ApplyStack | GiveUp
//!   handle_zones(zones)                   -> LocateServers | ApplyStack | GiveUp
//!   handle_hosts(hosts)                   -> ApplyStack | GiveUp
//! ```
//!
//! Nova's server-group race is told apart first ([`is_group_policy_race`]): members of one
//! anti-affinity group created at once can be put on one host, and Nova's late check fails
//! one of them until its reschedules run out. The zone has room, so the machine applies the
//! stack again with the same zones (`group_race_retries` times per operation, then
//! [`GiveUp::GroupPolicyRace`]), excludes nothing and counts no reselection.
//!
//! Units: the machine places *units*, the top-level stack resources that carry one zone each:
//! one VNFC in Tacker's StandardUserData layout (`VDU1-0`), or one whole VDU under an
//! `OS::Heat::AutoScalingGroup` (all its VNFCs share the zone, the spec's forced affinity).
//! Units that exist from before the operation (`movable: false`) never move.

mod failure;
mod machine;
#[cfg(test)]
mod tests;

pub use failure::{
    failed_path_from_reason, failed_top_resources, is_group_policy_race, resource_reason_matches,
    top_level_resource, InsufficientResourcePattern, DEFAULT_INSUFFICIENT_RESOURCE_PATTERN,
};
pub use machine::{
    Action, Attempt, AttemptOutcome, GiveUp, History, Outcome, ReselectConfig, Reselection, Unit,
};
