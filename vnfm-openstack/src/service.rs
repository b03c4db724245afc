//! The OpenStack services the clients call: the name each is counted and reported under, its
//! service type in the catalog, and the microversion pinned for it.
//!
//! A leaf, read both by the service clients ([`Nova`](crate::Nova), [`Heat`](crate::Heat),
//! the [`placement`](crate::placement) reading) and by the
//! [`Session`](crate::session::Session), which sends each service's microversion header.

/// Nova (compute).
pub(crate) mod nova {
    /// Nova's name in route counters and errors.
    pub(crate) const SERVICE: &str = "nova";
    /// Nova's service type in the catalog.
    pub(crate) const TYPE: &str = "compute";
}

/// Placement (resource providers, inventories, usages).
pub(crate) mod placement {
    /// Placement's name in route counters and errors.
    pub(crate) const SERVICE: &str = "placement";
    /// The service type of Placement in the catalog.
    pub(crate) const TYPE: &str = "placement";
    /// The Placement microversion every request asks for: 1.29 has the trees of the providers
    /// in `provider_summaries` (1.27 every resource class, 1.14 `root_provider_uuid` in
    /// `GET /resource_providers`).
    pub const PLACEMENT_MICROVERSION: &str = "1.29";
    /// The value of the `OpenStack-API-Version` header sent to Placement.
    pub(crate) const API_VERSION_HEADER: &str = "placement 1.29";
}

/// Heat (orchestration).
pub(crate) mod heat {
    /// Heat's name in route counters and errors.
    pub(crate) const SERVICE: &str = "heat";
    /// Heat's service type in the catalog.
    pub(crate) const TYPE: &str = "orchestration";
}
