//! The strict JSON reader every request body goes through (structs only from objects, integral floats as
//! integers); it lives in `shared` so that the flow definition's own node reader uses it too.

pub use hookflow_shared::strict_json::StrictJson;
