//! The transport: the accept loop with its connection caps (`listener`), the raw-head recorder, the client's
//! address behind trusted proxies, per-client allowances, bounded reads of a body, the envelope every route is
//! answered through (request id, span, error body) and what it records (log line, metrics). It knows nothing of the routes: `api::serve` hands it the router.

pub mod body;
pub mod client_address;
pub mod envelope;
pub mod limits;
pub mod listener;
pub mod observe;
pub mod raw_head;
