//! How the CLI writes what the core returns for people: operations and VNFCs ([`lcm`]),
//! packages ([`package`]), capacities and allocations ([`promise`]). Pure functions of their
//! inputs, shared by the commands and `vnfm serve`.

pub mod lcm;
pub mod package;
pub mod progress;
pub mod promise;
