//! Intent-based cloud selection (ONAP OOF / Multi-Cloud "cloud selection by deployment
//! intent", OSM PLA's linked placement): pure, exact and explained.
//!
//! - [`links`]: several VNFs coupled by links with latency / jitter bounds placed on VIMs at
//!   minimum price (OSM PLA's model), solved exactly by branch and bound.
//! - [`policy`]: the cloud-selection policy (the ONAP seed's schema), typed and validated.
//! - [`candidates`]: the candidate file: cloud owners, regions, cost models, capacity sources.
//! - [`select`]: filtering with reasons and the choice (weighted, HAS-compatible,
//!   lexicographic, Pareto).
//! - [`deploy`]: one region for a whole VNF instance, and the intent realised in its package.
//! - [`realise`]: the intent written into the deployment template (HA server group, burstable
//!   flavour).

pub mod candidates;
pub mod deploy;
pub mod links;
pub mod policy;
pub mod realise;
pub mod select;
