//! arena-load: a load generator whose numbers are true and that is never the bottleneck.
//!
//! `pacer` (when requests are due, when a run stops), `source` (which request comes next: the
//! pacer or the closed users, their sessions' steps, think time, the stop rule), `http` (requests on
//! the wire), `response` (responses parsed from it), `sse` (a stream's server-sent events counted as
//! they arrive) and `session` (a user's cookie jar and captured values, read from responses, used by
//! requests) are pure; `record` keeps histograms and counts;
//! `engine` drives connections on a mio event loop; `run` starts the workers and merges their
//! results; `output` is the JSON result (schemas/load-result.schema.json); `cli` turns flags into a
//! checked Config. No two modules use each other (tests/test_layers.py holds it).

pub mod cli;
pub mod engine;
pub mod http;
pub mod output;
pub mod pacer;
pub mod record;
pub mod response;
pub mod run;
pub mod session;
pub mod source;
pub mod sse;
