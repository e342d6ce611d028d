//! The transport: the accept loop with its connection caps (`listener`), the raw-head recorder, the client's
//! address behind trusted proxies, per-client allowances, bounded reads of a body, and the request observer (route
//! tag, log line, metrics). It knows nothing of the routes: `api::serve` hands it the router.

pub mod body;
pub mod client_address;
pub mod limits;
pub mod listener;
pub mod observe;
pub mod raw_head;
