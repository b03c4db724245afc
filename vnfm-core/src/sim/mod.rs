//! The simulated cloud: [`SimCloud`], an in-memory cloud that implements every driver trait
//! ([`StackDriver`], [`ZoneCatalog`], [`ComputeInventory`], [`ClusterDriver`]) the way Heat 27,
//! Nova 34 and Kubernetes behave, including their failure texts, and [`FaultySim`], a wrapper
//! that injects faults.
//!
//! # Model
//! - Zones, hosts, flavors and images come from a [`CloudFile`]. A host's free capacity is its
//!   capacity minus the flavors of the `ACTIVE` servers on it.
//! - Stacks are Heat stacks. Creates and updates complete synchronously: when `create_stack`
//!   or `update_stack` returns, `show_stack` reports `*_COMPLETE` or `*_FAILED`. A delete
//!   takes a moment: a `show_stack` right after `delete_stack` reports `DELETE_IN_PROGRESS`,
//!   the next one finds the stack gone ([`DriverError::NotFound`]); any call about something
//!   else (another stack, zones, servers) also comes after that moment. The capacity is
//!   freed when the delete completes. [`FaultySim::fail_next_stack_deletes`] makes deletes
//!   slower (in progress for N shows, whatever else happens) or fail. A cloud file's
//!   `stack_create_shows: N` makes creates slow the same way: a new stack shows
//!   `CREATE_IN_PROGRESS` to its first N `show_stack` calls (not after an update or a delete).
//! - Time: an `OS::Heat::TestResource` with `wait_secs` / `action_wait_secs` shows its create,
//!   update or delete in progress (and its stacks) for that many seconds of the clock given
//!   with [`SimCloud::set_clock`] (normally the lifecycle's; without one time stands still),
//!   then its outcome (`fail: true`: Heat's `ValueError: resources.T: Test Resource failed T`).
//! - Everything is deterministic: ids come from an [`IdGen`] seeded by the seed given to
//!   [`SimCloud::new`], and a virtual clock (a counter) orders events.
//! - Clones share state (`Arc<Mutex<_>>`), so a clone handed to the code under test and one
//!   kept by the test see the same cloud.
//!
//! # Scheduling (Nova 34)
//! A server build goes through the steps Nova takes, and fails with Nova's texts:
//! 1. The API checks the requested availability zone: an unknown zone, or one that is not
//!    available, is rejected with `The requested availability zone is not available` (HTTP
//!    400): the server is not created and Heat reports
//!    `BadRequest: resources.<name>: The requested availability zone is not available (HTTP 400) (Request-ID: req-...)`.
//! 2. Placement: the candidates are the hosts of the requested zone (all zones when none is
//!    given; Nova 34 maps the zone to a placement aggregate) whose free vCPUs, memory and disk
//!    fit the flavor. No candidate at all gives the fault `No valid host was found. ` (empty
//!    reason, trailing space), as in the captured `server-show-error-novalidhost-placement`
//!    and Tacker's full-zone texts.
//! 3. Filters: hosts whose nova-compute is down (`available: false`) or whose zone is not
//!    available, and hosts that the server group policy excludes (`affinity`: not the host of
//!    the group's members; `anti-affinity`: a host with a member) are removed. When candidates
//!    existed but none is left, the fault is
//!    `No valid host was found. There are not enough hosts available.` (captured
//!    `server-show-error-novalidhost-antiaffinity`).
//! 4. Weighers: `soft-affinity` prefers hosts with more members of the group,
//!    `soft-anti-affinity` hosts with fewer; then most free RAM first (Nova's RAMWeigher);
//!    ties by host name.
//!
//! A server that fails is kept in `ERROR` with its `fault` (code 500) and no host; it uses no
//! capacity.
//!
//! # Heat
//! - Templates are validated before anything is created (Heat's HTTP 400 →
//!   [`DriverError::Invalid`]): structure, resource types (`OS::*`, `AWS::*`, or a key of the
//!   bundle's `files`), references, parameters, unknown intrinsic functions, and the flavor and
//!   image of top-level servers (`Property error: resources.VDU1.properties.flavor: Error
//!   validating value 'm1.huge': The Flavor ID (m1.huge) could not be found.`). A bad flavor in
//!   a nested template fails its parent resource at create time with
//!   `StackValidationFailed: resources.VDU1-0: Property error: ...` (the simulator's choice;
//!   no capture of that case exists).
//! - Independent resources are built in reverse template order (the captured run built
//!   `vdus[1]` before `vdus[0]`); a failed stack reports the first failed resource in template
//!   order, with Heat's texts: `Resource CREATE failed: ResourceInError:
//!   resources.vdus.resources[0]: Went to status ERROR due to "Message: ..., Code: 500"`, and
//!   on update `Resource UPDATE failed: resources.vdus: Resource CREATE failed: ...`.
//! - Update merges parameters (PATCH); servers that failed, were marked unhealthy, or whose
//!   flavor, image, zone or server group changed are replaced, the others kept (a replaced
//!   server is kept until its replacement succeeds, as Heat's convergence engine does);
//!   nested stacks are updated in place; a ResourceGroup shrinks by its highest indexes.
//! - An AutoScalingGroup names its members with Heat's 12-character short ids, replaces
//!   them in rolling-update batches (`rolling_updates`, one member per batch by default) and
//!   words its failures as Heat glues them (see the `heat` module).
//! - `list_resources` lists a stack's resources dependents first (as the captures list `vdus`
//!   before `grp`), then nested stacks level by level with `parent_resource` set.
//!
//! [`StackDriver`]: crate::driver::StackDriver
//! [`ZoneCatalog`]: crate::driver::ZoneCatalog
//! [`ComputeInventory`]: crate::driver::ComputeInventory
//! [`ClusterDriver`]: crate::driver::ClusterDriver
//! [`CloudFile`]: crate::cloud::CloudFile
//! [`DriverError::NotFound`]: crate::driver::DriverError::NotFound
//! [`DriverError::Invalid`]: crate::driver::DriverError::Invalid
//! [`IdGen`]: crate::id::IdGen

mod cloud;
mod cluster;
mod failure;
mod faults;
mod heat;
mod hot;
mod nova;
mod state;
mod test_resource;

pub use cloud::SimCloud;
pub use failure::{BuildFault, StackDeleteFault};
pub use faults::{FaultKind, FaultySim, Method};
